// ApplyClusterConfig: resolves the config's node names against the cluster and installs
// the policy. Everything is computed into locals first and committed at the end, so an
// error leaves the state as it was.
#include <map>
#include <set>

#include "config/cluster_config.h"

namespace hachi::config {
namespace {

using NodeIndex = std::unordered_map<std::string_view, int>;

std::string Quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

// "n0001 .. n0096" or "n0001, n0002": what the cluster has, for messages.
std::string Describe(const sched::ClusterState& s) {
  if (s.nodes.empty()) return "the cluster has no nodes";
  if (s.nodes.size() <= 3) {
    std::string out = "the cluster has ";
    for (size_t i = 0; i < s.nodes.size(); ++i) {
      out += (i > 0 ? ", " : "") + s.nodes[i].name;
    }
    return out;
  }
  return "the cluster has " + std::to_string(s.nodes.size()) + " nodes, " +
         s.nodes.front().name + " .. " + s.nodes.back().name;
}

Result<std::vector<int>> Resolve(const NodeSelector& sel, const NodeIndex& index,
                                 const sched::ClusterState& s) {
  std::vector<int> out;
  if (sel.all) {
    out.reserve(s.nodes.size());
    for (size_t i = 0; i < s.nodes.size(); ++i) out.push_back(static_cast<int>(i));
    return out;
  }
  out.reserve(sel.names.size());
  for (const std::string& name : sel.names) {
    auto it = index.find(name);
    if (it == index.end()) {
      return InvalidArgument(sel.where + ": no node " + Quoted(name) + " (" +
                             Describe(s) + ")");
    }
    out.push_back(it->second);
  }
  return out;
}

}  // namespace

Status ApplyClusterConfig(const ClusterConfig& config, sched::ClusterState* state,
                          bool allow_empty_partitions) {
  const sched::ClusterState& s = *state;
  NodeIndex index;
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    index.emplace(s.nodes[i].name, static_cast<int>(i));
  }

  // Partitions and their node lists.
  std::vector<sched::Partition> partitions;
  std::vector<std::vector<int>> node_partitions(s.nodes.size());
  std::map<int, const PartitionConfig*> window_owner;  // node -> partition owning it
  for (const PartitionConfig& pc : config.partitions) {
    sched::Partition p = pc.partition;
    Result<std::vector<int>> nodes = Resolve(pc.nodes, index, s);
    if (!nodes.ok()) return nodes.status();
    p.nodes = std::move(*nodes);
    if (p.nodes.empty() && !allow_empty_partitions) {
      return InvalidArgument(pc.nodes.where + ": no nodes (" + Describe(s) + ")");
    }
    if (!p.windows.empty()) {
      if (pc.has_window_nodes) {
        Result<std::vector<int>> wn = Resolve(pc.window_nodes, index, s);
        if (!wn.ok()) return wn.status();
        const std::set<int> mine(p.nodes.begin(), p.nodes.end());
        for (int n : *wn) {
          if (mine.count(n) == 0) {
            return InvalidArgument(pc.window_nodes.where + ": node " + s.nodes[n].name +
                                   " is not in partition " + p.name);
          }
        }
        p.window_nodes = std::move(*wn);
      } else {
        p.window_nodes = p.nodes;
      }
      for (int n : p.window_nodes) {
        auto [it, fresh] = window_owner.emplace(n, &pc);
        if (!fresh) {
          return InvalidArgument(pc.where + ": window: node " + s.nodes[n].name +
                                 " is already owned by the window of partition " +
                                 it->second->partition.name +
                                 " (a node is in one partition's windows at most)");
        }
      }
    }
    for (int n : p.nodes) {
      node_partitions[n].push_back(static_cast<int>(partitions.size()));
    }
    partitions.push_back(std::move(p));
  }
  const bool new_partitions = !config.partitions.empty();
  const std::vector<sched::Partition>& final_partitions =
      new_partitions ? partitions : s.partitions;

  // Jobs already in the state keep their partitions, by name.
  auto remap = [&](std::vector<sched::Job>& jobs, bool commit) -> Status {
    for (sched::Job& j : jobs) {
      if (j.partition < 0 || !new_partitions) continue;
      const std::string& name = s.partitions[j.partition].name;
      int to = -1;
      for (size_t i = 0; i < final_partitions.size(); ++i) {
        if (final_partitions[i].name == name) to = static_cast<int>(i);
      }
      if (to < 0) {
        return InvalidArgument(config.origin + ": partition " + name + " has job " +
                               std::to_string(j.id) + "; the config must keep it");
      }
      if (commit) j.partition = to;
    }
    return Status::Ok();
  };
  HACHI_RETURN_IF_ERROR(remap(state->pending, false));
  HACHI_RETURN_IF_ERROR(remap(state->running, false));

  // Node overrides: a node set by two entries is ambiguous (TOML tables are unordered).
  std::map<int, const NodeOverride*> overridden;
  for (const NodeOverride& o : config.node_overrides) {
    Result<std::vector<int>> nodes = Resolve(o.nodes, index, s);
    if (!nodes.ok()) return nodes.status();
    for (int n : *nodes) {
      auto [it, fresh] = overridden.emplace(n, &o);
      if (!fresh) {
        return InvalidArgument(o.nodes.where + ": node " + s.nodes[n].name +
                               " is also set at " + it->second->nodes.where);
      }
    }
  }

  // Commit: nothing below fails.
  (void)remap(state->pending, true);
  (void)remap(state->running, true);
  if (new_partitions) {
    state->partitions = std::move(partitions);
    for (size_t i = 0; i < state->nodes.size(); ++i) {
      state->nodes[i].partitions = std::move(node_partitions[i]);
    }
  }
  for (const auto& [n, o] : overridden) {
    if (!o->block.empty()) state->nodes[n].block = o->block;
    if (!o->features.empty()) state->nodes[n].features = o->features;
    if (!o->gres_type.empty()) state->nodes[n].gres_type = o->gres_type;
  }
  state->qos = config.qos;
  state->limits = config.limits;
  state->fairshare.shares = config.shares;
  state->weights = config.weights;
  return Status::Ok();
}

Result<std::vector<sched::PowerPool>> PowerPools(const ClusterConfig& config,
                                                 const sched::ClusterState& state) {
  NodeIndex index;
  for (size_t i = 0; i < state.nodes.size(); ++i) {
    index.emplace(state.nodes[i].name, static_cast<int>(i));
  }
  std::vector<sched::PowerPool> out;
  for (const PoolConfig& p : config.pools) {
    sched::PowerPool pool;
    pool.name = p.name;
    pool.burst = p.kind == PoolKind::kBurst;
    Result<std::vector<int>> nodes = Resolve(p.nodes, index, state);
    if (!nodes.ok()) return nodes.status();
    pool.nodes = std::move(*nodes);
    pool.suspend_after = p.suspend_after;
    pool.resume_timeout = p.resume_timeout;
    pool.max_powered = p.max_powered;
    pool.price_per_gpu_hour = p.price_per_gpu_hour;
    out.push_back(std::move(pool));
  }
  return out;
}

}  // namespace hachi::config
