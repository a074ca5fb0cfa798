#include "sched/inspect.h"

#include <algorithm>

#include "sched/context.h"
#include "sched/gpu_share.h"
#include "sched/mig.h"

namespace hachi::sched {
namespace {

// Shapes that differ only in what CheckNode does not read are one probe.
bool SameProbe(const JobShape& a, const JobShape& b) {
  return a.eligible == b.eligible && a.gpn == b.gpn && a.cpus == b.cpus &&
         a.memory_mib == b.memory_mib && a.whole == b.whole && a.limit == b.limit;
}

// A few distinct probes per partition are enough: the answer is "does any fit".
constexpr size_t kMaxProbes = 16;

// The shared GPUs of `node` with room for the share `s`: its user's, another's.
struct ShareSpots {
  int own = 0;
  int other_user = 0;
};
ShareSpots SpotsFor(const CycleContext& ctx, const JobShape& s, int node, Time now) {
  ShareSpots spots;
  JobShape on_shared = s;  // the node checks without the free-GPU count
  on_shared.gpn = 0;
  Timeline::Offer offer;
  if (CheckNode(ctx, on_shared, node, now, &offer) != NodeVerdict::kFits) return spots;
  const int64_t capacity = ctx.state.nodes[node].gpu_memory_mib;
  for (int gpu : ctx.nodes[node].shared.Indices()) {
    switch (RoomFor(ctx.ShareUseAt(node, gpu), capacity, s.share_milli, s.gpu_memory_mib,
                    s.job->req.user)) {
      case ShareRoom::kFits:
        ++spots.own;
        break;
      case ShareRoom::kOtherUser:
        ++spots.other_user;
        break;
      case ShareRoom::kFull:
        break;
    }
  }
  return spots;
}

}  // namespace

std::vector<int> FragmentedGpus(const ClusterState& state, Time now) {
  const int parts = static_cast<int>(state.partitions.size());
  std::vector<int> out(parts, 0);
  CycleContext ctx(state, now, nullptr);
  ctx.Init();
  std::vector<int> smallest(parts, 0);  // k per partition; 0: no multi-GPU job waits
  std::vector<std::vector<JobShape>> probes(parts);
  for (const Job& job : state.pending) {
    if (job.partition < 0 || job.partition >= parts) continue;
    const JobShape s = ctx.Shape(job);
    if (s.eligible < 0 || s.share_milli > 0 || s.gpn < 2) continue;
    int used = 0, limit = 0;
    if (CheckJob(ctx, s, &used, &limit) != Reason::kNone)
      continue;  // not waiting on GPUs
    int& k = smallest[job.partition];
    std::vector<JobShape>& p = probes[job.partition];
    if (k == 0 || s.gpn < k) {
      k = s.gpn;
      p.clear();
    }
    if (s.gpn != k || p.size() >= kMaxProbes) continue;
    if (std::none_of(p.begin(), p.end(),
                     [&](const JobShape& q) { return SameProbe(q, s); })) {
      p.push_back(s);
    }
  }
  for (int part = 0; part < parts; ++part) {
    if (smallest[part] == 0) continue;
    for (int node : state.partitions[part].nodes) {
      if (node < 0 || node >= static_cast<int>(state.nodes.size())) continue;
      const NodeWork& w = ctx.nodes[node];
      if (!w.up || w.free.empty()) continue;
      bool eligible = false, fits = false;
      for (const JobShape& s : probes[part]) {
        if (!ctx.eligible[s.eligible].ok[node]) continue;
        eligible = true;
        Timeline::Offer offer;
        if (CheckNode(ctx, s, node, now, &offer) == NodeVerdict::kFits) {
          fits = true;
          break;
        }
      }
      if (eligible && !fits) out[part] += w.free.size();
    }
  }
  return out;
}

NodeBreakdown ExplainNodes(const ClusterState& state, const Job& job, Time now) {
  NodeBreakdown b;
  const int n = static_cast<int>(state.nodes.size());
  b.nodes = n;
  const int part = job.partition;
  if (part < 0 || part >= static_cast<int>(state.partitions.size())) {
    b.not_in_partition = n;
    return b;
  }
  CycleContext ctx(state, now, nullptr);
  ctx.Init();
  const JobShape s = ctx.Shape(job);
  std::vector<uint8_t> member(n, 0);
  for (int node : state.partitions[part].nodes) {
    if (node >= 0 && node < n) member[node] = 1;
  }
  for (int node = 0; node < n; ++node) {
    if (!member[node]) {
      ++b.not_in_partition;
      continue;
    }
    if (s.eligible < 0 || !ctx.eligible[s.eligible].ok[node]) {
      ++b.unsuitable;
      continue;
    }
    Timeline::Offer offer;
    // MIG devices (mig.h): the node checks without free whole GPUs, then its devices.
    JobShape probe = s;
    if (s.mig) probe.gpn = 0;
    NodeVerdict v = CheckNode(ctx, probe, node, now, &offer);
    if (s.mig && v != NodeVerdict::kDown) {
      const Node& src = state.nodes[node];
      const std::string& profile = job.req.mig_profile;
      if (CountMigSlots(src, profile) == 0) {
        v = NodeVerdict::kIneligible;
      } else if (v == NodeVerdict::kFits &&
                 CountFreeMigSlots(src, ctx.mig_busy[node], profile) < s.gpn) {
        v = NodeVerdict::kGpus;
      }
    }
    if (v == NodeVerdict::kIneligible) {
      ++b.unsuitable;
      continue;
    }
    // A share without a free GPU may still join a shared GPU with room, if the shares
    // there are its user's (as Placer::PackShare places it).
    if (s.share_milli > 0 && v == NodeVerdict::kGpus) {
      const ShareSpots spots = SpotsFor(ctx, s, node, now);
      if (spots.own > 0) {
        v = NodeVerdict::kFits;
      } else if (spots.other_user > 0) {
        ++b.other_user;
        b.other_user_gpus += spots.other_user;
      }
    }
    const int i = static_cast<int>(v);
    const NodeWork& w = ctx.nodes[node];
    const int free = w.free.size();
    ++b.verdicts[i];
    if (v == NodeVerdict::kDown && state.nodes[node].state == NodeState::kDrained)
      ++b.drained;
    b.largest_free[i] = std::max(b.largest_free[i], free);
    if (!w.up) continue;
    b.free_gpus += free;
    if (free > b.largest_free_gpus || b.largest_free_node < 0) {
      b.largest_free_gpus = free;
      b.largest_free_node = node;
    }
  }
  return b;
}

}  // namespace hachi::sched
