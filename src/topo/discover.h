// Finds the local node's GPU topology: NVML first, then the `nvidia-smi` command, else
// a clear "unavailable" that points at presets and topology files (docs/nvml.md).
// Runs a child process in the nvidia-smi path; safe to call from one thread at a time.
#pragma once

#include <string>

#include "core/status.h"
#include "topo/nvml_probe.h"
#include "topo/topology.h"

namespace hachi::topo {

struct DiscoverOptions {
  bool use_nvml = true;
  NvmlProbeOptions nvml;
  bool use_nvidia_smi = true;
  // The command to run. Empty: $HACHI_NVIDIA_SMI, else "nvidia-smi" from PATH.
  std::string nvidia_smi;
  // Each nvidia-smi run is killed after this long (a GPU in a bad state can hang it).
  int command_timeout_ms = 30000;
};

// The nvidia-smi command that DiscoverLocalTopology would run for `opts`.
std::string NvidiaSmiPath(const DiscoverOptions& opts);

// The topology from the first source that works. Its source() says which:
// "NVML (libnvidia-ml.so.1)" or "nvidia-smi (<path>)"; when NVML failed and nvidia-smi
// worked, NVML's error is kept as an info finding. kUnavailable when neither works,
// with both reasons.
Result<Topology> DiscoverLocalTopology(const DiscoverOptions& opts = {});

// Just the nvidia-smi path: `nvidia-smi topo -m` for the links, then `--query-gpu` for
// names, UUIDs, memory and bus ids (a failure there is a finding, not an error).
Result<Topology> ReadNvidiaSmi(const DiscoverOptions& opts);

}  // namespace hachi::topo
