#include "sched/placement.h"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <tuple>
#include <unordered_map>

#include "alloc/choice.h"
#include "sched/gpu_share.h"
#include "sched/mig.h"

namespace hachi::sched {
namespace {

GpuSet LowestN(GpuSet avail, int n) {
  uint64_t m = avail.mask();
  uint64_t out = 0;
  for (int i = 0; i < n && m; ++i) {
    const uint64_t bit = m & (~m + 1);
    out |= bit;
    m ^= bit;
  }
  return GpuSet(out);
}

Allocation MakeAllocation(const JobShape& job, int node, GpuSet gpus) {
  Allocation a;
  a.node = node;
  a.gpus = gpus;
  a.cpus = job.cpus;
  a.memory_mib = job.memory_mib;
  a.share_milli = job.share_milli;
  a.gpu_memory_mib = job.gpu_memory_mib;
  return a;
}

}  // namespace

int Bottleneck(const alloc::NodeModel& model, GpuSet gpus) {
  int worst = alloc::ScoreParts::kNoPair;
  uint64_t m = gpus.mask();
  while (m) {
    const int a = std::countr_zero(m);
    m &= m - 1;
    for (uint64_t rest = m; rest; rest &= rest - 1) {
      worst = std::min(worst, model.score(a, std::countr_zero(rest)));
    }
  }
  return worst;
}

Result<GpuSet> Placer::ChooseGpus(CycleContext& ctx, const JobShape& job, int node,
                                  GpuSet avail) {
  const Node& n = ctx.state.nodes[node];
  if (job.whole) return GpuSet::FirstN(n.gpu_count());
  if (job.gpn == 0) return GpuSet();  // a job without GPUs
  Result<GpuSet> pick = scorer_->ChooseGpus(ctx, job, n, avail);
  if (!pick.ok()) {
    failed_ = true;
    errors_.push_back("job " + std::to_string(job.job->id) + " on node " + n.name +
                      ": allocator: " + pick.status().message() + " (" +
                      std::to_string(job.gpn) + " of free {" + avail.ToString() + "})");
    return Internal(errors_.back());
  }
  return pick;
}

std::vector<int> Placer::SelectGang(const CycleContext& ctx, const JobShape& job,
                                    const std::vector<int>& cands,
                                    const std::vector<int>& free_counts) const {
  const std::vector<int>* required =
      job.eligible >= 0 ? &ctx.eligible[job.eligible].required : nullptr;
  if (required == nullptr || required->empty()) {
    return scorer_->SelectGang(ctx, job, cands, free_counts);
  }
  int cls = -1;
  for (int r : *required) {
    if (!std::binary_search(cands.begin(), cands.end(), r)) return {};
    if (cls >= 0 && ctx.nodes[r].gang_class != cls) return {};
    cls = ctx.nodes[r].gang_class;
  }
  std::vector<int> rest, rest_free;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (ctx.nodes[cands[i]].gang_class != cls ||
        std::binary_search(required->begin(), required->end(), cands[i])) {
      continue;
    }
    rest.push_back(cands[i]);
    rest_free.push_back(free_counts[i]);
  }
  JobShape others = job;
  others.nodes = job.nodes - static_cast<int>(required->size());
  std::vector<int> pick = scorer_->SelectGang(ctx, others, rest, rest_free);
  if (pick.empty()) return {};
  pick.insert(pick.end(), required->begin(), required->end());
  std::sort(pick.begin(), pick.end());
  return pick;
}

bool Placer::PlaceNow(CycleContext& ctx, const JobShape& job,
                      std::vector<Allocation>* out, VerdictTally* tally) {
  // With node pools, the cheapest nodes that fit: a pass per cost rank, the last over
  // every node (its verdicts are the ones the diagnosis reports).
  for (int rank = 0; rank < ctx.state.max_cost_rank; ++rank) {
    ctx.cost_limit = rank;
    VerdictTally scratch;
    const bool placed = PlaceAt(ctx, job, out, &scratch);
    ctx.cost_limit = std::numeric_limits<int>::max();
    if (placed || failed_) return placed;
  }
  return PlaceAt(ctx, job, out, tally);
}

