#include "server/snapshot.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "sched/apply.h"
#include "sched/dependencies.h"
#include "sched/lint.h"
#include "sched/power.h"
#include "sim/cluster_spec.h"
#include "topo/presets.h"
#include "topo/topology_file.h"

namespace hachi::server {

Result<NodeHardware> CompileNodeHardware(const state::NodeRecord& node) {
  Result<topo::Topology> t = topo::ParseTopologyJson(node.topology_json, node.name);
  if (!t.ok()) {
    return InvalidArgument("node " + node.name + ": topology: " + t.status().message());
  }
  Result<alloc::NodeModel> model = alloc::NodeModel::Compile(*t);
  if (!model.ok()) {
    return InvalidArgument("node " + node.name + ": " + model.status().message());
  }
  NodeHardware hw;
  hw.model = std::make_shared<const alloc::NodeModel>(std::move(*model));
  hw.interconnect = topo::Analyze(*t).interconnect;
  if (t->gpu_count() > 0) {
    hw.gpu_model = t->gpu(0).model;
    hw.gpu_memory_mib = t->gpu(0).memory_mib;
  }
  // A GPU in MIG mode is never given whole; its devices with a profile and
  // a UUID are scheduled (one NVML could not name cannot be asked for or handed out).
  for (const topo::Gpu& g : t->gpus()) {
    if (!g.mig_enabled) continue;
    hw.mig_gpus = hw.mig_gpus | GpuSet::FromIndices({g.index});
    for (const topo::MigDevice& d : g.mig_devices) {
      if (d.profile.empty() || d.uuid.empty()) continue;
      hw.mig.push_back({g.index, d.profile, d.memory_mib, d.uuid, 0});
      hw.mig_ids.emplace_back(d.gpu_instance, d.compute_instance);
    }
  }
  return hw;
}

namespace {

// The node a burst pool's nodes register as (config::PoolConfig::preset), else the
// first of its nodes that has registered; nullopt when neither is known.
std::optional<sched::Node> PoolShape(const config::PoolConfig& pool,
                                     const std::vector<sched::Node>& registered,
                                     const std::unordered_map<std::string, int>& index) {
  if (!pool.preset.empty()) {
    Result<topo::Topology> t = topo::LoadPreset(pool.preset);
    if (t.ok()) {
      Result<sched::ClusterState> one =
          sim::BuildCluster("1x" + std::to_string(t->gpu_count()) + ":" + pool.preset);
      if (one.ok() && !one->nodes.empty()) return std::move(one->nodes[0]);
    }
  }
  for (const std::string& name : pool.nodes.names) {
    if (auto it = index.find(name); it != index.end()) return registered[it->second];
  }
  return std::nullopt;
}

}  // namespace

Result<BaseCluster> BuildBase(
    const state::StateImage& image,
    const std::unordered_map<std::string, NodeHardware>& hardware,
    const config::ClusterConfig* config) {
  BaseCluster base;
  sched::ClusterState& s = base.state;
  std::unordered_map<std::string, int> registered;
  for (const auto& [name, rec] : image.nodes) {  // std::map: name order
    auto hw = hardware.find(name);
    if (hw == hardware.end() || !hw->second.model) {
      base.warnings.push_back("node " + name + " left out: no usable topology");
      continue;
    }
    sched::Node n;
    n.name = name;
    n.model = hw->second.model;
    n.interconnect = hw->second.interconnect;
    n.gpu_model = hw->second.gpu_model;
    n.gpu_memory_mib = hw->second.gpu_memory_mib;
    n.mig_gpus = hw->second.mig_gpus & n.model->all_gpus();
    n.mig = hw->second.mig;
    n.cpus = rec.cpus;
    n.memory_mib = rec.memory_mib;
    n.block = rec.block;
    registered[name] = static_cast<int>(s.nodes.size());
    s.nodes.push_back(std::move(n));
  }
  // A burst pool's nodes that have not registered (powered off as far as this server
  // knows): in the base with their pool's shape, so that the scheduler can plan their
  // resume; their snapshots keep them down until they are up (PowerService).
  if (config != nullptr) {
    for (const config::PoolConfig& pool : config->pools) {
      if (pool.kind != config::PoolKind::kBurst) continue;
      std::optional<sched::Node> shape;  // the first time a node needs it
      bool unshaped = false;
      for (const std::string& name : pool.nodes.names) {
        if (registered.count(name) || image.nodes.count(name)) continue;
        if (!shape) shape = PoolShape(pool, s.nodes, registered);
        if (!shape) {
          unshaped = true;
          break;
        }
        sched::Node n = *shape;
        n.name = name;
        n.block.clear();
        n.state = sched::NodeState::kDown;
        s.nodes.push_back(std::move(n));
      }
      if (unshaped) {
        base.warnings.push_back("pool " + pool.name +
                                ": nodes that have not registered are not resumed for "
                                "jobs: give the pool a preset (docs/pools.md)");
      }
    }
    std::sort(s.nodes.begin(), s.nodes.end(),
              [](const sched::Node& a, const sched::Node& b) { return a.name < b.name; });
  }
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    s.nodes[i].partitions = {0};
    base.node_index[s.nodes[i].name] = static_cast<int>(i);
  }
  sched::Partition p;
  p.name = "default";
  p.mode = sched::PartitionMode::kShared;
  p.default_time = kHour;
  p.max_time = 30 * kDay;
  p.allow_cpu_jobs = true;  // hachi dev: Snakemake rules, dask workers
  for (size_t i = 0; i < s.nodes.size(); ++i) p.nodes.push_back(static_cast<int>(i));
  s.partitions.push_back(std::move(p));
  if (config != nullptr) {
    // Nodes the config names but no agent has registered yet are left out for now
    // (they join when they register), and named in the warnings.
    config::ClusterConfig c = *config;
    std::vector<std::string> missing;
    auto keep_known = [&](config::NodeSelector& sel) {
      std::vector<std::string> known;
      for (std::string& n : sel.names) {
        if (base.node_index.count(n)) {
          known.push_back(std::move(n));
        } else if (std::find(missing.begin(), missing.end(), n) == missing.end()) {
          missing.push_back(n);
        }
      }
      sel.names = std::move(known);
    };
    for (config::PartitionConfig& pc : c.partitions) {
      keep_known(pc.nodes);
      keep_known(pc.window_nodes);
    }
    for (config::NodeOverride& o : c.node_overrides) keep_known(o.nodes);
    HACHI_RETURN_IF_ERROR(
        config::ApplyClusterConfig(c, &s, /*allow_empty_partitions=*/true));
    // Placement by price (docs/pools.md): the nodes of burst pools rank above the
    // others, so work goes to nodes that are paid for anyway first. A burst node
    // without a shape is left out of its pool (the warning above says why).
    for (config::PoolConfig& pool : c.pools) {
      std::erase_if(pool.nodes.names,
                    [&](const std::string& n) { return !base.node_index.count(n); });
    }
    Result<std::vector<sched::PowerPool>> pools = config::PowerPools(c, s);
    if (!pools.ok()) return pools.status();
    sched::RankByCost(*pools, &s);
    base.pools = std::move(*pools);
    for (const std::string& n : missing) {
      base.warnings.push_back("node " + n + " is in the config but has not registered");
    }
  }
  for (const sched::PolicyWarning& f : sched::LintPartitions(s)) {
    base.warnings.push_back(f.message);
  }
  return base;
}

