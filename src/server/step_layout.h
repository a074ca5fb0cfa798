// Where a job step's tasks run (srun inside an allocation, docs/steps.md): on the job's
// nodes in rank order (-w: those of them named), -N of them, -n tasks in a block
// distribution (consecutive ranks per node, the first nodes one more; or
// --ntasks-per-node each), each node checked against the GPUs (--gpus-per-task) and
// CPUs (-c) the job holds there. A pure function of the job's record and the request.
#pragma once

#include <string>
#include <vector>

#include "api/protocol.h"
#include "core/status.h"
#include "state/records.h"

namespace hachi::server {

struct StepLayout {
  int ntasks = 0;
  std::vector<std::string> nodes;  // in node-rank order
  std::vector<int> per_node;       // tasks on each of `nodes`
  int cpus = 0;                    // the step's, all tasks together
  int gpus = 0;                    // the step's, all nodes together
};

// The layout, or InvalidArgument naming what does not fit.
Result<StepLayout> LayOutStep(const state::JobRecord& job, const api::StepRequest& req);

}  // namespace hachi::server
