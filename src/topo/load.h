// Where a command's topology comes from: files (any mix of `nvidia-smi topo -m`, `-L`,
// `--query-gpu` CSV and Hachi topology JSON, told apart by their content), a built-in
// preset, or this machine (NVML, then nvidia-smi). Pure apart from reading the named
// files and, for discovery, the probes in discover.h. Thread-compatible.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "topo/topology.h"

namespace hachi::topo {

enum class FileKind { kTopologyJson, kTopoMatrix, kGpuList, kQueryGpuCsv };
std::string_view FileKindName(FileKind k);
// Tells a file's kind from its text.
FileKind SniffFileKind(std::string_view text);

struct LoadOptions {
  std::vector<std::string> files;  // read and merged in order: a matrix/JSON first
  std::string preset;              // a built-in preset name
};

// Exactly one of files / preset, or neither (then: discover this machine).
Result<Topology> LoadTopology(const LoadOptions& opts);

// Reads already-loaded texts (for tests and the fuzzer): {origin, text} pairs.
Result<Topology> LoadTopologyTexts(
    const std::vector<std::pair<std::string, std::string>>& texts);

}  // namespace hachi::topo
