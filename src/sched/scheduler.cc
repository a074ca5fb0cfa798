// The policy registry and the cycle wiring: which phase runs when, and why.
#include "sched/scheduler.h"

#include <algorithm>
#include <array>

#include "alloc/cache.h"
#include "sched/backfill.h"
#include "sched/context.h"
#include "sched/diagnose.h"
#include "sched/filter.h"
#include "sched/fragmentation.h"
#include "sched/placement.h"
#include "sched/preempt.h"
#include "sched/priority.h"

namespace hachi::sched {
namespace {

// A policy is a choice per phase (docs/scheduler.md, "Policies").
struct PolicySpec {
  std::string_view name;
  OrderKind order;
  PlacementStyle placement;
  int depth;           // reservations per cycle; -1: SchedConfig::backfill_depth
  bool stop_at_block;  // strict FIFO: nothing passes the first job that does not fit
  bool preempt;        // higher tiers may preempt lower ones (Partition settings)
};

constexpr std::array<PolicySpec, 3> kPolicies = {{
    {"hachi", OrderKind::kMultifactor, PlacementStyle::kBestFit, -1, false, true},
    {"easy", OrderKind::kSubmit, PlacementStyle::kFirstFit, 1, false, false},
    {"fifo", OrderKind::kSubmit, PlacementStyle::kFirstFit, 0, true, false},
}};

const PolicySpec* FindSpec(std::string_view name) {
  for (const PolicySpec& p : kPolicies) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

// Failed placements this cycle, by job shape: since nothing changed (same version), a
// job of the same shape and a time limit at least as long fails too — more of the
// reserved GPUs overlap a longer run — so it need not scan the nodes again. A share's
// user is part of its shape: shared GPUs take only their owner's shares (gpu_share.h).
struct FailMemo {
  int eligible, gpn, nodes, cpus;
  int64_t memory_mib;
  int share_milli;
  int64_t gpu_memory_mib;
  bool whole;
  Duration limit;
  const std::string* user;  // the job's (in the snapshot, which outlives the cycle)
  VerdictTally tally;
  bool Covers(const JobShape& s) const {
    return eligible == s.eligible && gpn == s.gpn && nodes == s.nodes && cpus == s.cpus &&
           memory_mib == s.memory_mib && whole == s.whole && s.limit >= limit &&
           share_milli == s.share_milli && gpu_memory_mib == s.gpu_memory_mib &&
           (share_milli == 0 || *user == s.job->req.user);
  }
};

class SchedulerImpl final : public Scheduler {
 public:
  SchedulerImpl(const SchedConfig& config, const PolicySpec& spec)
      : config_(config),
        spec_(spec),
        depth_(spec.depth >= 0 ? spec.depth : config.backfill_depth),
        order_(spec.order, config.priority_period),
        placer_(spec.placement),
        backfill_(depth_, &placer_),
        preempter_(&placer_, &backfill_) {}

  const SchedConfig& config() const override { return config_; }

  // The cycle. Each line is a phase; the order is the point.
  Plan Schedule(const ClusterState& state, Time now) override {
    Plan plan;
    placer_.TakeErrors();  // a cycle's errors are its own
    EnsureTables(state);   // alloc/ tables per layout, once: every Pick is a lookup
    CycleContext ctx(state, now, &cache_, &timeline_);
    // Fragmentation-aware placement (hachi) when the caller supplies a workload.
    if (spec_.placement == PlacementStyle::kBestFit && !state.workload.empty()) {
      frag_.Reset(state.workload);
      ctx.frag = &frag_;
    }
    ctx.Init();  // scratch: free resources, quotas and isolation from the snapshot
    // Windows (every policy): the due preemptions first, so that their victims' exit
    // is on the timeline before anyone reserves; and when to wake up next.
    preempter_.ForWindows(ctx, &plan);
    const bool preempt = spec_.preempt && Preempter::Possible(ctx);  // tiers: any use?
    fails_.clear();
    fails_version_ = ctx.version;
    const std::vector<int>& order = order_.Order(state, now);  // order: who goes first
    Cycle cycle{ctx, backfill_, plan, preempt, false, 0, {}};  // reserve: depth 0/1/N
    if (config_.explain) plan.pending.reserve(order.size());
    for (size_t pos = 0; pos < order.size(); ++pos) {
      // Lean cycles stop once nothing left can start now (no reservation is needed
      // to protect anyone from a start that cannot happen) — unless a job left may
      // still preempt.
      if (!config_.explain &&
          (cycle.blocked ||
           (!preempt && ctx.shared_nodes.empty() && ctx.mig_nodes.empty() &&
            order_.min_gpus_from()[pos] > ctx.buckets.max_free()))) {
        break;
      }
      const Job& job = state.pending[order[pos]];
      Diagnosis d = Begin(job, pos, order_.priorities()[order[pos]]);
      if (cycle.blocked || plan.considered >= config_.backfill_max_jobs) {
        d.reason = Reason::kPriority;  // not examined: jobs ahead come first
      } else {
        ++plan.considered;
        if (Step(cycle, job, &d)) continue;  // started
        cycle.blocked = spec_.stop_at_block && IsFitReason(d.reason);
      }
      if (config_.explain) plan.pending.push_back(d);
    }
    if (config_.explain) FlushReservations(cycle);  // earliest starts for the rest
    plan.errors = placer_.TakeErrors();  // allocator failures: internal, for the log
    return plan;
  }

 private:
  // A blocked job waiting for its reservation: computed just before the next start
  // attempt (which must respect it) or at the end, never needlessly.
  struct Deferred {
    JobShape shape;
    int diag = -1;  // index into plan.pending, or -1
  };
  struct Cycle {
    CycleContext& ctx;
    Backfill& backfill;
    Plan& plan;
    bool preempt = false;  // tier preemption may happen this cycle
    bool blocked = false;  // strict FIFO stopped: the rest wait for priority
    int slots = 0;         // reservation slots taken (Backfill::HasRoom)
    std::vector<Deferred> deferred;
  };

  static bool IsFitReason(Reason r) {
    return r != Reason::kHeld && r != Reason::kDependency &&
           r != Reason::kDependencyNeverMet && r != Reason::kUserQuota &&
           r != Reason::kAccountQuota && r != Reason::kBeginTime &&
           r != Reason::kDeadline && r != Reason::kBadConstraints;
  }

  static Diagnosis Begin(const Job& job, size_t pos, double priority) {
    Diagnosis d;
    d.job = job.id;
    d.needed_gpus = job.req.GpusPerNode();
    d.needed_nodes = std::max(job.req.nodes, 1);
    d.queue_position = static_cast<int>(pos) + 1;
    d.priority = priority;
    return d;
  }

  // One job through the phases: true when it starts now.
  bool Step(Cycle& c, const Job& job, Diagnosis* d) {
    CycleContext& ctx = c.ctx;
    const JobShape s = ctx.Shape(job);
    if (s.eligible < 0) {  // unknown partition: validation would have refused it
      d->reason = Reason::kNodesUnavailable;
      return false;
    }
    // Filter (job): held, dependencies, quotas — cheap, and no node changes them.
    d->reason = CheckJob(ctx, s, &d->quota_used, &d->quota_limit);
    if (d->reason == Reason::kBeginTime) {  // a cycle when it may start
      c.plan.wake_at = std::min(c.plan.wake_at, job.req.begin_time);
    }
    if (d->reason != Reason::kNone) return false;
    // -C/-w/-x that no node can ever satisfy: never placed, never reserved.
    if (ctx.eligible[s.eligible].nodes.empty() &&
        !ctx.eligible[s.eligible].select_key.empty()) {
      d->reason = Reason::kBadConstraints;
      return false;
    }
    // Filter + score + select (nodes): start now if it fits around the reservations,
    // which must exist before any start is decided.
    VerdictTally tally;
    if (MightFit(ctx, s)) {
      FlushReservations(c);
      if (TryPlace(ctx, s, &tally)) {
        const bool jumped = !c.plan.reservations.empty();  // ahead of a reserved job
        for (const Allocation& a : allocs_) ctx.Book(s, a);
        c.plan.starts.push_back({job.id, allocs_, jumped});
        c.plan.backfilled += jumped;
        return true;
      }
      // The allocator failed (a bug in alloc/ or here): not started, not reserved,
      // and said so (Plan::errors), rather than placed some other way.
      if (placer_.failed()) {
        d->reason = Reason::kInternal;
        return false;
      }
    }
    // Preempt (hachi): a job of a preempting partition that would not start soon stops
    // the cheapest lower-tier jobs and holds their GPUs from their exit: no slot. The
    // reservations of the jobs ahead exist first, so it takes nothing of theirs.
    // A MIG job does not preempt (mig.h): its victims' devices are not modelled.
    if (c.preempt && !s.mig && ctx.state.partitions[job.partition].preempt_lower_tiers) {
      FlushReservations(c);
      if (preempter_.ForJob(ctx, s, &c.plan, d)) return false;
    }
    // Reserve: the first `depth` blocked jobs that could ever fit hold their earliest
    // start (computed lazily).
    const int diag = config_.explain ? static_cast<int>(c.plan.pending.size()) : -1;
    // A MIG job holds no reservation (mig.h): it waits for a device to come free.
    if (!s.mig && c.backfill.HasRoom(c.slots) && c.backfill.CanEverFit(ctx, s)) {
      ++c.slots;
      c.deferred.push_back({s, diag});
    }
    // Diagnose: reason and numbers, no text.
    if (config_.explain) DiagnoseBlocked(ctx, s, tally, d);
    return false;
  }

  void FlushReservations(Cycle& c) {
    for (const Deferred& w : c.deferred) {
      Reservation r;
      Diagnosis scratch;
      Diagnosis* d = w.diag >= 0 ? &c.plan.pending[w.diag] : &scratch;
      if (c.backfill.Reserve(c.ctx, w.shape, &r, d)) {
        c.plan.reservations.push_back(std::move(r));
      }
    }
    c.deferred.clear();
  }

  // No node has enough free GPUs (or enough nodes for a gang): the job cannot start
  // now, whatever the reservations.
  static bool MightFit(const CycleContext& ctx, const JobShape& s) {
    if (s.mig) return !ctx.mig_nodes.empty();  // devices are counted by the placer
    // A GPU share may pack onto a shared GPU with no free GPU anywhere.
    if (s.gpn > ctx.buckets.max_free())
      return s.share_milli > 0 && !ctx.shared_nodes.empty();
    return s.nodes == 1 || ctx.buckets.NodesWithAtLeast(s.gpn) >= s.nodes;
  }

  // Placement, unless a job of the same shape already failed since the last change.
  bool TryPlace(CycleContext& ctx, const JobShape& s, VerdictTally* tally) {
    if (fails_version_ != ctx.version) {
      fails_.clear();
      fails_version_ = ctx.version;
    }
    for (const FailMemo& f : fails_) {
      if (!s.mig && f.Covers(s)) {
        *tally = f.tally;
        return false;
      }
    }
    if (placer_.PlaceNow(ctx, s, &allocs_, tally)) return true;
    if (placer_.failed()) return false;  // no memo: another job may still succeed
    if (s.mig)
      return false;  // the memo's shape has no profile: MIG jobs are not memoised
    fails_.push_back({s.eligible, s.gpn, s.nodes, s.cpus, s.memory_mib, s.share_milli,
                      s.gpu_memory_mib, s.whole, s.limit, &s.job->req.user, *tally});
    return false;
  }

  void EnsureTables(const ClusterState& state) {
    if (spec_.placement != PlacementStyle::kBestFit) return;
    for (const Node& n : state.nodes) {
      if (!n.model || n.model.get() == last_model_) continue;
      last_model_ = n.model.get();
      if (!cache_.HasTable(*n.model)) cache_.BuildTable(*n.model);
    }
  }

  const SchedConfig config_;
  const PolicySpec spec_;
  const int depth_;
  // Memo between cycles; never changes the answer (scheduler.h).
  QueueOrder order_;
  Placer placer_;
  Backfill backfill_;  // the depth knob; scratch buffers reused across cycles
  Preempter preempter_;
  alloc::AllocCache cache_;
  FragMeasure frag_;   // F per node shape, while the workload is unchanged
  Timeline timeline_;  // memory reused by every cycle's context
  const alloc::NodeModel* last_model_ = nullptr;
  // Scratch of the current cycle.
  std::vector<Allocation> allocs_;
  std::vector<FailMemo> fails_;
  uint64_t fails_version_ = 0;
};

}  // namespace

bool PolicyUsesPriority(std::string_view policy) {
  const PolicySpec* spec = FindSpec(policy);
  return spec != nullptr && spec->order == OrderKind::kMultifactor;
}

std::vector<std::string_view> PolicyNames() {
  std::vector<std::string_view> names;
  for (const PolicySpec& p : kPolicies) names.push_back(p.name);
  return names;
}

Result<std::unique_ptr<Scheduler>> Scheduler::Create(const SchedConfig& config) {
  const PolicySpec* spec = FindSpec(config.policy);
  if (spec == nullptr) {
    std::string names;
    for (std::string_view n : PolicyNames()) {
      if (!names.empty()) names += ", ";
      names += n;
    }
    return InvalidArgument("unknown scheduling policy '" + config.policy +
                           "' (policies: " + names + ")");
  }
  if (config.backfill_depth < 0 || config.backfill_max_jobs < 0 ||
      config.priority_period < 0) {
    return InvalidArgument(
        "backfill_depth, backfill_max_jobs and priority_period "
        "must not be negative");
  }
  return std::unique_ptr<Scheduler>(new SchedulerImpl(config, *spec));
}

}  // namespace hachi::sched
