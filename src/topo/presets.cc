#include "topo/presets.h"

#include <algorithm>

#include "topo/presets_embedded.h"

namespace hachi::topo {
namespace {

struct Parsed {
  std::string name;
  Result<TopologyFile> file;
};

// Parsed once, on first use (thread-safe static initialisation). A preset that does not
// parse is a build defect; it is kept as its error so LoadPreset reports it.
const std::vector<Parsed>& AllPresets() {
  static const std::vector<Parsed> all = [] {
    std::vector<Parsed> out;
    for (const internal::EmbeddedPreset& p : internal::EmbeddedPresets()) {
      std::string origin = "preset " + std::string(p.name);
      Result<TopologyFile> f = ParseTopologyFile(p.json, origin);
      if (f.ok()) f->topology.set_source(origin);
      out.push_back({p.name, std::move(f)});
    }
    std::sort(out.begin(), out.end(),
              [](const Parsed& a, const Parsed& b) { return a.name < b.name; });
    return out;
  }();
  return all;
}

}  // namespace

std::vector<PresetInfo> ListPresets() {
  std::vector<PresetInfo> out;
  for (const Parsed& p : AllPresets()) {
    out.push_back(
        {p.name, p.file.ok() ? p.file->description : p.file.status().message()});
  }
  return out;
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> out;
  for (const internal::EmbeddedPreset& p : internal::EmbeddedPresets())
    out.push_back(p.name);
  std::sort(out.begin(), out.end());
  return out;
}

std::string PresetNameList() {
  std::string names;
  for (const std::string& n : PresetNames()) names += (names.empty() ? "" : ", ") + n;
  return names;
}

Result<TopologyFile> LoadPresetFile(std::string_view name) {
  std::string known;
  for (const Parsed& p : AllPresets()) {
    if (p.name == name) return p.file;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  return NotFound("unknown preset '" + std::string(name) + "' (known presets: " + known +
                  ")");
}

Result<Topology> LoadPreset(std::string_view name) {
  Result<TopologyFile> f = LoadPresetFile(name);
  if (!f.ok()) return f.status();
  return std::move(f->topology);
}

}  // namespace hachi::topo
