// Where and when a job that is not submitted would start (sbatch --test-only): the job
// is added to a copy of the snapshot's queue and one scheduling cycle is run; its start
// now, its backfill reservation, or its diagnosis's earliest start is the answer.
//
// Pure: a function of the snapshot, the job and `now` (the scheduler's memo only
// caches); the caller owns `scheduler` for the call (not thread-safe).
#pragma once

#include <vector>

#include "core/time.h"
#include "sched/cluster.h"
#include "sched/scheduler.h"

namespace hachi::sched {

struct PredictedStart {
  bool known = false;  // false: the scheduler reserved nothing for it this cycle
  Time start = kNever;
  std::vector<Allocation> allocations;  // node indices into the snapshot (may be empty
                                        // when only the earliest node is known)
  int earliest_node = -1;
};

// `job` as ValidateRequest returned it; its id is replaced by one above every job in
// `state`, so it never collides.
PredictedStart PredictStart(Scheduler& scheduler, ClusterState state, Job job, Time now);

}  // namespace hachi::sched
