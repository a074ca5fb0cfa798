// Fluent fixture builders for the scheduler's tests and benchmarks, so a case fits on
// a line (STYLE.md: Kubernetes testing/wrappers.go):
//
//   MakeJob(1).Gpus(4).Partition("gpu8").User("u").Limit(2 * kHour)
//   MakeCluster().Nodes(4, "hgx-h100").Partition("gpu8", PartitionMode::kWholeNode)
//       .Pending(MakeJob(1).Gpus(8)).Running(MakeJob(2).Gpus(2), /*node=*/0, "0,1")
//       .Build()
//
// Test-only code: aborts on a bad preset or GPU list instead of returning a Status.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "alloc/node_model.h"
#include "sched/cluster.h"
#include "sched/eligibility.h"
#include "sched/gpu_share.h"
#include "sched/scheduler.h"
#include "topo/analysis.h"
#include "topo/presets.h"

namespace hachi::sched::testing {

class JobBuilder {
 public:
  explicit JobBuilder(JobId id) { job_.id = id; }
  JobBuilder& Gpus(int n) {
    job_.req.gpus = n;
    return *this;
  }
  JobBuilder& Gang(int nodes, int gpus_per_node) {
    job_.req.nodes = nodes;
    job_.req.gpus_per_node = gpus_per_node;
    job_.req.gpus = nodes * gpus_per_node;
    return *this;
  }
  JobBuilder& Partition(std::string p) {
    job_.req.partition = std::move(p);
    return *this;
  }
  JobBuilder& User(std::string u) {
    job_.req.user = std::move(u);
    return *this;
  }
  JobBuilder& Account(std::string a) {
    job_.req.account = std::move(a);
    return *this;
  }
  JobBuilder& Qos(std::string q) {
    job_.req.qos = std::move(q);
    return *this;
  }
  JobBuilder& Limit(Duration d) {
    job_.req.time_limit = d;
    return *this;
  }
  JobBuilder& Submit(Time t) {
    job_.submit_time = t;
    return *this;
  }
  JobBuilder& Start(Time t) {
    job_.start_time = t;
    return *this;
  }
  JobBuilder& Cpus(int c) {
    job_.req.cpus = c;
    return *this;
  }
  JobBuilder& CpusPerGpu(int c) {
    job_.req.cpus_per_gpu = c;
    return *this;
  }
  JobBuilder& MemoryMib(int64_t m) {
    job_.req.memory_mib = m;
    return *this;
  }
  JobBuilder& Model(std::string m) {
    job_.req.gpu_model = std::move(m);
    return *this;
  }
  // A GPU share: `milli` thousandths of one GPU, `memory_mib` of its memory promised.
  JobBuilder& Share(int milli, int64_t memory_mib = 0) {
    job_.req.gpus = 1;
    job_.req.gpu_share_milli = milli;
    job_.req.gpu_memory_mib = memory_mib;
    return *this;
  }
  // `n` MIG devices of `profile` ("1g.10gb") on one node.
  JobBuilder& Mig(std::string profile, int n = 1) {
    job_.req.gpus = n;
    job_.req.mig_profile = std::move(profile);
    return *this;
  }
  JobBuilder& MinGpuMemoryMib(int64_t m) {
    job_.req.min_gpu_memory_mib = m;
    return *this;
  }
  JobBuilder& Exclusive() {
    job_.req.exclusive = true;
    return *this;
  }
  JobBuilder& Held() {
    job_.held = true;
    return *this;
  }
  // A running job already being preempted (the caller applied a Preemption).
  JobBuilder& PreemptKillAt(Time t) {
    job_.preempt_kill_at = t;
    return *this;
  }
  JobBuilder& Deps(DependencyState s) {
    job_.deps = s;
    return *this;
  }
  // Node selection and timing.
  JobBuilder& Constraint(std::string c) {
    job_.req.constraint = std::move(c);
    return *this;
  }
  JobBuilder& Nodelist(std::string l) {
    job_.req.nodelist = std::move(l);
    return *this;
  }
  JobBuilder& Exclude(std::string l) {
    job_.req.exclude = std::move(l);
    return *this;
  }
  JobBuilder& Begin(Time t) {
    job_.req.begin_time = t;
    return *this;
  }
  JobBuilder& Deadline(Time t) {
    job_.req.deadline = t;
    return *this;
  }
  JobBuilder& Nice(int n) {
    job_.req.nice = n;
    return *this;
  }
  const Job& job() const { return job_; }
  Job& job() { return job_; }

