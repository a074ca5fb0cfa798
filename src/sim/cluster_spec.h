// Simulated clusters for `hachi sim`, from a short spec (docs/sim.md, "Cluster specs"):
//   "96x8:hgx-h100,32x8:pcie-8x-l40s"   count x GPUs : built-in preset, comma-separated
//   "philly"                            the Philly machine list (231 x 8 + 321 x 2 GPUs)
// Nodes are named n0001, n0002, ... in spec order, grouped into network blocks of 16
// ("b01", ...; each spec item starts a new block), all up and idle, in one shared-mode
// partition "default". Nodes of one layout share one compiled alloc::NodeModel.
// Pure functions apart from reading the Philly machine list; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "sched/cluster.h"

namespace hachi::sim {

inline constexpr std::string_view kDefaultClusterSpec = "96x8:hgx-h100";
inline constexpr int kNodesPerBlock = 16;
inline constexpr int kMaxClusterNodes = 100000;

struct ClusterOptions {
  // Where `traces/philly-atc19/cluster_machine_list.csv` lives; empty:
  // DefaultSharedDir().
  std::string shared_dir;
  // The Philly machine list itself, when set (tests); overrides shared_dir.
  std::string philly_machine_list;
  // Its text, when set (fuzz_trace); overrides both. Named "philly" in messages.
  std::string philly_machine_list_text;
};

// $HACHI_SHARED_DIR, else <source tree>/../shared.
std::string DefaultSharedDir();

// Errors (kInvalidArgument / kNotFound) name the spec item: a malformed item, a GPU count
// that is not the preset's ("96x4:hgx-h100": the preset has 8), an unknown preset (with
// the known ones), more than kMaxClusterNodes nodes in all, a missing or malformed
// machine list.
Result<sched::ClusterState> BuildCluster(std::string_view spec,
                                         const ClusterOptions& options = {});

// Total GPUs of the cluster's nodes.
int TotalGpus(const sched::ClusterState& state);

}  // namespace hachi::sim
