#include "sched/backfill.h"

#include <algorithm>
#include <tuple>

#include "sched/window.h"

namespace hachi::sched {

bool Backfill::Reserve(CycleContext& ctx, const JobShape& job, Reservation* out,
                       Diagnosis* diag) {
  out->allocations.clear();
  out->job = job.job->id;
  ctx.EnsureTimeline();
  const bool found = job.nodes > 1 ? EarliestGang(ctx, job, out, diag)
                                   : EarliestSingle(ctx, job, out, diag);
  if (found) Book(ctx, job, *out);
  return found;
}

bool Backfill::Earliest(CycleContext& ctx, const JobShape& job, Reservation* out,
                        Diagnosis* diag) {
  out->allocations.clear();
  out->job = job.job->id;
  ctx.EnsureTimeline();
  return job.nodes > 1 ? EarliestGang(ctx, job, out, diag)
                       : EarliestSingle(ctx, job, out, diag);
}

void Backfill::Points(CycleContext& ctx, const JobShape& job, int node, Time from) {
  ctx.timeline.ChangePoints(node, from, job.limit, &points_);
  const int owner = ctx.nodes[node].window_owner;
  if (owner < 0 || owner == ctx.eligible[job.eligible].partition) return;
  WindowEnds(ctx.state.partitions[owner].windows, from, from + 8 * kDay,
             ctx.state.clock_offset, &points_);
  std::sort(points_.begin(), points_.end());
  points_.erase(std::unique(points_.begin(), points_.end()), points_.end());
}

bool Backfill::CanEverFit(CycleContext& ctx, const JobShape& job) {
  std::vector<int>& per_class = class_counts_;
  per_class.clear();
  for (int node : ctx.eligible[job.eligible].nodes) {
    const Node& n = ctx.state.nodes[node];
    if (!ctx.nodes[node].up || n.gpu_count() < job.gpn) continue;
    if (n.gpu_count() - ((n.unhealthy | n.mig_gpus) & n.model->all_gpus()).size() <
            job.gpn ||
        (job.whole && !((n.unhealthy | n.mig_gpus) & n.model->all_gpus()).empty())) {
      continue;
    }
    if (n.cpus < job.cpus || n.memory_mib < job.memory_mib) continue;
    if (job.nodes == 1) return true;
    ctx.EnsureGangClasses();
    const int cls = ctx.nodes[node].gang_class;
    if (cls >= static_cast<int>(per_class.size())) per_class.resize(cls + 1, 0);
    if (++per_class[cls] >= job.nodes) return true;
  }
  return false;
}

bool Backfill::EarliestSingle(CycleContext& ctx, const JobShape& job, Reservation* out,
                              Diagnosis* diag) {
  // Nodes by a lower bound on their start (GPU count alone), so the first fits found
  // are early and most nodes are never examined; ties go to the lower node index.
  lower_.clear();
  for (int node : ctx.eligible[job.eligible].nodes) {
    if (!ctx.nodes[node].up || ctx.state.nodes[node].gpu_count() < job.gpn) continue;
    const Time lb =
        ctx.timeline.EarliestCount(node, ctx.nodes[node].free, job.gpn, ctx.now);
    if (lb != kNever) lower_.emplace_back(lb, node);
  }
  std::sort(lower_.begin(), lower_.end());
  Time best_t = kNever;
  int best_node = -1;
  Timeline::Offer offer, best_offer;
  for (const auto& [lb, node] : lower_) {
    if (lb > best_t) break;
    Points(ctx, job, node, lb);
    for (Time t : points_) {
      if (t > best_t || (t == best_t && node > best_node)) break;
      if (CheckNode(ctx, job, node, t, &offer) == NodeVerdict::kFits) {
        best_t = t;
        best_node = node;
        best_offer = offer;
        break;
      }
    }
  }
  if (best_node < 0) return false;
  // An allocator failure: no reservation (the placer keeps the error for the plan).
  const Result<GpuSet> gpus = placer_->ChooseGpus(ctx, job, best_node, best_offer.gpus);
  if (!gpus.ok()) return false;
  out->start = best_t;
  Allocation a;
  a.node = best_node;
  a.gpus = *gpus;
  a.cpus = job.cpus;
  a.memory_mib = job.memory_mib;
  out->allocations.push_back(a);
  diag->earliest_start = best_t;
  diag->earliest_node = best_node;
  diag->blocking_job =
      best_offer.last_release_end == best_t ? best_offer.last_release : 0;
  return true;
}

bool Backfill::EarliestGang(CycleContext& ctx, const JobShape& job, Reservation* out,
                            Diagnosis* diag) {
  // Per node, the intervals over which a share fits; then a sweep over time for the
  // first moment at which one gang class has enough nodes that SelectGang accepts.
  struct Event {
    Time t;
    int delta;  // -1 before +1 at equal times: intervals are half-open
    int node;
  };
  ctx.EnsureGangClasses();
  std::vector<Event> events;
  Timeline::Offer offer;
  for (int node : ctx.eligible[job.eligible].nodes) {
    if (!ctx.nodes[node].up || ctx.state.nodes[node].gpu_count() < job.gpn) continue;
    Points(ctx, job, node, ctx.now);
    bool open = false;
    for (size_t i = 0; i < points_.size(); ++i) {
      const bool fits =
          CheckNode(ctx, job, node, points_[i], &offer) == NodeVerdict::kFits;
      if (fits && !open) events.push_back({points_[i], +1, node});
      if (!fits && open) events.push_back({points_[i], -1, node});
      open = fits;
    }
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return std::tie(a.t, a.delta, a.node) < std::tie(b.t, b.delta, b.node);
  });
  std::vector<uint8_t> active(ctx.nodes.size(), 0);
  std::vector<int> per_class;
  for (size_t i = 0; i < events.size();) {
    const Time t = events[i].t;
    bool grew = false;
    for (; i < events.size() && events[i].t == t; ++i) {
      const int node = events[i].node;
      const int cls = ctx.nodes[node].gang_class;
      if (cls >= static_cast<int>(per_class.size())) per_class.resize(cls + 1, 0);
      active[node] = events[i].delta > 0;
      per_class[cls] += events[i].delta;
      grew |= events[i].delta > 0 && per_class[cls] >= job.nodes;
    }
    if (!grew) continue;
    std::vector<int> cands, counts;
    std::vector<GpuSet> avail;
    for (size_t n = 0; n < active.size(); ++n) {
      if (!active[n] || per_class[ctx.nodes[n].gang_class] < job.nodes) continue;
      CheckNode(ctx, job, static_cast<int>(n), t, &offer);
      cands.push_back(static_cast<int>(n));
      counts.push_back(offer.gpus.size());
      avail.push_back(offer.gpus);
    }
    const std::vector<int> pick = placer_->SelectGang(ctx, job, cands, counts);
    if (pick.empty()) continue;
    out->start = t;
    for (int node : pick) {
      const size_t k = std::lower_bound(cands.begin(), cands.end(), node) - cands.begin();
      const Result<GpuSet> gpus = placer_->ChooseGpus(ctx, job, node, avail[k]);
      if (!gpus.ok()) {  // no reservation (the placer keeps the error for the plan)
        out->allocations.clear();
        return false;
      }
      Allocation a;
      a.node = node;
      a.gpus = *gpus;
      a.cpus = job.cpus;
      a.memory_mib = job.memory_mib;
      out->allocations.push_back(a);
    }
    diag->earliest_start = t;
    diag->earliest_node = pick.front();
    diag->blocking_job = 0;
    for (int node : pick) {  // the node whose release came last, if one ends at t
      CheckNode(ctx, job, node, t, &offer);
      if (offer.last_release_end == t) {
        diag->blocking_job = offer.last_release;
        diag->earliest_node = node;
      }
    }
    return true;
  }
  return false;
}

void Backfill::Book(CycleContext& ctx, const JobShape& job, const Reservation& r) {
  for (const Allocation& a : r.allocations) {
    ctx.timeline.AddHold(a.node, {r.start, r.start + job.limit, a.gpus, a.cpus,
                                  a.memory_mib, job.whole, job.job->id});
    if (job.whole) ctx.nodes[a.node].whole_reserved = true;
  }
  ++ctx.version;
}

}  // namespace hachi::sched
