// Readers for `nvidia-smi -L` and `nvidia-smi --query-gpu=... --format=csv`, and merging
// them into a Topology read from the matrix. See nvidia_smi.h.
#include <algorithm>
#include <map>

#include "core/strings.h"
#include "topo/nvidia_smi.h"

namespace hachi::topo {
namespace {

std::string LineRef(std::string_view origin, size_t line_no) {
  return std::string(origin) + ":" + std::to_string(line_no);
}

// "81920 MiB" / "81920" / "[N/A]" -> MiB, or nullopt for N/A. Errors name the value.
Result<int64_t> ParseMemoryMib(std::string_view v, const std::string& where) {
  v = Trim(v);
  if (v == "[N/A]" || v == "N/A" || v.empty()) return int64_t{0};
  std::string_view num = v;
  int64_t scale = 1;
  if (size_t sp = v.find(' '); sp != std::string_view::npos) {
    num = v.substr(0, sp);
    std::string_view unit = Trim(v.substr(sp + 1));
    if (unit == "GiB") {
      scale = 1024;
    } else if (unit != "MiB") {
      return InvalidArgument(where + ": unknown memory unit '" + std::string(unit) + "'");
    }
  }
  std::optional<long long> n = ParseInt(num);
  if (!n || *n < 0) {
    return InvalidArgument(where + ": '" + std::string(v) +
                           "' is not an amount of memory");
  }
  return static_cast<int64_t>(*n) * scale;
}

std::string CanonicalField(std::string_view f) {
  f = Trim(f);
  if (size_t b = f.find(" ["); b != std::string_view::npos) f = f.substr(0, b);
  std::string s = ToLower(f);
  if (s == "gpu_name") return "name";
  if (s == "gpu_uuid") return "uuid";
  if (s == "gpu_bus_id") return "pci.bus_id";
  return s;
}

// "MIG 3g.40gb     Device  0: (UUID: MIG-…)" (trimmed). Tolerant: a line without a
// UUID still gives its profile.
MigDevice ParseMigLine(std::string_view s) {
  MigDevice m;
  std::string_view rest = Trim(s.substr(4));
  m.profile = std::string(rest.substr(0, rest.find_first_of(" \t")));
  size_t at = rest.rfind("(UUID:");
  if (at == std::string_view::npos) return m;
  std::string_view uuid = Trim(rest.substr(at + 6));
  if (!uuid.empty() && uuid.back() == ')') uuid.remove_suffix(1);
  m.uuid = std::string(Trim(uuid));
  // Before R470: "MIG-GPU-<gpu uuid>/<gi>/<ci>", the ids in the name.
  if (StartsWith(m.uuid, "MIG-GPU-")) {
    std::vector<std::string_view> parts = Split(m.uuid, '/');
    std::optional<long long> gi, ci;
    if (parts.size() == 3) {
      gi = ParseInt(parts[1]);
      ci = ParseInt(parts[2]);
    }
    if (gi && ci && *gi >= 0 && *ci >= 0 && *gi < 1000 && *ci < 1000) {
      m.gpu_instance = static_cast<int>(*gi);
      m.compute_instance = static_cast<int>(*ci);
    }
  }
  return m;
}

GpuSet One(int i) {
  return i >= 0 && i < GpuSet::kMaxGpus ? GpuSet::FromIndices({i}) : GpuSet();
}

}  // namespace

Result<std::vector<ListedGpu>> ParseGpuList(std::string_view text,
                                            std::string_view origin) {
  std::vector<ListedGpu> out;
  std::vector<std::string_view> lines = SplitLines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view raw = lines[i];
    std::string_view s = Trim(raw);
    if (s.empty()) continue;
    std::string where = LineRef(origin, i + 1);
    if (StartsWith(s, "MIG ")) {
      if (out.empty()) {
        return InvalidArgument(where + ": MIG device listed before any GPU");
      }
      out.back().mig_devices.push_back(ParseMigLine(s));
      continue;
    }
    // GPU <index>: <model> (UUID: <uuid>)
    if (!StartsWith(s, "GPU ")) {
      return InvalidArgument(where +
                             ": expected 'GPU <n>: <name> (UUID: GPU-...)', got '" +
                             std::string(s) + "'");
    }
    size_t colon = s.find(':');
    size_t uuid_at = s.rfind("(UUID:");
    if (colon == std::string_view::npos || uuid_at == std::string_view::npos ||
        uuid_at < colon || s.back() != ')') {
      return InvalidArgument(where +
                             ": expected 'GPU <n>: <name> (UUID: GPU-...)', got '" +
                             std::string(s) + "'");
    }
    std::optional<long long> idx = ParseInt(Trim(s.substr(4, colon - 4)));
    if (!idx || *idx < 0 || *idx >= GpuSet::kMaxGpus) {
      return InvalidArgument(where + ": bad GPU index in '" + std::string(s) + "'");
    }
    ListedGpu g;
    g.index = static_cast<int>(*idx);
    g.model = std::string(Trim(s.substr(colon + 1, uuid_at - colon - 1)));
    g.uuid = std::string(Trim(s.substr(uuid_at + 6, s.size() - uuid_at - 7)));
    if (!StartsWith(g.uuid, "GPU-")) {
      return InvalidArgument(where + ": UUID '" + g.uuid + "' does not start with GPU-");
    }
    out.push_back(std::move(g));
  }
  if (out.empty()) return InvalidArgument(std::string(origin) + ": no GPU listed");
  return out;
}

