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
// has room (milli and memory) and holds the same user's shares (one MPS server per
// GPU serves one user), on the busiest node; else a free GPU chosen as for a 1-GPU
// job (best fit: alloc/ prefers a GPU whose NVLink partner is busy). Shared GPUs with
// room that only another user's shares keep count in VerdictTally::other_user_gpus.
//
// MIG devices (mig.h), every style: the node with enough free devices of the profile
// that has the fewest left after (best fit), then the lowest index; its lowest free
// devices. The free and total devices of the profile on the eligible up nodes are
// counted in VerdictTally::mig_free / mig_total for the diagnosis.
//
// Fragmentation (kBestFit with ClusterState::workload non-empty): GPU shares and
// single-node jobs that are not whole-node look at every fitting node, and at each
// distinct GPU option there (alloc/'s pick of free GPUs; for a share, each shared GPU
// with room that is the same user's, too). Keys, in order: FragScore of the node's rise
// in fragmentation (fragmentation.h), the bottleneck link of the GPU set, not opening an
// empty node, packing (CPU and GPU left, relative to the largest node), for a share the
// fullest GPU; then the lowest node index. Gangs and whole-node jobs are placed as above.
//
// Gangs never mix interconnect classes, GPU models or node sizes. Candidate nodes come
// from the context's free-count buckets, so a 1-GPU job looks at the fullest nodes
// first and stops early. Each style is a type (Scorer, MakeScorer), chosen once: the
// scans ask it and never test the style. An allocator failure (alloc/ refusing a pick
// the filters said fits) is an error the plan carries (Plan::errors, Reason::kInternal),
// never a silent other choice. Not thread-safe (per cycle; the memo is the Scheduler's).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "alloc/node_model.h"
#include "core/status.h"
#include "sched/context.h"
#include "sched/filter.h"

namespace hachi::sched {

// The registry's name for a style (scheduler.cc PolicySpec); MakeScorer makes its type.
enum class PlacementStyle : uint8_t { kFirstFit, kBestFit };

// Bottleneck link score of `gpus` on `model` (higher is better); a single GPU has no
// pair and scores kNoPair, the top.
int Bottleneck(const alloc::NodeModel& model, GpuSet gpus);

// A placement style as a type: what differs between first fit and best fit, asked by
// the Placer's scans, which never test the style themselves. One object per Placer,
// made once (MakeScorer). Not thread-safe (best fit memoises ideal bottlenecks).
class Scorer {
 public:
  // The best node of a single-node scan so far (Placer::PlaceSingle).
  struct Best {
    int node = -1;
    GpuSet gpus;
    int quality = -1;  // best fit: bottleneck of `gpus`
    int ideal = 0;     // best fit: the best bottleneck any set could reach there
  };

  virtual ~Scorer() = default;

  // GPUs for one share of `job` (not whole-node, gpn >= 1) on `node` out of `avail`
  // (enough free). An allocator failure is an error, never a silent other choice.
  virtual Result<GpuSet> ChooseGpus(CycleContext& ctx, const JobShape& job,
                                    const Node& node, GpuSet avail) = 0;
  // Whether a single-node job is placed by fragmentation (PlaceByFragmentation).
  virtual bool ByFragmentation(const CycleContext& ctx, const JobShape& job) const = 0;

  // The single-node scan: free-count buckets from `job.gpn` up, nodes ascending in
  // each. Visits: whether `node` may still beat `best` (false ends the bucket).
  // Offer: a fitting node and its GPUs; true ends the bucket. Settled: after a
  // bucket, whether the scan is over.
  virtual bool Visits(const Best& best, int node) const = 0;
  virtual bool Offer(CycleContext& ctx, const JobShape& job, int node, GpuSet gpus,
                     Best* best) = 0;
  virtual bool Settled(const Best& best) const = 0;

  // Among `cands` (nodes that fit at one time, ascending; `free_counts` their free
  // GPUs), the `job.nodes` nodes of a gang, ascending: one gang class. Empty when no
  // class has enough.
  virtual std::vector<int> SelectGang(const CycleContext& ctx, const JobShape& job,
                                      const std::vector<int>& cands,
                                      const std::vector<int>& free_counts) const = 0;
};

std::unique_ptr<Scorer> MakeScorer(PlacementStyle style);

class Placer {
 public:
  explicit Placer(PlacementStyle style) : scorer_(MakeScorer(style)) {}
  // Any style (tests: one whose allocator fails).
  explicit Placer(std::unique_ptr<Scorer> scorer) : scorer_(std::move(scorer)) {}

  // Chooses node(s) and GPUs for `job` to start now, around this cycle's reservations,
  // on the cheapest nodes that fit (Node::cost_rank). False when none fit; `tally` then
  // counts why the nodes looked at refused. False with failed() when the allocator failed
  // (the job is not started; errors()).
  bool PlaceNow(CycleContext& ctx, const JobShape& job, std::vector<Allocation>* out,
                VerdictTally* tally);
  // The last PlaceNow ended on an allocator failure.
  bool failed() const { return failed_; }

  // The GPUs of one share on `node` out of `avail` (which has room): all of them for
  // a whole-node job, none for a job without GPUs, else the style's choice. An
  // allocator failure is returned and also kept in the error list.
  Result<GpuSet> ChooseGpus(CycleContext& ctx, const JobShape& job, int node,
                            GpuSet avail);

  // Among `cands` (nodes that fit at one time, ascending), the `job.nodes` nodes for
  // a gang (Scorer::SelectGang). A gang whose -w list names fewer nodes than it has
  // (EligibleSet::required) gets all of them, and the rest as the style
  // picks among the candidates of their class; none when one of them is no candidate.
  std::vector<int> SelectGang(const CycleContext& ctx, const JobShape& job,
                              const std::vector<int>& cands,
                              const std::vector<int>& free_counts) const;

  // Allocator failures since the last call ("job 12 on node n3: allocator: ..."), for
  // Plan::errors; clears the list.
  std::vector<std::string> TakeErrors() { return std::exchange(errors_, {}); }

 private:
  // PlaceNow over the nodes up to CycleContext::cost_limit.
  bool PlaceAt(CycleContext& ctx, const JobShape& job, std::vector<Allocation>* out,
               VerdictTally* tally);
  bool PlaceSingle(CycleContext& ctx, const JobShape& job, Allocation* out,
                   VerdictTally* tally);
  // A GPU share on a GPU that already holds shares of its user: the fullest that
  // fits, on the busiest node. False when none has room.
  bool PackShare(CycleContext& ctx, const JobShape& job, Allocation* out,
                 VerdictTally* tally);
  // With a workload (CycleContext::frag_active), `hachi`'s single-node placement:
  // the node and GPUs whose fragmentation rises least (fragmentation.h), then the
  // best-connected GPU set, then not opening an empty node, then packing.
  bool PlaceByFragmentation(CycleContext& ctx, const JobShape& job, Allocation* out,
                            VerdictTally* tally);
  // MIG devices of job->req.mig_profile (mig.h): best fit by free devices left.
  bool PlaceMig(CycleContext& ctx, const JobShape& job, Allocation* out,
                VerdictTally* tally);
  bool PlaceGang(CycleContext& ctx, const JobShape& job, std::vector<Allocation>* out,
                 VerdictTally* tally);

  std::unique_ptr<Scorer> scorer_;
  bool failed_ = false;
  std::vector<std::string> errors_;
};

}  // namespace hachi::sched