 private:
  Job job_;
};
inline JobBuilder MakeJob(JobId id) { return JobBuilder(id); }

// One compiled NodeModel per preset, shared like the server shares one per layout.
inline std::shared_ptr<const alloc::NodeModel> PresetModel(const std::string& preset) {
  static std::map<std::string, std::shared_ptr<const alloc::NodeModel>> models;
  auto it = models.find(preset);
  if (it != models.end()) return it->second;
  auto t = topo::LoadPreset(preset);
  if (!t.ok()) {
    std::fprintf(stderr, "bad preset %s: %s\n", preset.c_str(),
                 t.status().ToString().c_str());
    std::abort();
  }
  auto m = alloc::NodeModel::Compile(*t);
  if (!m.ok()) std::abort();
  auto ptr = std::make_shared<const alloc::NodeModel>(*m);
  models.emplace(preset, ptr);
  return ptr;
}

inline Node PresetNode(const std::string& name, const std::string& preset) {
  static std::map<std::string, topo::Topology> topos;
  auto it = topos.find(preset);
  if (it == topos.end()) it = topos.emplace(preset, *topo::LoadPreset(preset)).first;
  const topo::Topology& t = it->second;
  Node n;
  n.name = name;
  n.model = PresetModel(preset);
  n.interconnect = topo::Analyze(t).interconnect;
  n.gpu_model = t.gpu(0).model;
  n.gpu_memory_mib = t.gpu(0).memory_mib;
  n.cpus = 128;
  n.memory_mib = 1 << 20;
  n.free_gpus = t.AllGpus();
  n.free_cpus = n.cpus;
  n.free_memory_mib = n.memory_mib;
  return n;
}

class ClusterBuilder {
 public:
  // `count` nodes of a preset, named n<index>, in network block `block`.
  ClusterBuilder& Nodes(int count, const std::string& preset,
                        const std::string& block = "") {
    for (int i = 0; i < count; ++i) {
      Node n = PresetNode("n" + std::to_string(s_.nodes.size()), preset);
      n.block = block;
      s_.nodes.push_back(std::move(n));
    }
    return *this;
  }
  ClusterBuilder& NodeState(int node, sched::NodeState st) {
    s_.nodes[node].state = st;
    return *this;
  }
  // A partition over `nodes` (empty: every node added so far).
  ClusterBuilder& Partition(const std::string& name,
                            PartitionMode mode = PartitionMode::kShared,
                            std::vector<int> nodes = {}) {
    sched::Partition p;
    p.name = name;
    p.mode = mode;
    if (nodes.empty()) {
      for (size_t i = 0; i < s_.nodes.size(); ++i) nodes.push_back(static_cast<int>(i));
    }
    p.nodes = nodes;
    const int index = static_cast<int>(s_.partitions.size());
    for (int n : nodes) s_.nodes[n].partitions.push_back(index);
    s_.partitions.push_back(std::move(p));
    return *this;
  }
  // Edits the last partition added.
  sched::Partition& LastPartition() { return s_.partitions.back(); }
  // The last partition allows GPU shares.
  ClusterBuilder& AllowSharing() {
    s_.partitions.back().allow_gpu_sharing = true;
    return *this;
  }
  // The last partition takes jobs without GPUs.
  ClusterBuilder& AllowCpuJobs() {
    s_.partitions.back().allow_cpu_jobs = true;
    return *this;
  }
  // Configured features and gres.conf type of a node.
  ClusterBuilder& Features(int node, std::vector<std::string> f) {
    s_.nodes[node].features = std::move(f);
    return *this;
  }
  ClusterBuilder& GresType(int node, std::string t) {
    s_.nodes[node].gres_type = std::move(t);
    return *this;
  }
  // GPU `gpu` of `node` in MIG mode with devices of these profiles, UUIDs
  // "MIG-n<node>-g<gpu>-<k>", 10 GiB per "g" of the profile. Never free whole.
  ClusterBuilder& Mig(int node, int gpu, std::vector<std::string> profiles) {
    Node& n = s_.nodes[node];
    const GpuSet g = GpuSet::FromIndices({gpu});
    n.mig_gpus = n.mig_gpus | g;
    n.free_gpus = n.free_gpus - g;
    for (size_t k = 0; k < profiles.size(); ++k) {
      MigSlot m;
      m.gpu = gpu;
      m.profile = profiles[k];
      m.memory_mib = 10240 * std::max(1, std::atoi(profiles[k].c_str()));
      m.uuid = "MIG-n" + std::to_string(node) + "-g" + std::to_string(gpu) + "-" +
               std::to_string(k);
      n.mig.push_back(std::move(m));
    }
    return *this;
  }
  ClusterBuilder& MaxGpus(int max) {
    s_.partitions.back().max_gpus = max;
    return *this;
  }
  ClusterBuilder& MinGpus(int min) {
    s_.partitions.back().min_gpus = min;
    return *this;
  }
  ClusterBuilder& Tier(int tier) {
    s_.partitions.back().tier = tier;
    return *this;
  }
  // The last partition may preempt lower tiers.
  ClusterBuilder& PreemptsLowerTiers() {
    s_.partitions.back().preempt_lower_tiers = true;
    return *this;
  }
  // How the last partition's jobs are preempted.
  ClusterBuilder& Preempted(PreemptMode mode, Duration grace) {
    s_.partitions.back().preempt_mode = mode;
    s_.partitions.back().grace = grace;
    return *this;
  }
  // The last partition owns `nodes` from `start` to `end` ("HH:MM") on `days` (0 =
  // Sunday; empty: every day).
  ClusterBuilder& Window(const std::string& start, const std::string& end,
                         std::vector<int> nodes, std::vector<int> days = {}) {
    auto minutes = [](const std::string& hhmm) {
      return std::stoi(hhmm.substr(0, 2)) * 60 + std::stoi(hhmm.substr(3, 2));
    };
    s_.partitions.back().windows.push_back(
        {minutes(start), minutes(end), std::move(days)});
    s_.partitions.back().window_nodes = std::move(nodes);
    return *this;
  }
  ClusterBuilder& AllowUsers(std::vector<std::string> u) {
    s_.partitions.back().allowed_users = std::move(u);
    return *this;
  }
  ClusterBuilder& AllowAccounts(std::vector<std::string> a) {
    s_.partitions.back().allowed_accounts = std::move(a);
    return *this;
  }
  ClusterBuilder& Qos(const std::string& name, int priority) {
    s_.qos.push_back({name, priority});
    return *this;
  }
  ClusterBuilder& UserQuota(const std::string& user, int gpus) {
    s_.limits.user_gpus[user] = gpus;
    return *this;
  }
  ClusterBuilder& AccountQuota(const std::string& account, int gpus) {
    s_.limits.account_gpus[account] = gpus;
    return *this;
  }
  ClusterBuilder& Share(const std::string& account, double share, double usage = 0) {
    s_.fairshare.shares[account] = share;
    s_.fairshare.usage[account] = usage;
    return *this;
  }
  // A pending job; partition resolved by name (empty: the first), limit defaulted.
  ClusterBuilder& Pending(const JobBuilder& b) {
    s_.pending.push_back(Resolve(b.job()));
    return *this;
  }
  // A running job on `node` holding `gpus` ("0,1"; empty: the job's GPU count, lowest
  // free first). Updates the node's free resources and isolation counters.
  ClusterBuilder& Running(const JobBuilder& b, int node, const std::string& gpus = "") {
    return RunningOn(b, {{node, gpus}});
  }
  ClusterBuilder& RunningOn(const JobBuilder& b,
                            std::vector<std::pair<int, std::string>> shares) {
    Job j = Resolve(b.job());
    for (const auto& [node, list] : shares) {
      Node& n = s_.nodes[node];
      Allocation a;
      a.node = node;
      if (list.empty()) {
        uint64_t m = n.free_gpus.mask();
        for (int i = 0; i < j.req.GpusPerNode(); ++i) m &= m - 1;
        a.gpus = GpuSet(n.free_gpus.mask() & ~m);
      } else {
        a.gpus = *GpuSet::Parse(list);
      }
      a.cpus = NodeCpus(j.req);
      a.memory_mib = NodeMemory(j.req);
      a.share_milli = j.req.gpu_share_milli;
      a.gpu_memory_mib = j.req.gpu_memory_mib;
      if (a.share_milli > 0) {
        // A test cluster that overcommits, or mixes users on a GPU.
        if (!ApplyShare(n, a, j.req.user).ok()) std::abort();
      } else {
        n.free_gpus = n.free_gpus - a.gpus;
      }
      n.free_cpus -= a.cpus;
      n.free_memory_mib -= a.memory_mib;
      ++(IsWholeNode(s_, j) ? n.whole_node_jobs : n.shared_jobs);
      j.allocations.push_back(a);
    }
    s_.running.push_back(std::move(j));
    return *this;
  }
  ClusterState Build() const { return s_; }
  ClusterState& state() { return s_; }

 private:
  // Through ValidateRequest when it accepts the job (defaults, whole-node rounding);
  // else by name only, so tests can also feed the scheduler jobs it would refuse.
  Job Resolve(Job j) const {
    if (Result<Job> v = ValidateRequest(s_, j.req); v.ok()) {
      j.req = v->req;
      j.partition = v->partition;
      return j;
    }
    if (j.req.partition.empty() && !s_.partitions.empty()) {
      j.req.partition = s_.partitions.front().name;
    }
    j.partition = s_.PartitionIndex(j.req.partition);
    if (j.req.time_limit == 0) {
      j.req.time_limit =
          j.partition >= 0 ? s_.partitions[j.partition].default_time : kHour;
    }
    return j;
  }

  ClusterState s_;
};
inline ClusterBuilder MakeCluster() { return ClusterBuilder(); }

}  // namespace hachi::sched::testing
