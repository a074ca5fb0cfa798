#include "topo/topology_file.h"

#include <algorithm>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/cpulist.h"
#include "core/gpu_set.h"
#include "core/strings.h"

namespace hachi::topo {
namespace {

using nlohmann::json;

std::string Key(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}
std::string Idx(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

// Reads one file. Every error goes through Error() so messages share one shape:
// "<origin>: <json path>: <what is wrong>".
class Reader {
 public:
  explicit Reader(std::string_view origin) : origin_(origin) {}

  Status Error(const std::string& path, const std::string& what) const {
    return InvalidArgument(origin_ + ": " + (path.empty() ? "" : path + ": ") + what);
  }

  Status ExpectType(const json& v, const std::string& path, json::value_t type,
                    std::string_view expected) const {
    bool ok = v.type() == type;
    if (type == json::value_t::number_integer) ok = v.is_number_integer();
    if (ok) return Status::Ok();
    return Error(path, "expected " + std::string(expected) + ", got " +
                           std::string(v.type_name()));
  }

  // Unknown keys are refused so that a misspelt key is not silently ignored.
  Status CheckKeys(const json& obj, const std::string& path,
                   std::initializer_list<std::string_view> allowed) const {
    for (const auto& [k, v] : obj.items()) {
      if (std::find(allowed.begin(), allowed.end(), k) != allowed.end()) continue;
      std::string list;
      for (std::string_view a : allowed)
        list += (list.empty() ? "" : ", ") + std::string(a);
      return Error(Key(path, k), "unknown key (expected one of: " + list + ")");
    }
    return Status::Ok();
  }

  // An integer field in [lo, hi]; `fallback` when absent and not required.
  Result<int64_t> Int(const json& obj, const std::string& path, std::string_view key,
                      bool required, int64_t lo, int64_t hi, int64_t fallback = 0) const {
    std::string p = Key(path, key);
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) return Error(p, "missing (expected an integer)");
      return fallback;
    }
    if (!it->is_number_integer()) {
      return Error(p, "expected an integer, got " + std::string(it->type_name()));
    }
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)) {
      return Error(
          p, "out of range (" + std::to_string(lo) + ".." + std::to_string(hi) + ")");
    }
    int64_t v = it->get<int64_t>();
    if (v < lo || v > hi) {
      return Error(p, std::to_string(v) + " is out of range (" + std::to_string(lo) +
                          ".." + std::to_string(hi) + ")");
    }
    return v;
  }

  Result<std::string> String(const json& obj, const std::string& path,
                             std::string_view key, bool required) const {
    std::string p = Key(path, key);
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) return Error(p, "missing (expected a string)");
      return std::string();
    }
    if (!it->is_string()) {
      return Error(p, "expected a string, got " + std::string(it->type_name()));
    }
    return it->get<std::string>();
  }

  // One matrix cell: "X" on the diagonal, "?" for unknown, else an nvidia-smi label.
  Result<Link> Cell(const json& v, const std::string& path, bool diagonal,
                    bool pcie_only) const {
    if (!v.is_string()) {
      return Error(path, "expected a string, got " + std::string(v.type_name()));
    }
    std::string s = v.get<std::string>();
    if (diagonal) {
      if (s != "X") return Error(path, "expected 'X' on the diagonal, got '" + s + "'");
      return Link{};
    }
    if (s == "?") return Link{};
    bool is_self = false;
    Result<Link> l = ParseLinkCell(s, &is_self);
    if (!l.ok()) return Error(path, l.status().message());
    if (is_self) return Error(path, "'X' is only allowed on the diagonal");
    if (pcie_only && l->nvlinks > 0) {
      return Error(path,
                   "'" + s +
                       "' is an NVLink label; pcie_matrix takes PIX, PXB, PHB, NODE, "
                       "SYS or ?");
    }
    return *l;
  }

  // An n x n matrix of cells, row-major.
  Result<std::vector<Link>> Matrix(const json& m, const std::string& path, int n,
                                   bool pcie_only) const {
    HACHI_RETURN_IF_ERROR(ExpectType(m, path, json::value_t::array, "an array of rows"));
    if (static_cast<int>(m.size()) != n) {
      return Error(path, "expected " + std::to_string(n) + " rows (one per GPU), got " +
                             std::to_string(m.size()));
    }
    std::vector<Link> out(static_cast<size_t>(n) * n);
    for (int r = 0; r < n; ++r) {
      const json& row = m[r];
      std::string rp = Idx(path, r);
      HACHI_RETURN_IF_ERROR(
          ExpectType(row, rp, json::value_t::array, "an array of cells"));
      if (static_cast<int>(row.size()) != n) {
        return Error(rp, "expected " + std::to_string(n) + " cells (one per GPU), got " +
                             std::to_string(row.size()));
      }
      for (int c = 0; c < n; ++c) {
        Result<Link> l = Cell(row[c], Idx(rp, c), r == c, pcie_only);
        if (!l.ok()) return l.status();
        out[r * n + c] = *l;
      }
    }
    return out;
  }

  Result<Gpu> ParseGpu(const json& g, const std::string& path, int position) const {
    HACHI_RETURN_IF_ERROR(ExpectType(g, path, json::value_t::object, "an object"));
    HACHI_RETURN_IF_ERROR(
        CheckKeys(g, path,
                  {"index", "model", "memory_mib", "uuid", "pci_bus_id", "numa_node",
                   "cpu_affinity", "mig_enabled", "mig_devices"}));
    Gpu gpu;
    Result<int64_t> index = Int(g, path, "index", true, 0, GpuSet::kMaxGpus - 1);
    if (!index.ok()) return index.status();
    if (*index != position) {
      return Error(Key(path, "index"), "expected " + std::to_string(position) +
                                           " (GPUs are listed in index order, from 0)");
    }
    gpu.index = position;
    Result<std::string> model = String(g, path, "model", true);
    if (!model.ok()) return model.status();
    gpu.model = *model;
    // 16 TiB: far above any GPU, low enough that MiB->bytes cannot overflow.
    Result<int64_t> mem = Int(g, path, "memory_mib", true, 0, int64_t{16} << 20);
    if (!mem.ok()) return mem.status();
    gpu.memory_mib = *mem;
    Result<int64_t> numa = Int(g, path, "numa_node", true, -1, 4095);
    if (!numa.ok()) return numa.status();
    gpu.numa_node = static_cast<int>(*numa);
    Result<std::string> uuid = String(g, path, "uuid", false);
    if (!uuid.ok()) return uuid.status();
    gpu.uuid = *uuid;
    Result<std::string> bus = String(g, path, "pci_bus_id", false);
    if (!bus.ok()) return bus.status();
    gpu.pci_bus_id = *bus;
    Result<std::string> cpus = String(g, path, "cpu_affinity", false);
    if (!cpus.ok()) return cpus.status();
    if (!cpus->empty()) {
      Result<std::vector<int>> parsed = ParseCpuList(*cpus);
      if (!parsed.ok())
        return Error(Key(path, "cpu_affinity"), parsed.status().message());
    }
    gpu.cpu_affinity = *cpus;
    HACHI_RETURN_IF_ERROR(ParseMig(g, path, gpu));
    return gpu;
  }

  // "mig_enabled" (absent: off, as in every file written before MIG was read) and, only
  // when on, "mig_devices".
  Status ParseMig(const json& g, const std::string& path, Gpu& gpu) const {
    if (auto it = g.find("mig_enabled"); it != g.end()) {
      HACHI_RETURN_IF_ERROR(ExpectType(*it, Key(path, "mig_enabled"),
                                       json::value_t::boolean, "true or false"));
      gpu.mig_enabled = it->get<bool>();
    }
    auto devs = g.find("mig_devices");
    if (devs == g.end()) return Status::Ok();
    const std::string dp = Key(path, "mig_devices");
    if (!gpu.mig_enabled) {
      return Error(dp, "given for a GPU without \"mig_enabled\": true");
    }
    HACHI_RETURN_IF_ERROR(ExpectType(*devs, dp, json::value_t::array, "an array"));
    for (size_t k = 0; k < devs->size(); ++k) {
      const json& d = (*devs)[k];
      const std::string p = Idx(dp, k);
      HACHI_RETURN_IF_ERROR(ExpectType(d, p, json::value_t::object, "an object"));
      HACHI_RETURN_IF_ERROR(CheckKeys(
          d, p, {"profile", "uuid", "gpu_instance", "compute_instance", "memory_mib"}));
      MigDevice m;
      Result<std::string> profile = String(d, p, "profile", true);
      if (!profile.ok()) return profile.status();
      m.profile = *profile;
      Result<std::string> uuid = String(d, p, "uuid", false);
      if (!uuid.ok()) return uuid.status();
      m.uuid = *uuid;
      Result<int64_t> gi = Int(d, p, "gpu_instance", false, -1, 1 << 16, -1);
      if (!gi.ok()) return gi.status();
      m.gpu_instance = static_cast<int>(*gi);
      Result<int64_t> ci = Int(d, p, "compute_instance", false, -1, 1 << 16, -1);
      if (!ci.ok()) return ci.status();
      m.compute_instance = static_cast<int>(*ci);
      Result<int64_t> mem = Int(d, p, "memory_mib", false, 0, int64_t{16} << 20);
      if (!mem.ok()) return mem.status();
      m.memory_mib = *mem;
      gpu.mig_devices.push_back(std::move(m));
    }
    return Status::Ok();
  }

  Status ParseLinks(const json& links, Topology& t) const {
    const std::string path = "links";
    const int n = t.gpu_count();
    HACHI_RETURN_IF_ERROR(ExpectType(links, path, json::value_t::object, "an object"));
    HACHI_RETURN_IF_ERROR(CheckKeys(links, path, {"matrix", "pcie_matrix", "nvswitch"}));
    bool has_matrix = links.contains("matrix"), has_switch = links.contains("nvswitch");
    bool has_pcie = links.contains("pcie_matrix");
    if (has_matrix && has_switch) {
      return Error(path, "give either matrix or nvswitch, not both");
    }
    if (!has_matrix && !has_switch && !has_pcie) {
      return Error(path, "expected at least one of matrix, nvswitch, pcie_matrix");
    }
    std::vector<Link> m(static_cast<size_t>(n) * n);
    if (has_matrix) {
      Result<std::vector<Link>> r =
          Matrix(links["matrix"], Key(path, "matrix"), n, false);
      if (!r.ok()) return r.status();
      m = std::move(*r);
    }
    if (has_switch) {
      const json& sw = links["nvswitch"];
      std::string sp = Key(path, "nvswitch");
      HACHI_RETURN_IF_ERROR(ExpectType(sw, sp, json::value_t::object, "an object"));
      HACHI_RETURN_IF_ERROR(CheckKeys(sw, sp, {"nvlinks"}));
      Result<int64_t> nv = Int(sw, sp, "nvlinks", true, 1, 64);
      if (!nv.ok()) return nv.status();
      for (Link& l : m) l.nvlinks = static_cast<int>(*nv);
    }
    if (has_pcie) {
      std::string pp = Key(path, "pcie_matrix");
      Result<std::vector<Link>> p = Matrix(links["pcie_matrix"], pp, n, true);
      if (!p.ok()) return p.status();
      for (int r = 0; r < n; ++r) {
        for (int c = 0; c < n; ++c) {
          Link& l = m[r * n + c];
          PciePath given = (*p)[r * n + c].pcie;
          // A PCIe label in "matrix" and the pcie_matrix cell describe the same thing.
          if (has_matrix && l.nvlinks == 0 && l.pcie != PciePath::kUnknown &&
              l.pcie != given) {
            return Error(Idx(Idx(pp, r), c),
                         "'" + std::string(PciePathName(given)) + "' contradicts " +
                             Idx(Idx(Key(path, "matrix"), r), c) + " ('" +
                             std::string(PciePathName(l.pcie)) + "')");
          }
          l.pcie = given;
        }
      }
    }
    for (int r = 0; r < n; ++r) {
      for (int c = 0; c < n; ++c) {
        if (r != c) t.SetLink(r, c, m[r * n + c]);
      }
    }
    return Status::Ok();
  }

  Result<Nic> ParseNic(const json& v, const std::string& path, int n) const {
    HACHI_RETURN_IF_ERROR(ExpectType(v, path, json::value_t::object, "an object"));
    HACHI_RETURN_IF_ERROR(CheckKeys(v, path, {"name", "device", "gpu_paths"}));
    Nic nic;
    Result<std::string> name = String(v, path, "name", true);
    if (!name.ok()) return name.status();
    if (name->empty()) return Error(Key(path, "name"), "must not be empty");
    nic.name = *name;
    Result<std::string> device = String(v, path, "device", false);
    if (!device.ok()) return device.status();
    nic.device = device->empty() ? nic.name : *device;
    std::string pp = Key(path, "gpu_paths");
    auto it = v.find("gpu_paths");
    if (it == v.end()) return Error(pp, "missing (expected one PCIe label per GPU)");
    HACHI_RETURN_IF_ERROR(ExpectType(*it, pp, json::value_t::array, "an array"));
    if (static_cast<int>(it->size()) != n) {
      return Error(pp, "expected " + std::to_string(n) + " labels (one per GPU), got " +
                           std::to_string(it->size()));
    }
    for (int i = 0; i < n; ++i) {
      Result<Link> l = Cell((*it)[i], Idx(pp, i), false, true);
      if (!l.ok()) return l.status();
      nic.gpu_paths.push_back(l->pcie);
    }
    return nic;
  }

  Result<TopologyFile> Parse(const json& doc) const {
    HACHI_RETURN_IF_ERROR(ExpectType(doc, "", json::value_t::object, "a JSON object"));
    HACHI_RETURN_IF_ERROR(CheckKeys(
        doc, "", {"format", "name", "description", "notes", "gpus", "links", "nics"}));
    Result<std::string> format = String(doc, "", "format", true);
    if (!format.ok()) return format.status();
    if (*format != kTopologyFormat) {
      return Error("format", "expected '" + std::string(kTopologyFormat) + "', got '" +
                                 *format + "'");
    }
    TopologyFile f;
    Result<std::string> name = String(doc, "", "name", false);
    if (!name.ok()) return name.status();
    f.name = *name;
    Result<std::string> desc = String(doc, "", "description", false);
    if (!desc.ok()) return desc.status();
    f.description = *desc;
    if (auto it = doc.find("notes"); it != doc.end()) {
      HACHI_RETURN_IF_ERROR(ExpectType(*it, "notes", json::value_t::array, "an array"));
      for (size_t i = 0; i < it->size(); ++i) {
        const json& note = (*it)[i];
        HACHI_RETURN_IF_ERROR(
            ExpectType(note, Idx("notes", i), json::value_t::string, "a string"));
        f.notes.push_back(note.get<std::string>());
      }
    }
    auto gpus = doc.find("gpus");
    if (gpus == doc.end()) return Error("gpus", "missing (expected an array of GPUs)");
    HACHI_RETURN_IF_ERROR(ExpectType(*gpus, "gpus", json::value_t::array, "an array"));
    if (gpus->empty() || gpus->size() > static_cast<size_t>(GpuSet::kMaxGpus)) {
      return Error("gpus", "expected 1 to " + std::to_string(GpuSet::kMaxGpus) +
                               " GPUs, got " + std::to_string(gpus->size()));
    }
    const int n = static_cast<int>(gpus->size());
    Topology t(n);
    for (int i = 0; i < n; ++i) {
      Result<Gpu> g = ParseGpu((*gpus)[i], Idx("gpus", i), i);
      if (!g.ok()) return g.status();
      t.mutable_gpu(i) = std::move(*g);
    }
    auto links = doc.find("links");
    if (links == doc.end()) return Error("links", "missing (expected an object)");
    HACHI_RETURN_IF_ERROR(ParseLinks(*links, t));
    if (auto it = doc.find("nics"); it != doc.end()) {
      HACHI_RETURN_IF_ERROR(ExpectType(*it, "nics", json::value_t::array, "an array"));
      for (size_t i = 0; i < it->size(); ++i) {
        Result<Nic> nic = ParseNic((*it)[i], Idx("nics", i), n);
        if (!nic.ok()) return nic.status();
        t.mutable_nics().push_back(std::move(*nic));
      }
    }
    t.set_source("topology file " + origin_);
    f.topology = std::move(t);
    return f;
  }

 private:
  std::string origin_;
};

