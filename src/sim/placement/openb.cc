#include "sim/placement/openb.h"

#include <cstdlib>
#include <map>

#include "core/strings.h"

namespace hachi::placement {
namespace {

std::string Where(const std::string& file, size_t line) {
  return file + ":" + std::to_string(line) + ": ";
}

// The header's column indices by name; missing required ones are an error.
Result<std::map<std::string, size_t>> Header(std::string_view line,
                                             const std::string& file,
                                             const std::vector<std::string>& required) {
  std::map<std::string, size_t> cols;
  const auto fields = Split(line, ',');
  for (size_t i = 0; i < fields.size(); ++i) cols[std::string(Trim(fields[i]))] = i;
  for (const auto& r : required) {
    if (!cols.count(r)) return InvalidArgument(Where(file, 1) + "no column '" + r + "'");
  }
  return cols;
}

Result<int64_t> Field(const std::vector<std::string_view>& fields, size_t col,
                      const std::string& name, const std::string& where, int64_t min,
                      int64_t max) {
  if (col >= fields.size()) return InvalidArgument(where + name + ": missing");
  const auto v = ParseInt(Trim(fields[col]));
  if (!v || *v < min || *v > max) {
    return InvalidArgument(where + name + ": '" + std::string(fields[col]) +
                           "' is not an integer in [" + std::to_string(min) + ", " +
                           std::to_string(max) + "]");
  }
  return static_cast<int64_t>(*v);
}

#define HACHI_ASSIGN_FIELD(lhs, expr) \
  do {                                \
    auto r_ = (expr);                 \
    if (!r_.ok()) return r_.status(); \
    lhs = *r_;                        \
  } while (0)

Result<std::string> Read(const std::string& path) {
  std::string error;
  auto text = ReadFile(path, &error);
  if (!text) return NotFound(path + ": " + error);
  return *text;
}

}  // namespace

int64_t Cluster::total_gpu_milli() const {
  int64_t total = 0;
  for (const auto& n : nodes) total += int64_t{n.gpus} * kMilliPerGpu;
  return total;
}

Result<Cluster> ParseNodes(const std::string& text, const std::string& file) {
  const auto lines = SplitLines(text);
  if (lines.empty()) return InvalidArgument(file + ": empty");
  auto cols = Header(lines[0], file, {"sn", "cpu_milli", "memory_mib", "gpu", "model"});
  if (!cols.ok()) return cols.status();
  Cluster cluster;
  std::map<std::string, int> model_ids;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (Trim(lines[i]).empty()) continue;
    const std::string where = Where(file, i + 1);
    const auto f = Split(lines[i], ',');
    OpenbNode n;
    // By the header's column, which need not be the first; a short row has none.
    const size_t sn_col = (*cols)["sn"];
    if (sn_col >= f.size()) return InvalidArgument(where + "sn: missing");
    n.sn = std::string(Trim(f[sn_col]));
    HACHI_ASSIGN_FIELD(n.cpu_milli, Field(f, (*cols)["cpu_milli"], "cpu_milli", where, 0,
                                          int64_t{1} << 40));
    HACHI_ASSIGN_FIELD(n.memory_mib, Field(f, (*cols)["memory_mib"], "memory_mib", where,
                                           0, int64_t{1} << 40));
    HACHI_ASSIGN_FIELD(n.gpus,
                       Field(f, (*cols)["gpu"], "gpu", where, 0, kMaxGpusPerNode));
    if ((*cols)["model"] >= f.size()) return InvalidArgument(where + "model: missing");
    const std::string model(Trim(f[(*cols)["model"]]));
    if (n.gpus == 0) return InvalidArgument(where + "gpu: a GPU node needs GPUs");
    auto [it, added] = model_ids.emplace(model, static_cast<int>(cluster.models.size()));
    if (added) {
      if (cluster.models.size() == 31)
        return InvalidArgument(where + "model: over 31 models");
      cluster.models.push_back(model);
    }
    n.model = it->second;
    cluster.nodes.push_back(std::move(n));
  }
  if (cluster.nodes.empty()) return InvalidArgument(file + ": no nodes");
  return cluster;
}

Result<std::vector<OpenbPod>> ParsePods(const std::string& text, const std::string& file,
                                        const Cluster& cluster) {
  const auto lines = SplitLines(text);
  if (lines.empty()) return InvalidArgument(file + ": empty");
  auto cols =
      Header(lines[0], file, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"});
  if (!cols.ok()) return cols.status();
  const bool has_spec = cols->count("gpu_spec") > 0;
  std::vector<OpenbPod> pods;
  for (size_t i = 1; i < lines.size(); ++i) {
    if (Trim(lines[i]).empty()) continue;
    const std::string where = Where(file, i + 1);
    const auto f = Split(lines[i], ',');
    OpenbPod p;
    const size_t name_col =
        (*cols)["name"];  // a short row has none (fuzz_trace found it)
    if (name_col >= f.size()) return InvalidArgument(where + "name: missing");
    p.name = std::string(Trim(f[name_col]));
    HACHI_ASSIGN_FIELD(p.cpu_milli, Field(f, (*cols)["cpu_milli"], "cpu_milli", where, 0,
                                          int64_t{1} << 40));
    HACHI_ASSIGN_FIELD(p.memory_mib, Field(f, (*cols)["memory_mib"], "memory_mib", where,
                                           0, int64_t{1} << 40));
    HACHI_ASSIGN_FIELD(
        p.num_gpu, Field(f, (*cols)["num_gpu"], "num_gpu", where, 0, kMaxGpusPerNode));
    HACHI_ASSIGN_FIELD(
        p.gpu_milli, Field(f, (*cols)["gpu_milli"], "gpu_milli", where, 0, kMilliPerGpu));
    if (p.num_gpu > 1 && p.gpu_milli < kMilliPerGpu) {
      return InvalidArgument(where + "gpu_milli: a multi-GPU pod must take whole GPUs");
    }
    if (p.num_gpu > 0 && p.gpu_milli == 0) {
      return InvalidArgument(where + "gpu_milli: 0 with num_gpu > 0");
    }
    if (p.num_gpu == 0) p.gpu_milli = 0;
    if (has_spec && (*cols)["gpu_spec"] < f.size()) {
      p.gpu_spec = std::string(Trim(f[(*cols)["gpu_spec"]]));
      for (auto m : Split(p.gpu_spec, '|')) {
        for (size_t k = 0; k < cluster.models.size(); ++k) {
          if (cluster.models[k] == Trim(m)) p.spec_mask |= uint32_t{1} << k;
        }
      }
      // A spec naming only models absent here can never be met: keep it unmeetable.
      if (!p.gpu_spec.empty() && p.spec_mask == 0) p.spec_mask = uint32_t{1} << 31;
    }
    pods.push_back(std::move(p));
  }
  if (pods.empty()) return InvalidArgument(file + ": no pods");
  return pods;
}

std::string OpenbDir() {
  const char* env = std::getenv("HACHI_SHARED_DIR");
  const std::string shared =
      env && *env ? env : std::string(HACHI_SOURCE_DIR) + "/../shared";
  return shared + "/traces/alibaba-openb-gpu-v2023";
}

Result<Cluster> LoadNodes(const std::string& path) {
  auto text = Read(path);
  if (!text.ok()) return text.status();
  return ParseNodes(*text, path);
}

Result<std::vector<OpenbPod>> LoadPods(const std::string& path, const Cluster& cluster) {
  auto text = Read(path);
  if (!text.ok()) return text.status();
  return ParsePods(*text, path, cluster);
}

}  // namespace hachi::placement
