// CycleContext: the scratch state of one scheduling cycle (STYLE.md: Nomad EvalContext,
// Kubernetes CycleState). Built from the snapshot at the start of a cycle, changed by
// the phases as they start and reserve jobs, dropped at the end. Nothing here outlives
// the cycle, so the phases stay pure functions of (snapshot, now, config).
//
// Holds: a working copy of each node's free GPUs/CPUs/memory and isolation flags, the
// nodes bucketed by free-GPU count (so a 1-GPU job does not scan 1,000 nodes), the
// per-partition eligibility of nodes, quota usage, and the backfill timeline.
// Thread-compatible (one cycle, one thread).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "alloc/cache.h"
#include "sched/cluster.h"
#include "sched/fragmentation.h"
#include "sched/gpu_share.h"
#include "sched/timeline.h"

namespace hachi::sched {

// One node as the cycle sees it: the snapshot minus this cycle's starts.
struct NodeWork {
  GpuSet free;  // free now, healthy, minus starts this cycle
  int free_cpus = 0;
  int64_t free_memory_mib = 0;
  bool up = false;
  bool whole_busy = false;      // runs a whole-node job (or started one this cycle)
  bool whole_reserved = false;  // reserved for a whole-node job this cycle
  bool shared_busy = false;     // runs a shared-partition job
  GpuSet shared;                // GPUs holding GPU shares (never in `free`)
  int gang_class = 0;           // (interconnect, GPU model, GPU count) class id
  int block = 0;                // block label id
  int window_owner = -1;        // partition whose time window owns the node, or -1
};

// Up nodes grouped by free-GPU count, each group sorted by node index. Moving a node
// costs a memmove of at most a few KB; finding fitting nodes skips the empty counts.
class FreeBuckets {
 public:
  void Reset(int max_gpus);
  void Add(int node, int free_count);
  void Move(int node, int from, int to);
  const std::vector<int>& At(int free_count) const { return buckets_[free_count]; }
  int max_free() const;  // largest free count of any up node (0 when none)
  int NodesWithAtLeast(int k) const;

 private:
  std::array<std::vector<int>, GpuSet::kMaxGpus + 1> buckets_;
  int max_gpus_ = 0;
};

// The nodes that could ever hold a share of a kind of job: partition member, GPU model
// and memory suit, big enough. One per (partition, model, min memory) in the queue.
struct EligibleSet {
  int partition = -1;
  std::string gpu_model;
  int64_t min_gpu_memory_mib = 0;
  // Node selection (features.h): the request's constraint, node list,
  // exclusion and node count as one key ("" for none); `required`, the node list of a
  // gang that names fewer nodes than it has (all of them must be in the gang; a list
  // naming every node limits `ok` instead); `choice`, the [...] alternative a gang's
  // nodes share (-1: none); `bad_selection`, the selection names a node the cluster
  // no longer has (no node is ok).
  std::string select_key;
  std::vector<int> required;
  int choice = -1;
  bool bad_selection = false;
  std::vector<uint8_t> ok;  // per node
  std::vector<int> nodes;   // the ok nodes, ascending
  int up = 0;               // of which up
};

// A pending job as the phases read it: resolved once per cycle, no strings.
struct JobShape {
  const Job* job = nullptr;
  int gpn = 0;  // GPUs per node
  int nodes = 1;
  int cpus = 0;  // per node
  int64_t memory_mib = 0;
  Duration limit = 0;
  bool whole = false;          // whole-node job
  int share_milli = 0;         // > 0: a share of one GPU (gpn is 1), gpu_share.h
  int64_t gpu_memory_mib = 0;  // promised to the share
  bool mig = false;            // MIG devices (mig.h): gpn of job->req.mig_profile
  int eligible = -1;           // index into CycleContext::eligible
  int total_gpus() const { return gpn * nodes; }
};

// Per-partition free-GPU facts for diagnoses, recomputed lazily after a change.
struct PartitionFree {
  uint64_t version = ~uint64_t{0};
  int largest = 0;
  int largest_node = -1;
  int total = 0;
};

struct CycleContext {
  CycleContext(const ClusterState& s, Time t, alloc::AllocCache* c)
      : CycleContext(s, t, c, nullptr) {}
  // `reuse`: a Timeline whose memory the cycle may reuse (the Scheduler keeps one);
  // nullptr: the context owns its own.
  CycleContext(const ClusterState& s, Time t, alloc::AllocCache* c, Timeline* reuse)
      : state(s), now(t), cache(c), timeline(reuse ? *reuse : own_timeline_) {}
  CycleContext(const CycleContext&) = delete;
  CycleContext& operator=(const CycleContext&) = delete;

  // Fills the working copy, buckets, quotas and timeline from the snapshot.
  void Init();
  // Placement's pass over node costs (Node::cost_rank): nodes above it do not fit.
  int cost_limit = std::numeric_limits<int>::max();
  // Resolves a pending job; finds or adds its eligible set.
  JobShape Shape(const Job& job);
  // Books `a` (a start of `job`) into the working copy, buckets, quotas, timeline.
  void Book(const JobShape& job, const Allocation& a);
  // Free-GPU facts of a partition now (lazy).
  const PartitionFree& FreeIn(int partition);
  // Lazy parts, built on first use: most cycles never reserve or place a gang.
  void EnsureTimeline();     // releases of running jobs and of this cycle's starts
  void EnsureGangClasses();  // NodeWork::gang_class and ::block