// JSON string literal; invalid UTF-8 is replaced rather than thrown on.
std::string Quote(std::string_view s) {
  return json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string LabelOrUnknown(PciePath p) {
  return p == PciePath::kUnknown ? "?" : std::string(PciePathName(p));
}

void WriteMatrix(std::string& out, const Topology& t, bool pcie_only) {
  const int n = t.gpu_count();
  out += "[\n";
  for (int r = 0; r < n; ++r) {
    out += "      [";
    for (int c = 0; c < n; ++c) {
      if (c > 0) out += ", ";
      std::string cell;
      if (r == c) {
        cell = "X";
      } else {
        const Link& l = t.link(r, c);
        cell = (!pcie_only && l.nvlinks > 0) ? l.Label() : LabelOrUnknown(l.pcie);
      }
      out += Quote(cell);
    }
    out += r + 1 < n ? "],\n" : "]\n";
  }
  out += "    ]";
}

// ", "mig_enabled": true, "mig_devices": [...]", one device a line.
void WriteMig(std::string& out, const Gpu& g) {
  out += ", \"mig_enabled\": true, \"mig_devices\": [";
  for (size_t k = 0; k < g.mig_devices.size(); ++k) {
    const MigDevice& m = g.mig_devices[k];
    out += std::string(k ? "," : "") + "\n      {\"profile\": " + Quote(m.profile);
    if (!m.uuid.empty()) out += ", \"uuid\": " + Quote(m.uuid);
    if (m.gpu_instance >= 0) {
      out += ", \"gpu_instance\": " + std::to_string(m.gpu_instance);
    }
    if (m.compute_instance >= 0) {
      out += ", \"compute_instance\": " + std::to_string(m.compute_instance);
    }
    if (m.memory_mib > 0) out += ", \"memory_mib\": " + std::to_string(m.memory_mib);
    out += "}";
  }
  out += g.mig_devices.empty() ? "]" : "\n    ]";
}

}  // namespace

