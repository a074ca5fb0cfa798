// Score and select phases: which node(s) and which GPUs, chosen together (DESIGN.md
// §4.1). For each candidate node the GPU set comes from the node's own free mask and
// link matrix (alloc/), so a node is only chosen with a good set on it.
//
//   kFirstFit ("fifo", "easy"): the lowest-index node with enough free GPUs, its
//     lowest free GPU indices; gangs take the lowest-index fitting nodes of one class.
//   kBestFit ("hachi"): the node with the fewest free GPUs that still fit (packs small
//     jobs onto busy nodes, keeps whole nodes free), then the best GPU set there
//     (bottleneck link of alloc::AllocCache::Pick's choice), then the lowest index.
//     Gangs: one class, the block that hosts all nodes with the best fit, else spread.
//
// GPU shares (gpu_share.h), every style: packed onto the fullest shared GPU that still
// has room (milli and memory), on the busiest node; else a free GPU chosen as for a
// 1-GPU job (best fit: alloc/ prefers a GPU whose NVLink partner is busy).
//
// Fragmentation (kBestFit with ClusterState::workload non-empty): GPU shares and
// single-node jobs that are not whole-node look at every fitting node, and at each
// distinct GPU option there (alloc/'s pick of free GPUs; for a share, each shared GPU
// with room too). Keys, in order: FragScore of the node's rise in fragmentation
// (fragmentation.h), the bottleneck link of the GPU set, not opening an empty node,
// packing (CPU and GPU left, relative to the largest node), for a share the fullest
// GPU; then the lowest node index. Gangs and whole-node jobs are placed as above.
//
// Gangs never mix interconnect classes, GPU models or node sizes. Candidate nodes come
// from the context's free-count buckets, so a 1-GPU job looks at the fullest nodes
// first and stops early. Not thread-safe (per cycle; the memo is the Scheduler's).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "alloc/node_model.h"
#include "sched/context.h"
#include "sched/filter.h"

namespace hachi::sched {

enum class PlacementStyle : uint8_t { kFirstFit, kBestFit };

// Bottleneck link score of `gpus` on `model` (higher is better); a single GPU has no
// pair and scores kNoPair, the top.
int Bottleneck(const alloc::NodeModel& model, GpuSet gpus);

class Placer {
 public:
  explicit Placer(PlacementStyle style) : style_(style) {}
  PlacementStyle style() const { return style_; }

  // Chooses node(s) and GPUs for `job` to start now, around this cycle's reservations.
  // False when none fit; `tally` then counts why the nodes looked at refused.
  bool PlaceNow(CycleContext& ctx, const JobShape& job, std::vector<Allocation>* out,
                VerdictTally* tally);

  // The GPUs of one share on `node` out of `avail` (which has room).
  GpuSet ChooseGpus(CycleContext& ctx, const JobShape& job, int node, GpuSet avail);

  // Among `cands` (nodes that fit at one time, ascending), the `job.nodes` nodes for
  // a gang: one gang class; best fit prefers one block. Empty when no class has enough.
  std::vector<int> SelectGang(const CycleContext& ctx, const JobShape& job,
                              const std::vector<int>& cands,
                              const std::vector<int>& free_counts) const;

 private:
  bool PlaceSingle(CycleContext& ctx, const JobShape& job, Allocation* out,
                   VerdictTally* tally);
  // A GPU share on a GPU that already holds shares: the fullest that fits, on the
  // busiest node. False when none has room.
  bool PackShare(CycleContext& ctx, const JobShape& job, Allocation* out,
                 VerdictTally* tally);
  // With a workload (CycleContext::frag_active), `hachi`'s single-node placement:
  // the node and GPUs whose fragmentation rises least (fragmentation.h), then the
  // best-connected GPU set, then not opening an empty node, then packing.
  bool PlaceByFragmentation(CycleContext& ctx, const JobShape& job, Allocation* out,
                            VerdictTally* tally);
  bool PlaceGang(CycleContext& ctx, const JobShape& job, std::vector<Allocation>* out,
                 VerdictTally* tally);
  // The best bottleneck any set of `count` GPUs can have on `model` (all free): a node
  // reaching it cannot be beaten, so the scan stops there.
  int IdealBottleneck(CycleContext& ctx, const alloc::NodeModel& model, int count);

  PlacementStyle style_;
  std::unordered_map<uint64_t, int> ideal_;  // (model key, count) -> bottleneck
};

}  // namespace hachi::sched