  // Time windows: may a job of `partition` run over [t, t + d) on `node` (true unless
  // the node is another partition's window node and [t, t + d) reaches a window).
  bool WindowAllows(int node, int partition, Time t, Duration d) const {
    const int owner = nodes[node].window_owner;
    return owner < 0 || owner == partition || WindowFree(owner, t, d);
  }
  bool WindowFree(int owner, Time t, Duration d) const;
  // Running jobs per node (indices into state.running), built on first use: only the
  // preemption phases need it.
  const std::vector<std::vector<int>>& RunningOn();

  // GPU shares: milli, memory and user of the shares on `gpu` of `node` now (a
  // reference, valid until the next Book).
  const GpuShareUse& ShareUseAt(int node, int gpu) const {
    if (share_use.empty() || gpu >= static_cast<int>(share_use[node].size())) {
      return NoShareUse();
    }
    return share_use[node][gpu];
  }

  int UserUsed(const std::string& user) const;
  int AccountUsed(const std::string& account) const;

  // Fragmentation (fragmentation.h), when the snapshot has a workload and the policy
  // uses it (`frag` set before Init). FreeView: what F depends on for `node` now;
  // FragAt: its F now, computed on first use and dropped when Book changes the node.
  bool frag_active() const { return frag != nullptr && frag->active(); }
  NodeFree FreeView(int node);
  double FragAt(int node);
  // Largest CPUs and GPU count of any node (packing scores are relative to them).
  int MaxNodeCpus();
  int MaxNodeGpus();

  // Field groups, by who writes them (every phase may read them). A phase changes
  // the context only through Book (a start), Backfill::Book (a reservation: timeline
  // holds, NodeWork::whole_reserved, version), the preemption phase's victim marking
  // (victims, timeline releases moved earlier, version) and the Ensure* / lazy
  // getters above.

  // Constant for the cycle.
  const ClusterState& state;
  const Time now;
  alloc::AllocCache* const cache;
  FragMeasure* frag = nullptr;  // the Scheduler's memo; nullptr: no fragmentation

  // Init fills these from the snapshot; Book keeps them current as jobs start.
  // Filter (CheckNode) and placement read them.
  std::vector<NodeWork> nodes;  // gang_class / block: EnsureGangClasses
  FreeBuckets buckets;
  // GPU shares: nodes with a shared GPU, ascending; per node, per GPU use and owner
  // (empty when no node shares, so a cycle without shares pays nothing).
  std::vector<int> shared_nodes;
  std::vector<std::vector<GpuShareUse>> share_use;
  // MIG (mig.h): nodes with MIG devices, ascending; per node, per Node::mig slot,
  // non-zero when taken (empty when no node has MIG devices).
  std::vector<int> mig_nodes;
  std::vector<std::vector<uint8_t>> mig_busy;
  // Quota usage, only for users/accounts that have a limit (filter: CheckJob).
  std::unordered_map<std::string, int> user_used;
  std::unordered_map<std::string, int> account_used;

  // Eligibility: Shape adds a set per (partition, model, min memory) on first use;
  // Init sizes the per-partition tables. Read by filter, placement, backfill.
  std::vector<EligibleSet> eligible;
  std::vector<int> default_eligible;  // per partition: index into `eligible` or -1
  std::vector<PartitionFree> partition_free;  // FreeIn's lazy cache (diagnoses)

  // Time windows, set by Init: nodes some partition owns in a window, ascending; per
  // partition, the start of its window that is active at `now` or comes next (kNever:
  // no window). Read by the filter (WindowAllows) and the window preemptions.
  std::vector<int> window_nodes;
  std::vector<Time> window_start_now;
  // Preemption: running jobs (indices into state.running) the preemption phase chose
  // as victims this cycle, sorted (written by it alone); whether any partition may
  // preempt lower tiers (Init).
  std::vector<int> victims;
  bool preempting_partitions = false;

 private:
  Timeline own_timeline_;  // before `timeline`, which may refer to it

 public:
  // Backfill's view of the future: running jobs' releases (EnsureTimeline; the
  // preemption phase moves its victims' earlier), this cycle's starts (Book) and
  // reservations (Backfill::Book).
  Timeline& timeline;
  // Bumped by every start, reservation and preemption: memos keyed by it
  // (the scheduler's failed-placement memo, partition_free) know when to recompute.
  uint64_t version = 0;

 private:
  // Book's part for a GPU share of `user` (the GPU's owner from then on).
  void BookShare(const Allocation& a, const std::string& user);
  // Shape's part for a request with a node selection: clears `e->ok` where
  // the selection refuses a node; sets required, choice, bad_selection.
  void ApplySelection(const JobRequest& r, int job_nodes, EligibleSet* e);
  void EnsureFrag();  // per-node model masks, F slots, maxima

  bool frag_ready_ = false;
  std::vector<uint64_t> model_mask_;  // per node: FragMeasure::ModelMask
  std::vector<double> node_frag_;     // per node: F, or < 0 when not computed
  int max_cpus_ = 0, max_gpus_ = 0;

  bool timeline_ready_ = false;
  bool gang_ready_ = false;
  bool running_on_ready_ = false;
  std::vector<std::vector<int>> running_on_;
  std::vector<std::pair<int, Timeline::Release>> started_;  // until the timeline exists
};

}  // namespace hachi::sched
