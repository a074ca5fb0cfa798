#include "sched/context.h"

#include <algorithm>
#include <bit>
#include <map>
#include <tuple>

#include "sched/eligibility.h"
#include "sched/features.h"
#include "sched/gpu_share.h"
#include "sched/mig.h"
#include "sched/window.h"

namespace hachi::sched {

// ---- FreeBuckets ----

void FreeBuckets::Reset(int max_gpus) {
  max_gpus_ = std::min(max_gpus, GpuSet::kMaxGpus);
  for (auto& b : buckets_) b.clear();
}

void FreeBuckets::Add(int node, int free_count) {
  auto& b = buckets_[free_count];
  b.insert(std::upper_bound(b.begin(), b.end(), node), node);
}

void FreeBuckets::Move(int node, int from, int to) {
  if (from == to) return;
  auto& b = buckets_[from];
  auto it = std::lower_bound(b.begin(), b.end(), node);
  if (it != b.end() && *it == node) b.erase(it);
  Add(node, to);
}

int FreeBuckets::max_free() const {
  for (int k = max_gpus_; k > 0; --k) {
    if (!buckets_[k].empty()) return k;
  }
  return 0;
}

int FreeBuckets::NodesWithAtLeast(int k) const {
  int n = 0;
  for (int i = std::max(k, 0); i <= max_gpus_; ++i) n += buckets_[i].size();
  return n;
}

// ---- CycleContext ----

void CycleContext::Init() {
  const int n = static_cast<int>(state.nodes.size());
  nodes.assign(n, {});
  shared_nodes.clear();
  share_use.clear();
  mig_nodes.clear();
  mig_busy.clear();
  timeline.Reset(n);
  int max_gpus = 0;
  for (int i = 0; i < n; ++i) {
    const Node& src = state.nodes[i];
    NodeWork& w = nodes[i];
    w.up = src.state == NodeState::kUp && src.model != nullptr;
    // A GPU in MIG mode is never given whole (mig.h).
    w.free =
        (src.free_gpus - src.unhealthy - src.mig_gpus) & GpuSet::FirstN(src.gpu_count());
    w.free_cpus = src.free_cpus;
    w.free_memory_mib = src.free_memory_mib;
    w.whole_busy = src.whole_node_jobs > 0;
    w.shared_busy = src.shared_jobs > 0;
    if (!src.shared_gpus.empty()) {
      w.shared = src.shared_gpus;
      w.free = w.free - w.shared;
      if (share_use.empty()) share_use.resize(n);
      share_use[i] = src.share_use;
      shared_nodes.push_back(i);
    }
    if (!src.mig.empty()) {
      if (mig_busy.empty()) mig_busy.resize(n);
      for (const MigSlot& m : src.mig) mig_busy[i].push_back(m.job != 0);
      mig_nodes.push_back(i);
    }
    max_gpus = std::max(max_gpus, src.gpu_count());
  }
  // Running jobs: isolation flags (also when the caller's counters lag), quota usage.
  const bool quotas =
      !state.limits.user_gpus.empty() || !state.limits.account_gpus.empty();
  for (const Job& job : state.running) {
    const bool whole = IsWholeNode(state, job);
    int gpus = 0;
    for (const Allocation& a : job.allocations) {
      if (a.node < 0 || a.node >= n) continue;
      gpus += a.gpus.size();
      (whole ? nodes[a.node].whole_busy : nodes[a.node].shared_busy) = true;
    }
    if (!quotas) continue;
    if (state.limits.user_gpus.count(job.req.user)) user_used[job.req.user] += gpus;
    if (state.limits.account_gpus.count(job.req.account)) {
      account_used[job.req.account] += gpus;
    }
  }
  buckets.Reset(max_gpus);
  for (int i = 0; i < n; ++i) {
    if (nodes[i].up) buckets.Add(i, nodes[i].free.size());
  }
  default_eligible.assign(state.partitions.size(), -1);
  partition_free.assign(state.partitions.size(), {});
  // Time windows and preemption: a few partitions at most; nothing to do without them.
  window_nodes.clear();
  window_start_now.clear();
  victims.clear();
  preempting_partitions = false;
  for (size_t p = 0; p < state.partitions.size(); ++p) {
    const Partition& part = state.partitions[p];
    preempting_partitions |= part.preempt_lower_tiers;
    if (part.windows.empty() || part.window_nodes.empty()) continue;
    if (window_start_now.empty())
      window_start_now.assign(state.partitions.size(), kNever);
    window_start_now[p] = ActiveOrNext(part.windows, now, state.clock_offset).start;
    for (int node : part.window_nodes) {
      if (node < 0 || node >= n || nodes[node].window_owner >= 0) continue;
      nodes[node].window_owner = static_cast<int>(p);
      window_nodes.push_back(node);
    }
  }
  std::sort(window_nodes.begin(), window_nodes.end());
}

bool CycleContext::WindowFree(int owner, Time t, Duration d) const {
  const Time start =
      t == now
          ? window_start_now[owner]
          : ActiveOrNext(state.partitions[owner].windows, t, state.clock_offset).start;
  return start == kNever || t + d <= start;
}

const std::vector<std::vector<int>>& CycleContext::RunningOn() {
  if (running_on_ready_) return running_on_;
  running_on_ready_ = true;
  running_on_.resize(nodes.size());
  for (auto& v : running_on_) v.clear();
  const int n = static_cast<int>(nodes.size());
  for (size_t j = 0; j < state.running.size(); ++j) {
    for (const Allocation& a : state.running[j].allocations) {
      if (a.node >= 0 && a.node < n) running_on_[a.node].push_back(static_cast<int>(j));
    }
  }
  return running_on_;
}

void CycleContext::EnsureTimeline() {
  if (timeline_ready_) return;
  timeline_ready_ = true;
  const int n = static_cast<int>(nodes.size());
  for (const Job& job : state.running) {
    const bool whole = IsWholeNode(state, job);
    for (const Allocation& a : job.allocations) {
      if (a.node < 0 || a.node >= n) continue;
      // A share's GPU is never counted on to come back (gpu_share.h: conservative),
      // nor a MIG device's (mig.h).
      const GpuSet gpus = a.WholeGpus();
      timeline.AddRelease(a.node, {std::max(job.LeaveEstimate(), now + 1), gpus, a.cpus,
                                   a.memory_mib, whole, job.id});
    }
  }
  for (const auto& [node, r] : started_) timeline.AddRelease(node, r);
  started_.clear();
}

void CycleContext::EnsureGangClasses() {
  if (gang_ready_) return;
  gang_ready_ = true;
  std::map<std::tuple<int, std::string, int>, int> classes;
  std::map<std::string, int> blocks;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& src = state.nodes[i];
    const auto key = std::make_tuple(static_cast<int>(src.interconnect), src.gpu_model,
                                     src.gpu_count());
    nodes[i].gang_class =
        classes.try_emplace(key, static_cast<int>(classes.size())).first->second;
    nodes[i].block =
        blocks.try_emplace(src.block, static_cast<int>(blocks.size())).first->second;
  }
}

