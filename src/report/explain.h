// JobExplain: why a job waits, with numbers, or what happened to it — the "explain"
// object of GET /api/v1/jobs/ID (docs/api.md), printed by `hachi explain ID` and by
// `hachi show job ID` for a pending job. The server fills it (Controller::Explain) from
// the last cycle's diagnosis (queue position, earliest start from the backfill
// timeline) and from the nodes as they are now (sched/inspect.h: each node's verdict
// for the job). Plain values and a JSON codec; thread-compatible.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "state/records.h"

namespace hachi::report {

// Nodes that refuse (or would take) the job for one reason.
struct ExplainNodes {
  // "fits", "busy", "other_user" (a GPU share: the shared GPUs with room hold other
  // users' shares), "reserved", "isolation", "cpus", "memory", "window", "drained",
  // "down", "unsuitable", "not_in_partition".
  std::string reason;
  int count = 0;
  int largest_free = -1;  // largest free GPU set among them; -1 when it does not matter
  std::string text;       // "6 nodes: busy (largest free set 3 GPUs < 4)"
};

struct ExplainEvent {
  Time time = 0;      // 0: not known (requeues are not timed)
  std::string event;  // "submitted", "released", "started", "requeued", "ended"
  std::string text;   // "started on n1 (GPUs 0-3) after waiting 2m10s"
};

struct JobExplain {
  state::JobId job = 0;
  std::string state;  // JobStateName
  Time as_of = 0;     // when the server answered
  // Pending jobs (reason "" otherwise).
  std::string reason;     // the last cycle's word: "Resources", "Priority", ...
  std::string diagnosis;  // the last cycle's sentence (Diagnosis::Format)
  Time diagnosed_at = 0;  // that cycle's time; 0: no cycle has seen the job yet
  std::string partition;
  int queue_position = 0;      // 1-based among the last cycle's pending jobs; 0: unknown
  int queue_length = 0;        // pending jobs the last cycle explained
  int partition_position = 0;  // the same within the job's partition
  int partition_length = 0;
  int needed_gpus = 0;  // per node
  int needed_nodes = 1;
  int gpu_share_milli = 0;  // a GPU share: thousandths of one GPU (needed_gpus is 1)
  // Now, from the nodes: the largest free set on an up node of the partition that suits
  // the job, and the free GPUs on those nodes together.
  int largest_free = 0;
  std::string largest_free_node;  // "" when none
  int free_gpus = 0;
  int fitting_nodes = 0;            // nodes that would take one share of it now
  std::vector<ExplainNodes> nodes;  // every node of the cluster, once
  // The backfill timeline's earliest start, when the scheduler reserved for the job.
  Time earliest_start = 0;  // 0: none computed
  std::string earliest_node;
  state::JobId blocking_job = 0;  // the running job whose end frees the GPUs, when known
  std::vector<ExplainEvent> history;  // oldest first
};

std::string JobExplainToJson(const JobExplain& e);  // compact, keys sorted
Result<JobExplain> JobExplainFromJson(std::string_view text);

}  // namespace hachi::report
