// What each link of a node should deliver, as NVML reports it: every GPU's PCIe link
// (generation and width, now and at most) and NVLink generation, with the NVLink count of
// every GPU pair from the node's topology. `hachi commtest` (diag/commtest.h) compares
// its measurements with the bandwidths these imply; `hachi doctor` (diag/doctor.h) checks
// the links themselves (a downtrained PCIe link, an NVLink down).
//
// Plain values; ProbeLinkFacts is thread-compatible (it calls NVML, which is
// thread-safe).
#pragma once

#include <vector>

#include "core/status.h"
#include "topo/nvml_library.h"
#include "topo/topology.h"

namespace hachi::diag {

struct PcieLinkFacts {
  int gen = 0;        // PCIe generation now (1-6); 0 when NVML does not say
  int width = 0;      // lanes now (1, 2, 4, 8, 16); 0 when unknown
  int max_gen = 0;    // what the GPU and its slot can train to; 0 when unknown
  int max_width = 0;  // likewise
};

struct GpuLinkFacts {
  int index = 0;
  PcieLinkFacts pcie;
  int nvlink_version =
      0;               // NVLink generation of its active links (1-5); 0: none or unknown
  int nvlinks_up = 0;  // links NVML reports active
};

struct LinkFacts {
  std::vector<GpuLinkFacts> gpus;  // by GPU index
  topo::Topology topology;         // NV<n> count and PCIe relation of every pair
};

// Unidirectional bandwidth, in GB/s (10^9 bytes/s), that one NVLink of generation
// `version` carries (NVLink 1: 20, 2-4: 25, 5: 50), 0 for an unknown generation.
double NvLinkGbps(int version);
// Unidirectional bandwidth, in GB/s, of a PCIe link after line coding: gen 1-2 8b/10b,
// gen 3-5 128b/130b, gen 6 FLIT (taken as 242/256). 0 when gen or width is 0.
double PcieGbps(int gen, int width);

// Reads the facts from a loaded NVML (nvmlInit_v2 done by the caller) for `topology`'s
// GPUs (as topo::ProbeNvml read it). Facts NVML does not give are left 0.
Result<LinkFacts> ProbeLinkFacts(const topo::NvmlApi& nvml,
                                 const topo::Topology& topology);

}  // namespace hachi::diag