bool Placer::PlaceAt(CycleContext& ctx, const JobShape& job, std::vector<Allocation>* out,
                     VerdictTally* tally) {
  out->clear();
  failed_ = false;
  if (job.nodes > 1) return PlaceGang(ctx, job, out, tally);
  Allocation a;
  if (!PlaceSingle(ctx, job, &a, tally)) return false;
  out->push_back(a);
  return true;
}

bool Placer::PackShare(CycleContext& ctx, const JobShape& job, Allocation* out,
                       VerdictTally* tally) {
  // The node checks without the free-GPU count: the share needs no free GPU here.
  JobShape on_shared = job;
  on_shared.gpn = 0;
  Timeline::Offer offer;
  int best_node = -1, best_gpu = -1, best_used = -1, best_free = 0;
  for (int node : ctx.shared_nodes) {
    const NodeWork& w = ctx.nodes[node];
    if (w.shared.empty()) continue;
    const NodeVerdict v = CheckNode(ctx, on_shared, node, ctx.now, &offer);
    if (v != NodeVerdict::kFits) {
      tally->Add(v);
      continue;
    }
    const int64_t capacity = ctx.state.nodes[node].gpu_memory_mib;
    const int free = w.free.size();
    for (uint64_t m = w.shared.mask(); m; m &= m - 1) {
      const int gpu = std::countr_zero(m);
      const GpuShareUse& u = ctx.ShareUseAt(node, gpu);
      const ShareRoom room =
          RoomFor(u, capacity, job.share_milli, job.gpu_memory_mib, job.job->req.user);
      if (room != ShareRoom::kFits) {
        tally->other_user_gpus += room == ShareRoom::kOtherUser;
        continue;
      }
      // The fullest GPU that fits; among equals, the busiest node (fewest free GPUs).
      if (u.milli > best_used || (u.milli == best_used && free < best_free)) {
        best_used = u.milli;
        best_free = free;
        best_node = node;
        best_gpu = gpu;
      }
    }
  }
  if (best_node < 0) return false;
  *out = MakeAllocation(job, best_node, GpuSet::FromIndices({best_gpu}));
  return true;
}

