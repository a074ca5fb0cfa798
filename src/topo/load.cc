#include "topo/load.h"

#include "core/strings.h"
#include "topo/discover.h"
#include "topo/nvidia_smi.h"
#include "topo/presets.h"
#include "topo/topology_file.h"

namespace hachi::topo {

std::string_view FileKindName(FileKind k) {
  switch (k) {
    case FileKind::kTopologyJson:
      return "Hachi topology JSON";
    case FileKind::kTopoMatrix:
      return "nvidia-smi topo -m";
    case FileKind::kGpuList:
      return "nvidia-smi -L";
    case FileKind::kQueryGpuCsv:
      return "nvidia-smi --query-gpu CSV";
  }
  return "?";
}

FileKind SniffFileKind(std::string_view text) {
  std::string_view t = Trim(text);
  if (!t.empty() && t.front() == '{') return FileKind::kTopologyJson;
  for (std::string_view line : SplitLines(t)) {
    std::string_view s = Trim(line);
    if (s.empty()) continue;
    if (StartsWith(s, "GPU ") && s.find("(UUID:") != std::string_view::npos) {
      return FileKind::kGpuList;
    }
    // CSV: commas, no tabs, and a first field that is an index or a field name.
    if (s.find(',') != std::string_view::npos && s.find('\t') == std::string_view::npos) {
      std::string_view first = Trim(Split(s, ',')[0]);
      if (ParseInt(first) || first == "index" || first == "uuid" || first == "name" ||
          StartsWith(first, "GPU-")) {
        return FileKind::kQueryGpuCsv;
      }
    }
    break;
  }
  return FileKind::kTopoMatrix;
}

Result<Topology> LoadTopologyTexts(
    const std::vector<std::pair<std::string, std::string>>& texts) {
  // The matrix or JSON gives the GPUs and links; lists add names, UUIDs, memory.
  Topology out;
  bool have_base = false;
  std::vector<std::pair<const std::pair<std::string, std::string>*, FileKind>> lists;
  for (const auto& entry : texts) {
    FileKind kind = SniffFileKind(entry.second);
    if (kind == FileKind::kGpuList || kind == FileKind::kQueryGpuCsv) {
      lists.push_back({&entry, kind});
      continue;
    }
    if (have_base) {
      return InvalidArgument(entry.first + ": a second topology (" +
                             std::string(FileKindName(kind)) +
                             "); give one matrix or JSON file per node");
    }
    Result<Topology> t = kind == FileKind::kTopologyJson
                             ? ParseTopologyJson(entry.second, entry.first)
                             : ParseTopoMatrix(entry.second, entry.first);
    if (!t.ok()) return t.status();
    out = std::move(*t);
    have_base = true;
  }
  std::string sources = out.source();
  for (const auto& [entry, kind] : lists) {
    if (kind == FileKind::kGpuList) {
      Result<std::vector<ListedGpu>> l = ParseGpuList(entry->second, entry->first);
      if (!l.ok()) return l.status();
      MergeGpuList(out, *l, entry->first);
    } else {
      Result<std::vector<QueriedGpu>> q = ParseQueryGpuCsv(entry->second, entry->first);
      if (!q.ok()) return q.status();
      MergeQueriedGpus(out, *q, entry->first);
    }
    sources += (sources.empty() ? "" : " + ") + std::string(FileKindName(kind)) + " (" +
               entry->first + ")";
  }
  out.set_source(sources);
  return out;
}

Result<Topology> LoadTopology(const LoadOptions& opts) {
  if (!opts.files.empty() && !opts.preset.empty()) {
    return InvalidArgument("give --file or --preset, not both");
  }
  if (!opts.preset.empty()) return LoadPreset(opts.preset);
  if (opts.files.empty()) return DiscoverLocalTopology(DiscoverOptions{});
  std::vector<std::pair<std::string, std::string>> texts;
  for (const std::string& path : opts.files) {
    std::string err;
    std::optional<std::string> text = ReadFile(path, &err);
    if (!text) return NotFound(err);
    texts.emplace_back(path, std::move(*text));
  }
  return LoadTopologyTexts(texts);
}

}  // namespace hachi::topo