Result<std::vector<QueriedGpu>> ParseQueryGpuCsv(std::string_view text,
                                                 std::string_view origin,
                                                 std::string_view fields) {
  std::vector<std::string_view> lines = SplitLines(text);
  std::vector<std::string> cols;
  size_t first = 0;
  while (first < lines.size() && Trim(lines[first]).empty()) ++first;
  if (first == lines.size()) return InvalidArgument(std::string(origin) + ": empty CSV");
  // A header names fields; data starts with a number (the index) or a UUID.
  std::string_view head0 = Trim(Split(lines[first], ',')[0]);
  bool has_header = !ParseInt(head0).has_value() && !StartsWith(head0, "GPU-");
  for (std::string_view f : Split(has_header ? lines[first] : fields, ',')) {
    cols.push_back(CanonicalField(f));
  }
  if (has_header) ++first;
  std::vector<QueriedGpu> out;
  for (size_t i = first; i < lines.size(); ++i) {
    if (Trim(lines[i]).empty()) continue;
    std::string where = LineRef(origin, i + 1);
    std::vector<std::string_view> vals = Split(lines[i], ',');
    if (vals.size() != cols.size()) {
      return InvalidArgument(where + ": " + std::to_string(vals.size()) + " values for " +
                             std::to_string(cols.size()) + " fields");
    }
    QueriedGpu g;
    for (size_t c = 0; c < cols.size(); ++c) {
      std::string_view v = Trim(vals[c]);
      std::string cell = where + ", field " + cols[c];
      if (cols[c] == "index") {
        std::optional<long long> n = ParseInt(v);
        if (!n || *n < 0 || *n >= GpuSet::kMaxGpus) {
          return InvalidArgument(cell + ": '" + std::string(v) + "' is not a GPU index");
        }
        g.index = static_cast<int>(*n);
      } else if (cols[c] == "uuid") {
        g.uuid = std::string(v);
      } else if (cols[c] == "name") {
        g.model = std::string(v);
      } else if (cols[c] == "pci.bus_id") {
        g.pci_bus_id = std::string(v);
      } else if (cols[c] == "memory.total") {
        Result<int64_t> m = ParseMemoryMib(v, cell);
        if (!m.ok()) return m.status();
        g.memory_mib = *m;
      }
    }
    // Without an index column a row's place is its index, bounded like a written one
    // (a 65th row made GPU 64, past GpuSet: fuzz_nvidia_smi, UBSan).
    if (g.index < 0) {
      if (out.size() >= static_cast<size_t>(GpuSet::kMaxGpus)) {
        return InvalidArgument(where + ": more than " + std::to_string(GpuSet::kMaxGpus) +
                               " GPUs");
      }
      g.index = static_cast<int>(out.size());
    }
    out.push_back(std::move(g));
  }
  if (out.empty()) return InvalidArgument(std::string(origin) + ": no GPU rows");
  return out;
}

