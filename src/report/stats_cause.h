// The likely cause of a slow partition, for `hachi stats` (docs/cli.md): when a
// partition's median wait passes the alert threshold, which of four explanations the
// numbers support — its pending jobs are mostly held back by a quota; there are
// enough free GPUs but on no node together (fragmentation); what runs plus what waits
// exceeds what its nodes hold (too few nodes); one user holds most of its queue (a
// burst). The inputs are the last scheduling cycle's pending reasons and the nodes as
// they are now (the server gathers them: Controller::PartitionLoads).
//
// Pure functions; thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/time.h"
#include "sched/plan.h"

namespace hachi::report {

// One pending (not held) job, as the classifier reads it.
struct PendingJob {
  std::string partition;
  std::string user;
  int gpus = 0;           // total; a share counts as 0
  int gpus_per_node = 0;  // 0 for a share
  Duration time_limit = 0;
  sched::Reason reason = sched::Reason::kNone;  // the last cycle's ("" before one ran)
};

// A partition now: its nodes and GPUs, and a summary of its pending jobs.
struct PartitionLoad {
  std::string partition;
  // Nodes and GPUs (a node in two partitions counts in both).
  int nodes = 0;
  int nodes_up = 0;
  int gpus = 0;            // in service: on up nodes, healthy
  int allocated_gpus = 0;  // of those, held by jobs
  int free_gpus = 0;
  int largest_free = 0;           // largest free set on one up node
  std::string largest_free_node;  // "" when no GPU is free
  // Pending jobs, not held.
  int pending_jobs = 0;
  int pending_gpus = 0;
  double pending_gpu_hours = 0;  // GPUs x time limit
  int quota_jobs = 0;            // pending for a user or account GPU quota
  int fragmented_jobs = 0;       // enough free GPUs in all, no node set with enough
  int needed_gpus = 0;           // fewest GPUs per node a fragmented job needs (0: none)
  std::string top_user;          // the user with the most pending jobs ("" when none)
  int top_user_jobs = 0;
  int top_user_gpus = 0;
  std::map<std::string, int> reasons;  // pending jobs per reason word ("Resources": 3)
};

// Adds `pending` to the loads of their partitions (those absent from `loads` are left
// out). `loads` carries the node figures already.
void AddPending(std::vector<PartitionLoad>* loads,
                const std::vector<PendingJob>& pending);

struct AlertCause {
  std::string kind;  // "quota", "fragmentation", "user_burst", "too_few_nodes", "unknown"
  std::string text;  // one line with the numbers behind it
};

// The causes the numbers support, most specific first: quota (more than half of the
// pending jobs wait for a quota), fragmentation (more than half wait with enough free
// GPUs in the partition but no node holding enough of them), user_burst (one user has
// more than half of the pending jobs or pending GPUs, with at least 2 pending), then
// too_few_nodes (allocated plus pending GPUs exceed the GPUs in service). One "unknown"
// entry, with the pending reasons, when none holds.
std::vector<AlertCause> ClassifyAlert(const PartitionLoad& load);

}  // namespace hachi::report