bool Placer::PlaceByFragmentation(CycleContext& ctx, const JobShape& job, Allocation* out,
                                  VerdictTally* tally) {
  const EligibleSet& e = ctx.eligible[job.eligible];
  const bool share = job.share_milli > 0;
  JobShape probe = job;
  if (share) probe.gpn = 0;  // a share may go to a shared GPU: no free GPU needed
  const int per_gpu = share ? job.share_milli : kFullGpuMilli;
  const int demand = share ? job.share_milli : job.gpn * kFullGpuMilli;
  const double max_cpus = std::max(1, ctx.MaxNodeCpus());
  const double max_milli = std::max(1, ctx.MaxNodeGpus()) * double{kFullGpuMilli};
  // Larger is better, compared in order: FragScore, bottleneck link of the GPU set,
  // not opening an empty node, packing (0-100), for a share minus the room it leaves
  // on its GPU. Equal keys: the first seen (lowest node, then lowest GPU).
  using Key = std::array<int, 5>;
  Key best{};
  int best_node = -1;
  GpuSet best_gpus;
  Timeline::Offer offer;
  for (int node : e.nodes) {
    const NodeVerdict v = CheckNode(ctx, probe, node, ctx.now, &offer);
    if (v != NodeVerdict::kFits) {
      tally->Add(v);
      continue;
    }
    const Node& n = ctx.state.nodes[node];
    const NodeWork& w = ctx.nodes[node];
    const NodeFree before = ctx.FreeView(node);
    const double f_before = ctx.FragAt(node);
    const int idle = before.idle();
    const int opens = w.shared.empty() && w.free.size() == n.gpu_count() ? 0 : 1;
    // BestFit's score (FGD's baseline): CPU and GPU left after, halves of the largest
    // node's; truncated, so near-equal packings tie and the node order decides.
    const int pack =
        static_cast<int>(100.0 * (1.0 - (0.5 * (w.free_cpus - job.cpus) / max_cpus +
                                         0.5 * (idle - demand) / max_milli)));
    auto consider = [&](GpuSet gpus, int room_left) {
      NodeFree after = before;
      after.cpus -= job.cpus;
      after.memory_mib -= job.memory_mib;
      for (uint64_t m = gpus.mask(); m; m &= m - 1) {
        after.milli[std::countr_zero(m)] -= static_cast<int16_t>(per_gpu);
      }
      const Key key{FragScore(ctx.frag->Frag(after) - f_before),
                    Bottleneck(*n.model, gpus), opens, pack, -room_left};
      if (best_node < 0 || key > best) {
        best = key;
        best_node = node;
        best_gpus = gpus;
      }
    };
    if (!share) {
      const Result<GpuSet> gpus = ChooseGpus(ctx, job, node, offer.gpus);
      if (!gpus.ok()) return false;  // the job is not started (errors_)
      consider(*gpus, 0);
      continue;
    }
    // A shared GPU with room (equal rooms give equal outcomes: the lowest index), or
    // a free GPU chosen as for a 1-GPU job.
    bool any = false;
    std::array<bool, kFullGpuMilli + 1> tried{};
    for (uint64_t m = w.shared.mask(); m; m &= m - 1) {
      const int gpu = std::countr_zero(m);
      const GpuShareUse& u = ctx.ShareUseAt(node, gpu);
      const ShareRoom fit = RoomFor(u, n.gpu_memory_mib, job.share_milli,
                                    job.gpu_memory_mib, job.job->req.user);
      if (fit != ShareRoom::kFits) {
        tally->other_user_gpus += fit == ShareRoom::kOtherUser;
        continue;
      }
      any = true;
      const int room = kFullGpuMilli - u.milli;
      if (tried[room]) continue;
      tried[room] = true;
      consider(GpuSet::FromIndices({gpu}), room - job.share_milli);
    }
    if (!offer.gpus.empty()) {
      any = true;
      const Result<GpuSet> gpus = ChooseGpus(ctx, job, node, offer.gpus);
      if (!gpus.ok()) return false;  // the job is not started (errors_)
      consider(*gpus, kFullGpuMilli - job.share_milli);
    }
    if (!any) tally->Add(NodeVerdict::kGpus);
  }
  if (best_node < 0) return false;
  *out = MakeAllocation(job, best_node, best_gpus);
  return true;
}

bool Placer::PlaceMig(CycleContext& ctx, const JobShape& job, Allocation* out,
                      VerdictTally* tally) {
  const std::string& profile = job.job->req.mig_profile;
  const EligibleSet& e = ctx.eligible[job.eligible];
  JobShape probe = job;
  probe.gpn = 0;  // the node checks without free whole GPUs: its devices are counted here
  Timeline::Offer offer;
  int best_node = -1, best_left = 0;
  for (int node : ctx.mig_nodes) {
    if (!e.ok[node] || !ctx.nodes[node].up) continue;
    const Node& n = ctx.state.nodes[node];
    const int total = CountMigSlots(n, profile);
    if (total == 0) {
      tally->Add(NodeVerdict::kIneligible);
      continue;
    }
    const int free = CountFreeMigSlots(n, ctx.mig_busy[node], profile);
    tally->mig_total += total;
    tally->mig_free += free;
    tally->mig_most_free = std::max(tally->mig_most_free, free);
    if (free < job.gpn) {
      tally->Add(NodeVerdict::kGpus);
      continue;
    }
    const NodeVerdict v = CheckNode(ctx, probe, node, ctx.now, &offer);
    if (v != NodeVerdict::kFits) {
      tally->Add(v);
      continue;
    }
    if (best_node < 0 || free - job.gpn < best_left) {
      best_node = node;
      best_left = free - job.gpn;
    }
  }
  if (best_node < 0) return false;
  const Node& n = ctx.state.nodes[best_node];
  const std::vector<int> slots =
      PickMigSlots(n, ctx.mig_busy[best_node], profile, job.gpn);
  *out = MakeAllocation(job, best_node, MigParents(n, slots));
  for (int k : slots) out->mig.push_back(n.mig[k].uuid);
  return true;
}