namespace {

// Sets `field` from `value`, reporting a conflict with what the topology already holds.
void MergeField(Topology& t, int gpu, std::string& field, const std::string& value,
                std::string_view what, std::string_view origin) {
  if (value.empty()) return;
  if (!field.empty() && field != value) {
    t.AddReadFinding({Severity::kWarning, "source-conflict", One(gpu),
                      std::string(origin) + ": GPU" + std::to_string(gpu) + " " +
                          std::string(what) + " '" + value + "' differs from '" + field +
                          "' read earlier; keeping the earlier one"});
    return;
  }
  field = value;
}

// Grows an empty topology to `n` GPUs (a list read without a matrix); otherwise reports
// a count mismatch.
void ReconcileCount(Topology& t, int n, std::string_view what, std::string_view origin) {
  if (t.gpu_count() == 0) {
    Topology grown(n);
    grown.set_source(t.source());
    for (const Finding& f : t.read_findings()) grown.AddReadFinding(f);
    t = std::move(grown);
    return;
  }
  if (n != t.gpu_count()) {
    t.AddReadFinding({Severity::kError,
                      "gpu-count-mismatch",
                      {},
                      std::string(origin) + ": " + std::string(what) + " lists " +
                          std::to_string(n) + " GPUs but the topology matrix has " +
                          std::to_string(t.gpu_count()) +
                          "; a GPU may have fallen off the bus or be hidden"});
  }
}

}  // namespace

void MergeGpuList(Topology& t, const std::vector<ListedGpu>& gpus,
                  std::string_view origin) {
  int n = 0;
  for (const ListedGpu& g : gpus) n = std::max(n, g.index + 1);
  ReconcileCount(t, n, "`nvidia-smi -L`", origin);
  for (const ListedGpu& g : gpus) {
    if (g.index >= t.gpu_count()) continue;
    Gpu& dst = t.mutable_gpu(g.index);
    MergeField(t, g.index, dst.model, g.model, "name", origin);
    MergeField(t, g.index, dst.uuid, g.uuid, "UUID", origin);
    if (!g.mig_devices.empty()) {
      dst.mig_enabled = true;
      dst.mig_devices = g.mig_devices;
      t.AddReadFinding({Severity::kInfo, "mig-enabled", One(g.index),
                        std::string(origin) + ": GPU" + std::to_string(g.index) +
                            " is split into " + std::to_string(g.mig_devices.size()) +
                            " MIG instances (" + MigLayoutText(g.mig_devices) + ")"});
    }
  }
}

void MergeQueriedGpus(Topology& t, const std::vector<QueriedGpu>& gpus,
                      std::string_view origin) {
  int n = 0;
  for (const QueriedGpu& g : gpus) n = std::max(n, g.index + 1);
  ReconcileCount(t, n, "`nvidia-smi --query-gpu`", origin);
  for (const QueriedGpu& g : gpus) {
    if (g.index >= t.gpu_count()) continue;
    Gpu& dst = t.mutable_gpu(g.index);
    MergeField(t, g.index, dst.model, g.model, "name", origin);
    MergeField(t, g.index, dst.uuid, g.uuid, "UUID", origin);
    MergeField(t, g.index, dst.pci_bus_id, g.pci_bus_id, "PCI bus id", origin);
    if (g.memory_mib > 0) dst.memory_mib = g.memory_mib;
  }
}

}  // namespace hachi::topo
