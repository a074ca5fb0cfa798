#include "sched/preempt.h"

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "sched/window.h"

namespace hachi::sched {
namespace {

// Victims looked at per node, at most: every subset is tried (2^10 offers). Nodes
// rarely run more jobs than GPUs; beyond this the cheapest ten are considered.
constexpr int kMaxCandidates = 10;

int TierOf(const ClusterState& s, const Job& j) {
  return j.partition >= 0 && j.partition < static_cast<int>(s.partitions.size())
             ? s.partitions[j.partition].tier
             : 0;
}

double LostWork(const Job& j, Time now) {
  double gpus = 0;
  for (const Allocation& a : j.allocations) gpus += a.gpus.size();
  return gpus * static_cast<double>(std::max<Time>(now - j.start_time, 0));
}

bool Chosen(const CycleContext& ctx, int victim) {
  return std::binary_search(ctx.victims.begin(), ctx.victims.end(), victim);
}

}  // namespace

bool Preempter::Possible(const CycleContext& ctx) {
  if (!ctx.preempting_partitions) return false;
  int top = 0;
  bool any = false;
  for (const Partition& p : ctx.state.partitions) {
    if (!p.preempt_lower_tiers) continue;
    top = any ? std::max(top, p.tier) : p.tier;
    any = true;
  }
  for (const Job& j : ctx.state.running) {
    if (j.preempt_kill_at == kNever && TierOf(ctx.state, j) < top) return true;
  }
  return false;
}

bool Preempter::BestOnNode(CycleContext& ctx, const JobShape& job, int node, Time at,
                           bool allow_empty, NodeChoice* out) {
  const ClusterState& s = ctx.state;
  const int tier = s.partitions[ctx.eligible[job.eligible].partition].tier;
  cands_.clear();
  for (int r : ctx.RunningOn()[node]) {
    const Job& v = s.running[r];
    // Lower tier, not already leaving, and still there at `at` (else no need).
    if (TierOf(s, v) >= tier || v.preempt_kill_at != kNever || Chosen(ctx, r) ||
        v.LeaveEstimate() <= at) {
      continue;
    }
    if (std::find(cands_.begin(), cands_.end(), r) == cands_.end()) cands_.push_back(r);
  }
  if (cands_.empty() && !allow_empty) return false;
  std::vector<double> lost(cands_.size());
  std::vector<size_t> idx(cands_.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  for (size_t i = 0; i < cands_.size(); ++i)
    lost[i] = LostWork(s.running[cands_[i]], ctx.now);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    return std::tie(lost[a], s.running[cands_[a]].id) <
           std::tie(lost[b], s.running[cands_[b]].id);
  });
  const int k = std::min<int>(static_cast<int>(idx.size()), kMaxCandidates);
  const NodeWork& w = ctx.nodes[node];
  const int size = s.nodes[node].gpu_count();
  bool found = false;
  uint32_t best_mask = 0;
  Timeline::Offer best_offer;
  for (uint32_t mask = allow_empty ? 0 : 1; mask < (1u << k); ++mask) {
    double l = 0;
    int count = 0;
    gone_.clear();
    for (int i = 0; i < k; ++i) {
      if (!(mask >> i & 1)) continue;
      l += lost[idx[i]];
      ++count;
      gone_.push_back(s.running[cands_[idx[i]]].id);
    }
    if (found && std::tie(l, count) >= std::tie(out->lost, out->count)) continue;
    const Timeline::Offer offer =
        ctx.timeline.At(node, w.free, w.free_cpus, w.free_memory_mib, w.whole_busy,
                        w.shared_busy, ctx.now, at, job.limit, &gone_);
    if (FitsOffer(job, size, offer) != NodeVerdict::kFits) continue;
    found = true;
    out->lost = l;
    out->count = count;
    best_mask = mask;
    best_offer = offer;
  }
  if (!found) return false;
  out->node = node;
  out->victims.clear();
  for (int i = 0; i < k; ++i) {
    if (best_mask >> i & 1) out->victims.push_back(cands_[idx[i]]);
  }
  // An allocator failure: no choice (the placer keeps the error for the plan).
  const Result<GpuSet> gpus = placer_->ChooseGpus(ctx, job, node, best_offer.gpus);
  if (!gpus.ok()) return false;
  out->gpus = *gpus;
  out->quality = Bottleneck(*s.nodes[node].model, out->gpus);
  return true;
}