bool Placer::PlaceSingle(CycleContext& ctx, const JobShape& job, Allocation* out,
                         VerdictTally* tally) {
  if (job.mig) return PlaceMig(ctx, job, out, tally);
  // With a workload, `hachi` places shares and single-node jobs where fragmentation
  // rises least; whole-node jobs take whole nodes, so fragmentation cannot guide them.
  if (scorer_->ByFragmentation(ctx, job))
    return PlaceByFragmentation(ctx, job, out, tally);
  // A GPU share packs onto a GPU that already holds shares, else takes a free GPU
  // below (a 1-GPU request), which then becomes shared (CycleContext::Book).
  if (job.share_milli > 0 && PackShare(ctx, job, out, tally)) return true;
  const int max_free = ctx.buckets.max_free();
  Timeline::Offer offer;
  Scorer::Best best;
  for (int k = job.gpn; k <= max_free; ++k) {
    for (int node : ctx.buckets.At(k)) {
      if (!scorer_->Visits(best, node)) break;
      const NodeVerdict v = CheckNode(ctx, job, node, ctx.now, &offer);
      if (v != NodeVerdict::kFits) {
        tally->Add(v);
        continue;
      }
      const Result<GpuSet> gpus = ChooseGpus(ctx, job, node, offer.gpus);
      if (!gpus.ok()) return false;  // the job is not started (errors_)
      if (scorer_->Offer(ctx, job, node, *gpus, &best)) break;
    }
    if (scorer_->Settled(best)) break;
  }
  if (best.node < 0) return false;
  *out = MakeAllocation(job, best.node, best.gpus);
  return true;
}

bool Placer::PlaceGang(CycleContext& ctx, const JobShape& job,
                       std::vector<Allocation>* out, VerdictTally* tally) {
  if (ctx.buckets.NodesWithAtLeast(job.gpn) < job.nodes) return false;
  ctx.EnsureGangClasses();
  std::vector<int> cands, counts;
  std::vector<GpuSet> avail;
  Timeline::Offer offer;
  for (int k = job.gpn; k <= ctx.buckets.max_free(); ++k) {
    for (int node : ctx.buckets.At(k)) {
      const NodeVerdict v = CheckNode(ctx, job, node, ctx.now, &offer);
      if (v != NodeVerdict::kFits) {
        tally->Add(v);
        continue;
      }
      cands.push_back(node);
      counts.push_back(offer.gpus.size());
      avail.push_back(offer.gpus);
    }
  }
  if (static_cast<int>(cands.size()) < job.nodes) return false;
  // SelectGang wants ascending nodes.
  std::vector<size_t> idx(cands.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(),
            [&](size_t a, size_t b) { return cands[a] < cands[b]; });
  std::vector<int> sc, sn;
  std::vector<GpuSet> sa;
  for (size_t i : idx) {
    sc.push_back(cands[i]);
    sn.push_back(counts[i]);
    sa.push_back(avail[i]);
  }
  const std::vector<int> pick = SelectGang(ctx, job, sc, sn);
  if (pick.empty()) return false;
  for (int node : pick) {
    const size_t i = std::lower_bound(sc.begin(), sc.end(), node) - sc.begin();
    const Result<GpuSet> gpus = ChooseGpus(ctx, job, node, sa[i]);
    if (!gpus.ok()) {
      out->clear();
      return false;  // the job is not started (errors_)
    }
    out->push_back(MakeAllocation(job, node, *gpus));
  }
  return true;
}

