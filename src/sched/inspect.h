// Inspect: questions about a snapshot asked outside the cycle — for metrics (how many
// free GPUs are stranded) and for `hachi explain` (which nodes refuse a job, and why).
// They answer with the cycle's own node check (filter.h: CheckNode on a fresh
// CycleContext), so "fits" here means what the scheduler would accept, CPUs, memory,
// isolation and time windows included — not a count of free GPUs.
//
// Pure functions of (snapshot, now); no reservations exist outside a cycle, so no node
// is refused as "reserved". Cost O(nodes + pending jobs) per call. Thread-safe.
#pragma once

#include <array>
#include <vector>

#include "core/time.h"
#include "sched/cluster.h"
#include "sched/filter.h"

namespace hachi::sched {

// Free GPUs per partition (indexed as ClusterState::partitions) that cannot serve the
// smallest waiting multi-GPU job of that partition: k is the fewest GPUs per node any
// pending job of the partition asks for, among those with k >= 2 that pass the job-level
// checks (not held, no unmet dependency, within quota); a node's free GPUs count when
// it is up and eligible for such a job but no pending job of k GPUs per node fits it
// now. 0 for a partition with no such job. A node in two partitions counts in both.
std::vector<int> FragmentedGpus(const ClusterState& state, Time now);

// Why each node of the cluster does or does not take one share of `job` now.
struct NodeBreakdown {
  int nodes = 0;             // nodes in the cluster
  int not_in_partition = 0;  // not in the job's partition
  int unsuitable = 0;        // in it, but wrong GPU model or memory, or too few GPUs
  std::array<int, kNodeVerdicts> verdicts{};  // the rest, by CheckNode's verdict
  int drained = 0;  // of verdicts[kDown], the drained nodes (the rest are down)
  // Per verdict, the largest free set (healthy, unallocated GPUs) among those nodes.
  std::array<int, kNodeVerdicts> largest_free{};
  // Largest free set on an up node of the partition that suits the job, and where
  // (-1: none).
  int largest_free_gpus = 0;
  int largest_free_node = -1;
  int free_gpus = 0;  // free GPUs on those nodes, together
  // A GPU share: of verdicts[kGpus] (no free GPU for it), the nodes where a shared GPU
  // has room but holds another user's shares (an MPS server serves one user per GPU),
  // and those GPUs together. A node whose shared GPU with room is the job's user's
  // counts under kFits instead.
  int other_user = 0;
  int other_user_gpus = 0;
};
// kFits counts nodes that would take a share now (a gang needs `nodes` of them).
// `job.partition` must index state.partitions; else everything is "not in partition".
NodeBreakdown ExplainNodes(const ClusterState& state, const Job& job, Time now);

}  // namespace hachi::sched
