// Built-in topologies of well-known 8-GPU (and 16-GPU) servers, for simulated nodes,
// demos and tests. Each preset is written as a topology file (JSON, see
// docs/topology-format.md) compiled into the binary, with its facts and sources in the
// file's "notes". Thread-safe (read-only data).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "topo/topology.h"
#include "topo/topology_file.h"

namespace hachi::topo {

struct PresetInfo {
  std::string name;         // "hgx-h100"
  std::string description;  // one line: "8x H100 SXM5 80GB, NVSwitch NV18, 2 NUMA nodes"
};

// Every preset, sorted by name.
std::vector<PresetInfo> ListPresets();
// The presets' names, sorted, without parsing them: what --help lists. ListPresets parses
// every preset (milliseconds), which a command's start must not pay.
std::vector<std::string> PresetNames();
// The same joined with ", ".
std::string PresetNameList();
// The named preset; kNotFound names the known presets when `name` is not one.
// The topology's source is "preset <name>".
Result<Topology> LoadPreset(std::string_view name);
// The same with the file's name, description and notes (facts and their sources).
Result<TopologyFile> LoadPresetFile(std::string_view name);

}  // namespace hachi::topo