Result<TopologyFile> ParseTopologyFile(std::string_view text, std::string_view origin) {
  Reader reader(origin);
  // nlohmann reports errors by exception; this is the edge where they become a Status.
  try {
    json doc = json::parse(text);
    return reader.Parse(doc);
  } catch (const json::exception& e) {
    std::string what = e.what();
    if (size_t p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    return reader.Error("", "invalid JSON: " + what);
  }
}

Result<Topology> ParseTopologyJson(std::string_view text, std::string_view origin) {
  Result<TopologyFile> f = ParseTopologyFile(text, origin);
  if (!f.ok()) return f.status();
  return std::move(f->topology);
}

Result<TopologyFile> ReadTopologyFile(const std::string& path) {
  std::string error;
  std::optional<std::string> text = ReadFile(path, &error);
  if (!text) return NotFound(error);
  return ParseTopologyFile(*text, path);
}

std::string TopologyFileToJson(const TopologyFile& f) {
  const Topology& t = f.topology;
  const int n = t.gpu_count();
  std::string out = "{\n  \"format\": " + Quote(kTopologyFormat) + ",\n";
  if (!f.name.empty()) out += "  \"name\": " + Quote(f.name) + ",\n";
  if (!f.description.empty()) out += "  \"description\": " + Quote(f.description) + ",\n";
  if (!f.notes.empty()) {
    out += "  \"notes\": [\n";
    for (size_t i = 0; i < f.notes.size(); ++i) {
      out += "    " + Quote(f.notes[i]) + (i + 1 < f.notes.size() ? ",\n" : "\n");
    }
    out += "  ],\n";
  }
  out += "  \"gpus\": [\n";
  for (int i = 0; i < n; ++i) {
    const Gpu& g = t.gpu(i);
    out += "    {\"index\": " + std::to_string(i) + ", \"model\": " + Quote(g.model) +
           ", \"memory_mib\": " + std::to_string(g.memory_mib);
    if (!g.uuid.empty()) out += ", \"uuid\": " + Quote(g.uuid);
    if (!g.pci_bus_id.empty()) out += ", \"pci_bus_id\": " + Quote(g.pci_bus_id);
    out += ", \"numa_node\": " + std::to_string(g.numa_node);
    if (!g.cpu_affinity.empty()) out += ", \"cpu_affinity\": " + Quote(g.cpu_affinity);
    // Only MIG GPUs say anything of MIG, so files of other nodes stay as they were.
    if (g.mig_enabled) WriteMig(out, g);
    out += i + 1 < n ? "},\n" : "}\n";
  }
  out += "  ],\n  \"links\": {\n    \"matrix\": ";
  WriteMatrix(out, t, false);
  // The PCIe relation of NVLinked pairs is hidden behind "NV<n>" in the matrix.
  bool hidden_pcie = false;
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) {
      if (r != c && t.link(r, c).nvlinks > 0 && t.link(r, c).pcie != PciePath::kUnknown) {
        hidden_pcie = true;
      }
    }
  }
  if (hidden_pcie) {
    out += ",\n    \"pcie_matrix\": ";
    WriteMatrix(out, t, true);
  }
  out += "\n  }";
  if (!t.nics().empty()) {
    out += ",\n  \"nics\": [\n";
    for (size_t k = 0; k < t.nics().size(); ++k) {
      const Nic& nic = t.nics()[k];
      out += "    {\"name\": " + Quote(nic.name);
      if (!nic.device.empty() && nic.device != nic.name) {
        out += ", \"device\": " + Quote(nic.device);
      }
      out += ", \"gpu_paths\": [";
      // Readers may leave a short row; the file always has one label per GPU.
      for (int i = 0; i < n; ++i) {
        PciePath p = i < static_cast<int>(nic.gpu_paths.size()) ? nic.gpu_paths[i]
                                                                : PciePath::kUnknown;
        out += (i > 0 ? ", " : "") + Quote(LabelOrUnknown(p));
      }
      out += k + 1 < t.nics().size() ? "]},\n" : "]}\n";
    }
    out += "  ]";
  }
  out += "\n}\n";
  return out;
}

std::string TopologyToJson(const Topology& t) {
  TopologyFile f;
  f.topology = t;
  return TopologyFileToJson(f);
}

}  // namespace hachi::topo