JobShape CycleContext::Shape(const Job& job) {
  JobShape s;
  s.job = &job;
  const JobRequest& r = job.req;
  s.gpn = r.GpusPerNode();
  s.nodes = std::max(r.nodes, 1);
  s.cpus = NodeCpus(r);
  s.memory_mib = NodeMemory(r);
  s.limit = r.time_limit > 0 ? r.time_limit : kHour;
  const int p = job.partition;
  if (p < 0 || p >= static_cast<int>(state.partitions.size())) return s;
  s.whole = IsWholeNode(state.partitions[p], r);
  s.share_milli = r.gpu_share_milli;
  s.gpu_memory_mib = r.gpu_memory_mib;
  s.mig = r.Mig();
  // MIG devices are single-node, never whole nodes (validation refuses the rest).
  if (s.mig && (s.nodes > 1 || s.whole || r.Shared())) return s;
  // A share outside a sharing partition never runs (validation refuses it too).
  if (r.Shared() && (!state.partitions[p].allow_gpu_sharing || s.whole)) return s;
  const int64_t min_memory = std::max(r.min_gpu_memory_mib, r.gpu_memory_mib);
  const bool selects = !r.constraint.empty() || !r.nodelist.empty() || !r.exclude.empty();
  const bool plain = r.gpu_model.empty() && min_memory == 0 && !selects;
  if (plain && default_eligible[p] >= 0) {
    s.eligible = default_eligible[p];
    return s;
  }
  // The node selection is part of the set's key (features.h).
  std::string key;
  if (selects) {
    key = r.constraint + '\x1f' + r.nodelist + '\x1f' + r.exclude + '\x1f' +
          std::to_string(s.nodes);
  }
  for (size_t i = 0; i < eligible.size(); ++i) {
    const EligibleSet& e = eligible[i];
    if (e.partition == p && e.gpu_model == r.gpu_model &&
        e.min_gpu_memory_mib == min_memory && e.select_key == key) {
      s.eligible = static_cast<int>(i);
      return s;
    }
  }
  EligibleSet e;
  e.partition = p;
  e.gpu_model = r.gpu_model;
  e.min_gpu_memory_mib = min_memory;
  e.select_key = key;
  e.ok.assign(state.nodes.size(), 0);
  for (int node : state.partitions[p].nodes) {
    if (node < 0 || node >= static_cast<int>(state.nodes.size())) continue;
    if (NodeMatchesStatic(state.nodes[node], r)) e.ok[node] = 1;
  }
  if (selects) ApplySelection(r, s.nodes, &e);
  for (size_t i = 0; i < e.ok.size(); ++i) {
    if (!e.ok[i]) continue;
    e.nodes.push_back(static_cast<int>(i));
    e.up += nodes[i].up;
  }
  eligible.push_back(std::move(e));
  s.eligible = static_cast<int>(eligible.size()) - 1;
  if (plain) default_eligible[p] = s.eligible;
  return s;
}

