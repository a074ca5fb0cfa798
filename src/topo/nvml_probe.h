// Reads the local node's GPU topology from NVML (libnvidia-ml.so.1), loaded at run time
// with dlopen so that Hachi builds and runs on machines without the NVIDIA driver.
// What is read and how links are counted: docs/nvml.md.
//
// The library is loaded once per process (nvml_library.h); ProbeNvml initialises NVML
// for the probe and shuts it down after. Safe to call from one thread at a time per
// process (NVML's init/shutdown are reference counted by the library, but the probe is
// not meant to race itself).
#pragma once

#include <string>

#include "core/status.h"
#include "topo/nvml_library.h"
#include "topo/topology.h"

namespace hachi::topo {

struct NvmlProbeOptions {
  // A file name (searched by the dynamic loader) or a path. Empty: the environment
  // variable HACHI_NVML_LIBRARY, else kNvmlLibrary (ResolveNvmlLibrary).
  std::string library;
  // Where /sys lives, for the PCI devices' numa_node files (tests point it elsewhere).
  std::string sysfs_root = "/sys";
};

// The library that ProbeNvml would load for `opts`.
std::string NvmlLibraryPath(const NvmlProbeOptions& opts);

// The GPUs, their PCIe relations and NVLink counts as NVML sees them. kUnavailable when
// the library cannot be loaded, lacks a required symbol, fails to initialise, or sees
// no GPU. Optional symbols or queries that fail leave the field unknown and add a
// read finding. Source: "NVML (<library>)".
Result<Topology> ProbeNvml(const NvmlProbeOptions& opts = {});

}  // namespace hachi::topo
