// Derived facts about one node's topology and the checks that flag anomalies.
// Pure functions of a Topology; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/gpu_set.h"
#include "topo/topology.h"

namespace hachi::topo {

// How the GPUs of a node talk to each other (DESIGN.md §4.3: classes never mix).
enum class InterconnectClass : uint8_t {
  kUnknown = 0,
  kPcieOnly,     // no NVLink at all
  kNvLinkPairs,  // NVLink bridges joining GPUs in pairs (or small cliques), PCIe
                 // otherwise
  kNvLinkMesh,   // NVLink to some peers, not all (e.g. DGX-1 hybrid cube-mesh)
  kNvSwitch,     // every pair NVLinked with the same link count (NVSwitch all-to-all)
};
std::string_view InterconnectClassName(InterconnectClass c);  // "nvswitch", ...
// True when the class has NVLink (the two sides of the "never mix" rule).
bool IsNvLinkClass(InterconnectClass c);

struct TopologyFacts {
  InterconnectClass interconnect = InterconnectClass::kUnknown;
  std::vector<GpuSet>
      numa_groups;            // GPUs by NUMA node, ordered by node id; unknown apart
  std::vector<int> numa_ids;  // the NUMA node of each group (-1: unknown)
  std::vector<GpuSet> pcie_groups;    // GPUs under one PCIe switch (PIX/PXB-connected)
  std::vector<GpuSet> nvlink_groups;  // connected components of the NVLink graph (size>1)
  std::string fingerprint;            // 16 hex digits; same layout -> same value
};

TopologyFacts Analyze(const Topology& t);

// A hash of the layout: GPU count, models and memory, NUMA nodes, every link as
// `nvidia-smi topo -m` labels it. UUIDs, bus ids and the source are left out, so two
// identical servers share a fingerprint (when read with the same detail).
std::string Fingerprint(const Topology& t);

struct CheckOptions {
  int expected_gpus = 0;  // 0: no expectation
};

// Every finding for the node: those met while reading plus the anomaly checks (PCIe
// GPU among NVLinked peers, degraded links, asymmetric matrix, GPU count, ...), most
// severe first.
std::vector<Finding> CheckTopology(const Topology& t, const CheckOptions& opts = {});

// The worst severity in `findings` (kInfo when empty).
Severity WorstSeverity(const std::vector<Finding>& findings);

}  // namespace hachi::topo