std::vector<sched::WorkloadClass> RecentWorkload(const state::StateImage& image,
                                                 size_t last_n) {
  std::vector<sched::WorkloadClass> classes;
  size_t seen = 0;
  for (auto it = image.jobs.rbegin(); it != image.jobs.rend() && seen < last_n;
       ++it, ++seen) {
    const sched::JobRequest& r = it->second.req;
    sched::WorkloadClass c;
    c.gpus = r.GpusPerNode();
    c.share_milli = r.gpu_share_milli;
    c.cpus = r.cpus + r.cpus_per_gpu * c.gpus;
    c.memory_mib = r.memory_mib + r.memory_mib_per_gpu * c.gpus;
    c.gpu_model = r.gpu_model;
    c.weight = 1;
    auto same =
        std::find_if(classes.begin(), classes.end(), [&](const sched::WorkloadClass& x) {
          return x.gpus == c.gpus && x.share_milli == c.share_milli && x.cpus == c.cpus &&
                 x.memory_mib == c.memory_mib && x.gpu_model == c.gpu_model;
        });
    if (same != classes.end()) {
      same->weight += 1;
    } else {
      classes.push_back(std::move(c));
    }
  }
  return classes;
}

sched::Job ToSchedJob(const sched::ClusterState& s, const state::JobRecord& r) {
  sched::Job j;
  j.id = r.id;
  j.req = r.req;
  j.partition = s.PartitionIndex(r.req.partition);
  j.submit_time = r.submit_time;
  j.held = r.held;
  j.start_time = r.start_time;
  return j;
}