// ---- The styles ----

namespace {

// (class, block or 0, fit key, node) of a gang candidate, sorted by (class, node):
// runs of one class, classes in the order of their ids.
struct GangCand {
  int cls, block, fit, node;
};
std::vector<GangCand> GangCands(const CycleContext& ctx, const std::vector<int>& cands,
                                const std::vector<int>* free_counts) {
  std::vector<GangCand> c;
  c.reserve(cands.size());
  for (size_t i = 0; i < cands.size(); ++i) {
    const NodeWork& w = ctx.nodes[cands[i]];
    c.push_back({w.gang_class, w.block, free_counts ? (*free_counts)[i] : 0, cands[i]});
  }
  std::sort(c.begin(), c.end(), [](const GangCand& a, const GangCand& b) {
    return std::tie(a.cls, a.node) < std::tie(b.cls, b.node);
  });
  return c;
}

// kFirstFit ("fifo", "easy"): the lowest-index node with enough free GPUs, its lowest
// free GPU indices; gangs: the lowest-index fitting nodes of the first class that has
// enough.
class FirstFit final : public Scorer {
 public:
  Result<GpuSet> ChooseGpus(CycleContext&, const JobShape& job, const Node&,
                            GpuSet avail) override {
    return LowestN(avail, job.gpn);
  }
  bool ByFragmentation(const CycleContext&, const JobShape&) const override {
    return false;
  }
  // A later bucket can only win with a lower index.
  bool Visits(const Best& best, int node) const override {
    return best.node < 0 || node <= best.node;
  }
  bool Offer(CycleContext&, const JobShape&, int node, GpuSet gpus, Best* best) override {
    best->node = node;
    best->gpus = gpus;
    return true;  // the lowest fitting index of this bucket
  }
  bool Settled(const Best&) const override { return false; }

  std::vector<int> SelectGang(const CycleContext& ctx, const JobShape& job,
                              const std::vector<int>& cands,
                              const std::vector<int>&) const override {
    const std::vector<GangCand> c = GangCands(ctx, cands, nullptr);
    for (size_t lo = 0; lo < c.size();) {
      size_t hi = lo;
      while (hi < c.size() && c[hi].cls == c[lo].cls) ++hi;
      if (static_cast<int>(hi - lo) >= job.nodes) {
        std::vector<int> pick;
        for (int i = 0; i < job.nodes; ++i) pick.push_back(c[lo + i].node);
        return pick;  // ascending: the class's run is sorted by node
      }
      lo = hi;
    }
    return {};
  }
};

// kBestFit ("hachi"): the node with the fewest free GPUs that still fit (packs small
// jobs onto busy nodes, keeps whole nodes free), then the best GPU set there
// (bottleneck link of alloc::AllocCache::Pick's choice), then the lowest index; with
// a workload, by fragmentation. Gangs: one class, the block that hosts all nodes with
// the best fit, else spread.
class BestFit final : public Scorer {
 public:
  Result<GpuSet> ChooseGpus(CycleContext& ctx, const JobShape& job, const Node& n,
                            GpuSet avail) override {
    return ctx.cache->Pick(*n.model, avail, alloc::Request{job.gpn, {}});
  }
  bool ByFragmentation(const CycleContext& ctx, const JobShape& job) const override {
    return !job.whole && ctx.frag_active();
  }
  bool Visits(const Best&, int) const override { return true; }
  bool Offer(CycleContext& ctx, const JobShape& job, int node, GpuSet gpus,
             Best* best) override {
    const alloc::NodeModel& model = *ctx.state.nodes[node].model;
    const int q = Bottleneck(model, gpus);
    if (q > best->quality) {
      best->quality = q;
      best->node = node;
      best->gpus = gpus;
      best->ideal = IdealBottleneck(ctx, model, job.gpn);
    }
    return best->quality >= best->ideal;  // no node can beat it
  }
  // The fullest bucket that has a fitting node wins.
  bool Settled(const Best& best) const override { return best.node >= 0; }