void CycleContext::ApplySelection(const JobRequest& r, int job_nodes, EligibleSet* e) {
  Result<NodeSelection> sel = ResolveSelection(state, r);
  if (!sel.ok()) {  // validated at submit; a node left the cluster since
    e->bad_selection = true;
    std::fill(e->ok.begin(), e->ok.end(), 0);
    return;
  }
  if (!sel->required.empty() && static_cast<int>(sel->required.size()) < job_nodes) {
    e->required = sel->required;
  }
  // A gang's [...] alternative: the one with the most up nodes (ties: the first), so
  // that every node of the gang has the same one.
  if (job_nodes > 1 && sel->constraint.alternatives() > 0) {
    int best = -1;
    for (int k = 0; k < sel->constraint.alternatives(); ++k) {
      int up = 0;
      for (size_t n = 0; n < e->ok.size(); ++n) {
        up += e->ok[n] && nodes[n].up &&
              SelectionAllows(state, *sel, job_nodes, static_cast<int>(n), k);
      }
      if (up > best) {
        best = up;
        e->choice = k;
      }
    }
  }
  for (size_t n = 0; n < e->ok.size(); ++n) {
    if (e->ok[n] &&
        !SelectionAllows(state, *sel, job_nodes, static_cast<int>(n), e->choice)) {
      e->ok[n] = 0;
    }
  }
}

void CycleContext::Book(const JobShape& job, const Allocation& a) {
  NodeWork& w = nodes[a.node];
  const int before = w.free.size();
  w.free = w.free - a.gpus;  // a share's GPU leaves `free` too; MIG GPUs were never in it
  w.free_cpus -= a.cpus;
  w.free_memory_mib -= a.memory_mib;
  (job.whole ? w.whole_busy : w.shared_busy) = true;
  if (a.share_milli > 0) BookShare(a, job.job->req.user);
  if (!a.mig.empty() && !mig_busy.empty()) {
    for (const std::string& uuid : a.mig) {
      const int k = FindMigSlot(state.nodes[a.node], uuid);
      if (k >= 0) mig_busy[a.node][k] = 1;
    }
  }
  if (w.up) buckets.Move(a.node, before, w.free.size());
  const GpuSet released = a.WholeGpus();  // as EnsureTimeline
  const Timeline::Release rel{now + job.limit, released,  a.cpus,
                              a.memory_mib,    job.whole, job.job->id};
  if (timeline_ready_) {
    timeline.AddRelease(a.node, rel);
  } else {
    started_.emplace_back(a.node, rel);
  }
  const JobRequest& r = job.job->req;
  if (auto it = user_used.find(r.user); it != user_used.end()) {
    it->second += a.gpus.size();
  } else if (state.limits.user_gpus.count(r.user)) {
    user_used[r.user] = a.gpus.size();
  }
  if (auto it = account_used.find(r.account); it != account_used.end()) {
    it->second += a.gpus.size();
  } else if (state.limits.account_gpus.count(r.account)) {
    account_used[r.account] = a.gpus.size();
  }
  if (frag_ready_) node_frag_[a.node] = -1;
  ++version;
}