namespace {

sched::NodeState SchedNodeState(state::NodeState s) {
  switch (s) {
    case state::NodeState::kUp:
      return sched::NodeState::kUp;
    case state::NodeState::kDrained:
    case state::NodeState::kBurnIn:  // out of service until it passes
      return sched::NodeState::kDrained;
    case state::NodeState::kDown:
      return sched::NodeState::kDown;
  }
  return sched::NodeState::kDown;
}

sched::JobOutcome OutcomeOf(const state::StateImage& image, sched::JobId id) {
  auto it = image.jobs.find(id);
  if (it == image.jobs.end()) return sched::JobOutcome::kUnknown;
  switch (it->second.state) {
    case state::JobState::kPending:
    case state::JobState::kRunning:
      return sched::JobOutcome::kNotFinished;
    case state::JobState::kCompleted:
      return sched::JobOutcome::kSucceeded;
    default:
      return sched::JobOutcome::kFailed;
  }
}

// Calls fn(record) for the jobs `active` names (all jobs when it is null), in id order.
template <typename Fn>
void ForEachActiveJob(const state::StateImage& image,
                      const std::set<state::JobId>* active, Fn fn) {
  if (active == nullptr) {
    for (const auto& [id, r] : image.jobs) fn(r);
    return;
  }
  for (state::JobId id : *active) {
    auto it = image.jobs.find(id);
    if (it != image.jobs.end()) fn(it->second);
  }
}

}  // namespace

namespace {

// `s` (a copy of the base) with each node's state from its record and nothing booked;
// then the running jobs' allocations booked on their nodes — only on the nodes
// `touched` marks when it is given — and each array's running tasks counted.
void BookRunning(const BaseCluster& base, const state::StateImage& image,
                 const std::set<state::JobId>* active, const std::vector<bool>* touched,
                 sched::ClusterState* s,
                 std::unordered_map<sched::JobId, int>* array_running) {
  for (size_t i = 0; i < s->nodes.size(); ++i) {
    sched::Node& n = s->nodes[i];
    auto rec = image.nodes.find(n.name);
    if (rec == image.nodes.end()) {  // a burst node never registered: off
      n.state = sched::NodeState::kDown;
      n.unhealthy = GpuSet();
    } else {
      n.state = SchedNodeState(rec->second.state);
      n.unhealthy = rec->second.unhealthy & n.model->all_gpus();
    }
    n.free_gpus = n.model->all_gpus() - n.unhealthy - n.mig_gpus;
    for (sched::MigSlot& m : n.mig) m.job = 0;  // the running jobs take theirs below
    n.free_cpus = n.cpus;
    n.free_memory_mib = n.memory_mib;
  }
  sched::PlanApplier applier(s);
  ForEachActiveJob(image, active, [&](const state::JobRecord& r) {
    if (r.state != state::JobState::kRunning) return;
    sched::Job j = ToSchedJob(*s, r);
    for (const state::NodeAllocation& na : r.allocations) {
      auto ni = base.node_index.find(na.node);
      if (ni == base.node_index.end()) continue;  // its node left the cluster
      if (touched != nullptr && !(*touched)[ni->second]) continue;
      sched::Allocation a{ni->second,     na.gpus,           na.cpus, na.memory_mib,
                          na.share_milli, na.gpu_memory_mib, na.mig};
      // The records never double-book (the applier checked before committing); a
      // failure here means a node re-registered with fewer GPUs: keep the job, skip it.
      if (applier.Take(j, a).ok()) j.allocations.push_back(a);
    }
    if (array_running != nullptr && r.spec.array_job_id != 0) {
      ++(*array_running)[r.spec.array_job_id];
    }
    if (touched == nullptr) s->running.push_back(std::move(j));
  });
}

}  // namespace