  std::vector<int> SelectGang(const CycleContext& ctx, const JobShape& job,
                              const std::vector<int>& cands,
                              const std::vector<int>& free_counts) const override {
    const std::vector<GangCand> c = GangCands(ctx, cands, &free_counts);
    auto by_fit = [](const GangCand& a, const GangCand& b) {
      return std::tie(a.fit, a.node) < std::tie(b.fit, b.node);
    };
    std::vector<int> chosen;
    long best_score = -1;
    int best_first = 0;
    for (size_t lo = 0; lo < c.size();) {
      size_t hi = lo;
      while (hi < c.size() && c[hi].cls == c[lo].cls) ++hi;
      if (static_cast<int>(hi - lo) >= job.nodes) {
        std::vector<GangCand> cls(c.begin() + lo, c.begin() + hi);
        std::vector<int> pick;
        long score = 0;
        // The block that hosts all nodes with the best fit (fewest free GPUs left).
        std::stable_sort(
            cls.begin(), cls.end(),
            [](const GangCand& a, const GangCand& b) { return a.block < b.block; });
        long best_block = -1;
        for (size_t b = 0; b < cls.size();) {
          size_t e = b;
          while (e < cls.size() && cls[e].block == cls[b].block) ++e;
          if (static_cast<int>(e - b) >= job.nodes) {
            std::sort(cls.begin() + b, cls.begin() + e, by_fit);
            long s = 0;
            for (int i = 0; i < job.nodes; ++i) s += cls[b + i].fit;
            if (best_block < 0 || s < best_block) {
              best_block = s;
              pick.clear();
              for (int i = 0; i < job.nodes; ++i) pick.push_back(cls[b + i].node);
            }
          }
          b = e;
        }
        if (pick.empty()) {  // no block holds it all: spread, best fit first
          std::sort(cls.begin(), cls.end(), by_fit);
          for (int i = 0; i < job.nodes; ++i) pick.push_back(cls[i].node);
          score = 1L << 40;  // any one-block choice in another class beats a spread
        }
        for (int n : pick) {
          for (const GangCand& x : cls) {
            if (x.node == n) score += x.fit;
          }
        }
        std::sort(pick.begin(), pick.end());
        if (best_score < 0 || score < best_score ||
            (score == best_score && pick.front() < best_first)) {
          best_score = score;
          best_first = pick.front();
          chosen = pick;
        }
      }
      lo = hi;
    }
    return chosen;
  }

 private:
  // The best bottleneck any set of `count` GPUs can have on `model` (all free): a node
  // reaching it cannot be beaten, so the scan stops there.
  int IdealBottleneck(CycleContext& ctx, const alloc::NodeModel& model, int count) {
    const uint64_t key = model.key() * 131 + static_cast<uint64_t>(count);
    auto it = ideal_.find(key);
    if (it != ideal_.end()) return it->second;
    Result<GpuSet> pick =
        ctx.cache->Pick(model, model.all_gpus(), alloc::Request{count, {}});
    const int b = pick.ok() ? Bottleneck(model, *pick) : alloc::ScoreParts::kNoPair;
    ideal_.emplace(key, b);
    return b;
  }

  std::unordered_map<uint64_t, int> ideal_;  // (model key, count) -> bottleneck
};

}  // namespace

std::unique_ptr<Scorer> MakeScorer(PlacementStyle style) {
  switch (style) {
    case PlacementStyle::kFirstFit:
      return std::make_unique<FirstFit>();
    case PlacementStyle::kBestFit:
      return std::make_unique<BestFit>();
  }
  return std::make_unique<FirstFit>();
}

}  // namespace hachi::sched