void CycleContext::EnsureFrag() {
  if (frag_ready_) return;
  frag_ready_ = true;
  const int n = static_cast<int>(nodes.size());
  model_mask_.assign(n, 0);
  node_frag_.assign(n, -1);
  for (int i = 0; i < n; ++i) {
    const Node& src = state.nodes[i];
    model_mask_[i] = frag->ModelMask(src.gpu_model);
    max_cpus_ = std::max(max_cpus_, src.cpus);
    max_gpus_ = std::max(max_gpus_, src.gpu_count());
  }
}

NodeFree CycleContext::FreeView(int node) {
  EnsureFrag();
  const NodeWork& w = nodes[node];
  NodeFree f;
  f.gpus = std::min(state.nodes[node].gpu_count(), GpuSet::kMaxGpus);
  for (uint64_t m = w.free.mask(); m; m &= m - 1) {
    f.milli[std::countr_zero(m)] = kFullGpuMilli;
  }
  for (uint64_t m = w.shared.mask(); m; m &= m - 1) {
    const int g = std::countr_zero(m);
    f.milli[g] =
        static_cast<int16_t>(std::max(0, kFullGpuMilli - ShareUseAt(node, g).milli));
  }
  f.cpus = w.free_cpus;
  f.memory_mib = w.free_memory_mib;
  f.model_ok = model_mask_[node];
  return f;
}

double CycleContext::FragAt(int node) {
  EnsureFrag();
  if (node_frag_[node] < 0) node_frag_[node] = frag->Frag(FreeView(node));
  return node_frag_[node];
}

int CycleContext::MaxNodeCpus() {
  EnsureFrag();
  return max_cpus_;
}

int CycleContext::MaxNodeGpus() {
  EnsureFrag();
  return max_gpus_;
}

void CycleContext::BookShare(const Allocation& a, const std::string& user) {
  NodeWork& w = nodes[a.node];
  const int gpu = a.gpus.First();
  if (gpu < 0) return;
  w.shared = w.shared | a.gpus;
  if (share_use.empty()) share_use.resize(nodes.size());
  std::vector<GpuShareUse>& use = share_use[a.node];
  if (static_cast<int>(use.size()) <= gpu) {
    use.resize(std::max(state.nodes[a.node].gpu_count(), gpu + 1));
  }
  AddShareUse(&use[gpu], a, user);
  auto it = std::lower_bound(shared_nodes.begin(), shared_nodes.end(), a.node);
  if (it == shared_nodes.end() || *it != a.node) shared_nodes.insert(it, a.node);
}

const PartitionFree& CycleContext::FreeIn(int partition) {
  PartitionFree& f = partition_free[partition];
  if (f.version == version) return f;
  f = {};
  f.version = version;
  for (int node : state.partitions[partition].nodes) {
    if (node < 0 || node >= static_cast<int>(nodes.size()) || !nodes[node].up) continue;
    const int k = nodes[node].free.size();
    f.total += k;
    if (k > f.largest) {
      f.largest = k;
      f.largest_node = node;
    }
  }
  return f;
}

int CycleContext::UserUsed(const std::string& user) const {
  auto it = user_used.find(user);
  return it == user_used.end() ? 0 : it->second;
}

int CycleContext::AccountUsed(const std::string& account) const {
  auto it = account_used.find(account);
  return it == account_used.end() ? 0 : it->second;
}

}  // namespace hachi::sched