bool Preempter::ChooseGang(CycleContext& ctx, const JobShape& job,
                           std::vector<NodeChoice>& all,
                           std::vector<NodeChoice>* out) const {
  ctx.EnsureGangClasses();
  auto key = [&](const NodeChoice& c) {
    return std::make_tuple(ctx.nodes[c.node].gang_class, c.lost, c.count, c.node);
  };
  std::sort(all.begin(), all.end(),
            [&](const NodeChoice& a, const NodeChoice& b) { return key(a) < key(b); });
  bool found = false;
  std::tuple<double, int, int> best;
  size_t best_lo = 0;
  for (size_t lo = 0; lo < all.size();) {
    size_t hi = lo;
    const int cls = ctx.nodes[all[lo].node].gang_class;
    while (hi < all.size() && ctx.nodes[all[hi].node].gang_class == cls) ++hi;
    if (static_cast<int>(hi - lo) >= job.nodes) {
      double lost = 0;
      int count = 0, first = all[lo].node;
      for (size_t i = lo; i < lo + job.nodes; ++i) {
        lost += all[i].lost;
        count += all[i].count;
        first = std::min(first, all[i].node);
      }
      const auto k = std::make_tuple(lost, count, first);
      if (count > 0 && (!found || k < best)) {
        found = true;
        best = k;
        best_lo = lo;
      }
    }
    lo = hi;
  }
  if (!found) return false;
  out->assign(all.begin() + best_lo, all.begin() + best_lo + job.nodes);
  return true;
}

bool Preempter::ForJob(CycleContext& ctx, const JobShape& job, Plan* plan, Diagnosis* d) {
  const ClusterState& s = ctx.state;
  const int partition = ctx.eligible[job.eligible].partition;
  const Partition& p = s.partitions[partition];
  if (!p.preempt_lower_tiers) return false;
  // Victims are gone by `at` at the latest: one time for every candidate set keeps
  // the comparison simple (and a reservation needs one start).
  Duration grace = 0;
  bool lower = false;
  for (const Partition& q : s.partitions) {
    if (q.tier >= p.tier) continue;
    grace = std::max(grace, q.grace);
    lower = true;
  }
  if (!lower) return false;
  const Time at = ctx.now + grace;
  // Would it start by then anyway? Then stopping jobs gains nothing.
  Reservation r;
  Diagnosis scratch;
  if (backfill_->Earliest(ctx, job, &r, &scratch) && r.start <= at) return false;

  std::vector<NodeChoice> chosen;
  std::vector<NodeChoice> all;
  NodeChoice c;
  for (int node : ctx.eligible[job.eligible].nodes) {
    if (!ctx.nodes[node].up || s.nodes[node].gpu_count() < job.gpn) continue;
    if (!ctx.WindowAllows(node, partition, at, job.limit)) continue;
    if (!BestOnNode(ctx, job, node, at, job.nodes > 1, &c)) continue;
    all.push_back(c);
  }
  if (job.nodes > 1) {
    if (!ChooseGang(ctx, job, all, &chosen)) return false;
  } else {
    const NodeChoice* best = nullptr;
    for (const NodeChoice& x : all) {
      if (best == nullptr ||
          std::make_tuple(x.lost, x.count, -x.quality, x.node) <
              std::make_tuple(best->lost, best->count, -best->quality, best->node)) {
        best = &x;
      }
    }
    if (best == nullptr) return false;
    chosen.push_back(*best);
  }
  // Book: victims leave at their kill time; the job holds its GPUs from `at`.
  std::vector<int> victims;
  for (const NodeChoice& x : chosen) {
    victims.insert(victims.end(), x.victims.begin(), x.victims.end());
  }
  std::sort(victims.begin(), victims.end(),
            [&](int a, int b) { return s.running[a].id < s.running[b].id; });
  victims.erase(std::unique(victims.begin(), victims.end()), victims.end());
  d->preempt_jobs = static_cast<uint8_t>(std::min<size_t>(victims.size(), 255));
  int victim_partition = s.running[victims.front()].partition;
  Duration grace_max = 0;
  for (int v : victims) {
    const Job& vj = s.running[v];
    if (vj.partition != victim_partition) victim_partition = -1;
    if (vj.partition >= 0)
      grace_max = std::max(grace_max, s.partitions[vj.partition].grace);
    Stop(ctx, v, job.job->id, -1, plan);
  }
  d->partition = static_cast<int16_t>(victim_partition);
  d->preempt_grace = static_cast<int32_t>(std::min<Duration>(grace_max, INT32_MAX));
  r.allocations.clear();
  r.job = job.job->id;
  r.start = at;
  std::sort(chosen.begin(), chosen.end(),
            [](const NodeChoice& a, const NodeChoice& b) { return a.node < b.node; });
  for (const NodeChoice& x : chosen) {
    Allocation a;
    a.node = x.node;
    a.gpus = x.gpus;
    a.cpus = job.cpus;
    a.memory_mib = job.memory_mib;
    r.allocations.push_back(std::move(a));
  }
  backfill_->Book(ctx, job, r);
  plan->reservations.push_back(r);
  d->reason = Reason::kPreempting;
  d->earliest_start = at;
  d->earliest_node = chosen.front().node;
  d->blocking_job = 0;
  return true;
}

