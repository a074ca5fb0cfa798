#include "sched/filter.h"

#include <limits>

namespace hachi::sched {

Reason CheckJob(const CycleContext& ctx, const JobShape& job, int* used, int* limit) {
  const Job& j = *job.job;
  if (j.held) return Reason::kHeld;
  if (j.deps == DependencyState::kNeverMet) return Reason::kDependencyNeverMet;
  if (j.deps == DependencyState::kWaiting) return Reason::kDependency;
  // --begin, and --deadline (start + limit must reach no further).
  if (j.req.begin_time > ctx.now) return Reason::kBeginTime;
  if (j.req.deadline > 0 && ctx.now + job.limit > j.req.deadline) {
    return Reason::kDeadline;
  }
  const Limits& limits = ctx.state.limits;
  if (!limits.user_gpus.empty()) {
    if (auto it = limits.user_gpus.find(j.req.user); it != limits.user_gpus.end()) {
      *used = ctx.UserUsed(j.req.user);
      *limit = it->second;
      if (*used + job.total_gpus() > *limit) return Reason::kUserQuota;
    }
  }
  if (!limits.account_gpus.empty()) {
    if (auto it = limits.account_gpus.find(j.req.account);
        it != limits.account_gpus.end()) {
      *used = ctx.AccountUsed(j.req.account);
      *limit = it->second;
      if (*used + job.total_gpus() > *limit) return Reason::kAccountQuota;
    }
  }
  return Reason::kNone;
}

NodeVerdict VerdictTally::Main() const {
  NodeVerdict best = NodeVerdict::kGpus;
  int best_count = 0;
  for (int v = static_cast<int>(NodeVerdict::kDown); v < kNodeVerdicts; ++v) {
    if (v == static_cast<int>(NodeVerdict::kIneligible)) continue;
    if (count[v] > best_count) {
      best_count = count[v];
      best = static_cast<NodeVerdict>(v);
    }
  }
  return best;
}

NodeVerdict CheckNode(const CycleContext& ctx, const JobShape& job, int node, Time t,
                      Timeline::Offer* offer) {
  const NodeWork& w = ctx.nodes[node];
  if (!w.up) return NodeVerdict::kDown;
  // Only during a placement pass by cost (pools): every other check skips the read.
  if (ctx.cost_limit != std::numeric_limits<int>::max() &&
      ctx.state.nodes[node].cost_rank > ctx.cost_limit) {
    return NodeVerdict::kIneligible;
  }
  const EligibleSet& e = ctx.eligible[job.eligible];
  const int size = ctx.state.nodes[node].gpu_count();
  if (!e.ok[node] || size < job.gpn) return NodeVerdict::kIneligible;
  if (w.window_owner >= 0 && !ctx.WindowAllows(node, e.partition, t, job.limit)) {
    return NodeVerdict::kWindow;
  }
  const bool holds = ctx.timeline.HasHolds(node);
  if (t == ctx.now && !holds) {
    offer->gpus = w.free;
    offer->cpus = w.free_cpus;
    offer->memory_mib = w.free_memory_mib;
    offer->whole_running = w.whole_busy;
    offer->shared_running = w.shared_busy;
    offer->whole_held = false;
  } else {
    *offer = ctx.timeline.At(node, w.free, w.free_cpus, w.free_memory_mib, w.whole_busy,
                             w.shared_busy, ctx.now, t, job.limit);
    if (t == ctx.now && !job.whole && ctx.timeline.HasWholeHold(node)) {
      offer->whole_held = true;
    }
  }
  if (job.whole) {
    if (offer->shared_running) return NodeVerdict::kIsolation;
    if (offer->gpus != GpuSet::FirstN(size)) {
      return holds && t == ctx.now && w.free == GpuSet::FirstN(size)
                 ? NodeVerdict::kReserved
                 : NodeVerdict::kGpus;
    }
  } else {
    if (offer->whole_running || offer->whole_held) return NodeVerdict::kIsolation;
    if (offer->gpus.size() < job.gpn) {
      return holds && t == ctx.now && w.free.size() >= job.gpn ? NodeVerdict::kReserved
                                                               : NodeVerdict::kGpus;
    }
  }
  if (offer->cpus < job.cpus) return NodeVerdict::kCpus;
  if (offer->memory_mib < job.memory_mib) return NodeVerdict::kMemory;
  return NodeVerdict::kFits;
}

NodeVerdict FitsOffer(const JobShape& job, int size, const Timeline::Offer& offer) {
  if (job.whole) {
    if (offer.shared_running) return NodeVerdict::kIsolation;
    if (offer.gpus != GpuSet::FirstN(size)) return NodeVerdict::kGpus;
  } else {
    if (offer.whole_running || offer.whole_held) return NodeVerdict::kIsolation;
    if (offer.gpus.size() < job.gpn) return NodeVerdict::kGpus;
  }
  if (offer.cpus < job.cpus) return NodeVerdict::kCpus;
  if (offer.memory_mib < job.memory_mib) return NodeVerdict::kMemory;
  return NodeVerdict::kFits;
}

}  // namespace hachi::sched