sched::ClusterState BuildNodeSnapshot(const BaseCluster& base,
                                      const state::StateImage& image,
                                      const std::set<state::JobId>& active,
                                      const std::vector<bool>& touched) {
  sched::ClusterState s = base.state;
  BookRunning(base, image, &active, &touched, &s, nullptr);
  return s;
}

sched::ClusterState BuildSnapshot(const BaseCluster& base, const state::StateImage& image,
                                  const std::set<state::JobId>* active) {
  sched::ClusterState s = base.state;
  // Running jobs first (they hold resources), then pending ones.
  std::unordered_map<sched::JobId, int> array_running;
  BookRunning(base, image, active, nullptr, &s, &array_running);
  // -d singleton: a job waits while an earlier job of its name and user is
  // pending, or any is running. The lowest such job id per (user, name), filled as the
  // pending jobs go by in id order; only built when some job asks for it.
  bool singletons = false;
  ForEachActiveJob(image, active, [&](const state::JobRecord& r) {
    for (const sched::Dependency& d : r.req.dependencies) {
      singletons |= d.kind == sched::DependencyKind::kSingleton;
    }
  });
  std::map<std::pair<std::string, std::string>, state::JobId> first_of_name;
  if (singletons) {
    for (const sched::Job& j : s.running) {
      const state::JobRecord& r = image.jobs.at(j.id);
      first_of_name.try_emplace({r.req.user, r.spec.name}, r.id);
    }
  }
  ForEachActiveJob(image, active, [&](const state::JobRecord& r) {
    state::JobId singleton_wait = 0;
    if (singletons && r.state == state::JobState::kPending) {
      auto [it, fresh] = first_of_name.try_emplace({r.req.user, r.spec.name}, r.id);
      const bool asks = std::any_of(
          r.req.dependencies.begin(), r.req.dependencies.end(),
          [](const auto& d) { return d.kind == sched::DependencyKind::kSingleton; });
      if (asks && !fresh && it->second != r.id) singleton_wait = it->second;
    }
    // A held job cannot start and reserves nothing: the scheduler never sees it (its
    // reason, "held", comes from the record). A burst of held submits costs no cycle
    // time.
    if (r.state != state::JobState::kPending || r.held) return;
    if (r.spec.array_max_running > 0 && r.spec.array_job_id != 0) {
      int& running = array_running[r.spec.array_job_id];
      if (running >= r.spec.array_max_running) return;
      ++running;  // the limit counts the tasks offered to the scheduler too
    }
    sched::Job j = ToSchedJob(s, r);
    if (j.partition < 0) return;  // its partition left the config: it waits
    if (!r.req.dependencies.empty()) {
      sched::DependencyVerdict v = sched::EvaluateDependencies(
          r.req.dependencies, [&](sched::JobId d) { return OutcomeOf(image, d); });
      j.deps = v.state;
      j.deps_job = v.job;
    }
    if (singleton_wait != 0 && j.deps == sched::DependencyState::kNone) {
      j.deps = sched::DependencyState::kWaiting;  // -d singleton
      j.deps_job = singleton_wait;
    }
    s.pending.push_back(std::move(j));
  });
  return s;
}

}  // namespace hachi::server