void Preempter::Stop(CycleContext& ctx, int victim, JobId for_job, int for_partition,
                     Plan* plan) {
  const Job& v = ctx.state.running[victim];
  const bool known =
      v.partition >= 0 && v.partition < static_cast<int>(ctx.state.partitions.size());
  const Duration grace = known ? ctx.state.partitions[v.partition].grace : 0;
  Preemption pr;
  pr.job = v.id;
  pr.mode =
      known ? ctx.state.partitions[v.partition].preempt_mode : PreemptMode::kRequeue;
  pr.signal_at = ctx.now;
  pr.kill_at = ctx.now + grace;
  pr.for_job = for_job;
  pr.for_partition = for_partition;
  plan->preemptions.push_back(pr);
  ctx.victims.insert(std::lower_bound(ctx.victims.begin(), ctx.victims.end(), victim),
                     victim);
  ctx.EnsureTimeline();
  for (const Allocation& a : v.allocations) {
    if (a.node >= 0 && a.node < static_cast<int>(ctx.nodes.size())) {
      ctx.timeline.Advance(a.node, v.id, std::max(pr.kill_at, ctx.now + 1));
    }
  }
  ++ctx.version;
}

void Preempter::ForWindows(CycleContext& ctx, Plan* plan) {
  if (ctx.window_nodes.empty()) return;
  const ClusterState& s = ctx.state;
  Time wake = kNever;
  for (size_t p = 0; p < s.partitions.size(); ++p) {
    if (ctx.window_start_now[p] == kNever) continue;
    const WindowSpan w = ActiveOrNext(s.partitions[p].windows, ctx.now, s.clock_offset);
    wake = std::min(wake, w.start > ctx.now ? w.start : w.end);
  }
  std::vector<int> due;
  for (int node : ctx.window_nodes) {
    const int owner = ctx.nodes[node].window_owner;
    const Time start = ctx.window_start_now[owner];
    if (start == kNever) continue;
    for (int r : ctx.RunningOn()[node]) {
      const Job& j = s.running[r];
      if (j.partition == owner || j.preempt_kill_at != kNever) continue;
      // Still there when the window opens (or while it is open)?
      if (j.EndEstimate() <= std::max(start, ctx.now)) continue;
      const Duration grace =
          j.partition >= 0 && j.partition < static_cast<int>(s.partitions.size())
              ? s.partitions[j.partition].grace
              : 0;
      if (ctx.now >= start - grace) {
        due.push_back(r);
      } else {
        wake = std::min(wake, start - grace);
      }
    }
  }
  std::sort(due.begin(), due.end());
  due.erase(std::unique(due.begin(), due.end()), due.end());
  for (int r : due) {
    int for_partition = -1;
    for (const Allocation& a : s.running[r].allocations) {  // a gang: the first window
      if (ctx.nodes[a.node].window_owner >= 0) {
        for_partition = ctx.nodes[a.node].window_owner;
        break;
      }
    }
    Stop(ctx, r, 0, for_partition, plan);
  }
  plan->wake_at = wake;
}

}  // namespace hachi::sched
