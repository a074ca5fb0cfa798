// From the server's records to the scheduler's input (DESIGN.md §3): the StateImage
// (jobs, nodes as stored) plus each node's compiled topology and the policy config
// become a sched::ClusterState. The node/partition part (the "base") changes only when
// an agent registers or the config changes, so it is built once and copied per cycle;
// occupancy and jobs are filled in from the records every cycle.
//
// Thread-compatible values and pure functions; the Controller calls them under its lock.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "alloc/node_model.h"
#include "config/cluster_config.h"
#include "core/status.h"
#include "sched/cluster.h"
#include "sched/power.h"
#include "state/records.h"
#include "topo/analysis.h"
#include "topo/topology.h"

namespace hachi::server {

// What the server derives from a node's registered topology, once per registration.
struct NodeHardware {
  std::shared_ptr<const alloc::NodeModel> model;
  topo::InterconnectClass interconnect = topo::InterconnectClass::kUnknown;
  std::string gpu_model;
  int64_t gpu_memory_mib = 0;
  // The GPUs in MIG mode and their devices (all free), from the topology.
  GpuSet mig_gpus;
  std::vector<sched::MigSlot> mig;
  // Per device (same order): its GPU instance and compute instance ids, for launches.
  std::vector<std::pair<int, int>> mig_ids;
};
// Parses NodeRecord::topology_json and compiles it (kInvalidArgument naming the node).
Result<NodeHardware> CompileNodeHardware(const state::NodeRecord& node);

// Nodes and partitions, without jobs: rebuilt when nodes or the config change.
struct BaseCluster {
  sched::ClusterState state;  // nodes (all GPUs free) and partitions, QoS, limits, ...
  std::unordered_map<std::string, int> node_index;
  // The config's pools (its order), their nodes as indices into state.nodes; empty
  // without a config. A burst pool's nodes that have not registered are in state.nodes
  // with their pool's shape (config::PoolConfig::preset), down.
  std::vector<sched::PowerPool> pools;
  std::vector<std::string> warnings;  // nodes skipped (bad topology), lint findings
};

// Nodes in name order. Without a config (or one without partitions): one partition
// "default" with every node, shared mode, default limit 1h, maximum 30d. A node whose
// hardware failed to compile is left out and named in `warnings`. kInvalidArgument when
// the config names nodes that do not exist — the caller keeps the previous base.
Result<BaseCluster> BuildBase(
    const state::StateImage& image,
    const std::unordered_map<std::string, NodeHardware>& hardware,
    const config::ClusterConfig* config);

// A job record as the scheduler sees it (its partition as `s`'s index).
sched::Job ToSchedJob(const sched::ClusterState& s, const state::JobRecord& r);

// The base plus occupancy and jobs from `image`: running jobs' allocations taken off
// their nodes (sched::PlanApplier::Take), pending jobs with their partition index and
// dependency verdicts. Node states come from the records (up/drained/down) and
// `unhealthy` GPUs are never free. Array tasks past their array's running limit are left
// out (they wait). `active`, when given, holds the ids of the image's pending and running
// jobs (the Controller keeps it): only those are visited, not every finished job the
// image holds.
sched::ClusterState BuildSnapshot(const BaseCluster& base, const state::StateImage& image,
                                  const std::set<state::JobId>* active = nullptr);

// What the plan applier needs to re-check a plan's starts against the records as they
// are now, and no more (a cycle that starts nothing builds nothing; one that starts a
// job on two nodes books the running jobs of those two): the base's nodes with their
// states from the records, the running jobs' allocations booked on the nodes `touched`
// marks (indexed as the base's nodes) — the other nodes are left with nothing booked,
// so ask it only about touched nodes — and neither running nor pending jobs listed.
sched::ClusterState BuildNodeSnapshot(const BaseCluster& base,
                                      const state::StateImage& image,
                                      const std::set<state::JobId>& active,
                                      const std::vector<bool>& touched);

// The recent workload, for fragmentation-aware placement (sched/fragmentation.h, FGD):
// the size classes of the last `last_n` jobs submitted (GPUs per node or GPU share,
// CPUs, memory, GPU model), weighted by how often each occurs. Empty without jobs.
std::vector<sched::WorkloadClass> RecentWorkload(const state::StateImage& image,
                                                 size_t last_n = 1000);

}  // namespace hachi::server
