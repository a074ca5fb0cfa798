#include "cli/topo_render.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace hachi::cli {
namespace {

using nlohmann::json;
using topo::Finding;
using topo::InterconnectClass;
using topo::Topology;
using topo::TopologyFacts;

std::string Pad(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

std::string MemoryText(int64_t mib) {
  if (mib <= 0) return "?";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(mib) / 1024.0);
  return buf;
}

std::string ClassText(const Topology& t, const TopologyFacts& f) {
  switch (f.interconnect) {
    case InterconnectClass::kNvSwitch: {
      int n = t.gpu_count() > 1 ? t.link(0, 1).nvlinks : 0;
      for (int a = 0; a < t.gpu_count(); ++a) {
        for (int b = 0; b < t.gpu_count(); ++b) {
          if (a != b) n = std::max(n, t.link(a, b).nvlinks);
        }
      }
      return "nvswitch (NVLink all-to-all, NV" + std::to_string(n) + " per pair)";
    }
    case InterconnectClass::kNvLinkMesh:
      return "nvlink-mesh (NVLink to some peers, PCIe to the others)";
    case InterconnectClass::kNvLinkPairs:
      return "nvlink-pairs (NVLink bridges within groups, PCIe between them)";
    case InterconnectClass::kPcieOnly:
      return "pcie-only (no NVLink)";
    case InterconnectClass::kUnknown:
      break;
  }
  return "unknown (links not known)";
}

json Indices(GpuSet s) { return json(s.Indices()); }

// The MIG devices of the GPUs in MIG mode, one a line; nothing when none is.
std::string RenderMigText(const Topology& t) {
  std::string out;
  for (const topo::Gpu& g : t.gpus()) {
    if (!g.mig_enabled) continue;
    const std::string gpu = Pad("GPU" + std::to_string(g.index), 6);
    if (g.mig_devices.empty()) {
      out += gpu +
             "MIG on, no instances: the GPU cannot run jobs until instances are "
             "created\n";
    }
    for (const topo::MigDevice& m : g.mig_devices) {
      auto id = [](int v) { return v >= 0 ? std::to_string(v) : std::string("?"); };
      out += gpu + Pad(m.profile.empty() ? "?" : m.profile, 12) +
             Pad(id(m.gpu_instance), 4) + Pad(id(m.compute_instance), 4) +
             Pad(MemoryText(m.memory_mib), 11) + (m.uuid.empty() ? "?" : m.uuid) + "\n";
    }
  }
  if (out.empty()) return out;
  return "\nMIG devices (as found; Hachi does not change the layout):\n"
         "GPU   Profile     GI  CI  Memory     UUID\n" +
         out;
}

}  // namespace

std::string RenderFindingsText(const std::vector<Finding>& findings) {
  if (findings.empty()) return "Findings: none, the node looks healthy\n";
  std::string out = "Findings:\n";
  for (const Finding& f : findings) {
    out += "  " +
           Pad(std::string("[") + std::string(topo::SeverityName(f.severity)) + "]", 10) +
           f.code;
    if (!f.gpus.empty()) out += " (GPUs " + f.gpus.ToString() + ")";
    out += ": " + f.message + "\n";
  }
  return out;
}

std::string RenderTopologyText(const Topology& t, const TopologyFacts& facts,
                               const std::vector<Finding>& findings) {
  int n = t.gpu_count();
  std::string out;
  out += "Source:      " + t.source() + "\n";
  out += "GPUs:        " + std::to_string(n) + "\n";
  out += "Class:       " + ClassText(t, facts) + "\n";
  out += "Fingerprint: " + facts.fingerprint + "\n\n";

  // The matrix, nvidia-smi style, with the PCIe relation under NVLink where known.
  const size_t w = 6;
  out += Pad("", w);
  for (int b = 0; b < n; ++b) out += Pad("GPU" + std::to_string(b), w);
  out += Pad("NUMA", w) + "CPU Affinity\n";
  for (int a = 0; a < n; ++a) {
    out += Pad("GPU" + std::to_string(a), w);
    for (int b = 0; b < n; ++b) out += Pad(a == b ? " X" : t.link(a, b).Label(), w);
    const topo::Gpu& g = t.gpu(a);
    out += Pad(g.numa_node >= 0 ? std::to_string(g.numa_node) : "?", w);
    out += (g.cpu_affinity.empty() ? "?" : g.cpu_affinity) + "\n";
  }
  bool pcie_hidden = false, pcie_known = false;
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      const topo::Link& l = t.link(a, b);
      if (l.nvlinks > 0 && l.pcie != topo::PciePath::kUnknown) pcie_hidden = true;
      if (l.pcie != topo::PciePath::kUnknown) pcie_known = true;
    }
  }
  if (pcie_hidden && pcie_known) {
    out += "\nPCIe relation (under the NVLinks):\n" + Pad("", w);
    for (int b = 0; b < n; ++b) out += Pad("GPU" + std::to_string(b), w);
    out += "\n";
    for (int a = 0; a < n; ++a) {
      out += Pad("GPU" + std::to_string(a), w);
      for (int b = 0; b < n; ++b) {
        out += Pad(a == b ? " X" : std::string(topo::PciePathName(t.link(a, b).pcie)), w);
      }
      out += "\n";
    }
  }
  out +=
      "Legend: NV<n> = n bonded NVLinks; PIX = one PCIe switch; PXB = several PCIe "
      "switches; PHB = PCIe host bridge; NODE = host bridges within a NUMA node; SYS "
      "= across NUMA nodes (QPI/UPI); ? = unknown\n\n";

  out += "GPU   Model                          Memory     NUMA  PCI bus id        UUID\n";
  for (const topo::Gpu& g : t.gpus()) {
    out += Pad("GPU" + std::to_string(g.index), 6) +
           Pad(g.model.empty() ? "?" : g.model, 31) + Pad(MemoryText(g.memory_mib), 11) +
           Pad(g.numa_node >= 0 ? std::to_string(g.numa_node) : "?", 6) +
           Pad(g.pci_bus_id.empty() ? "?" : g.pci_bus_id, 18) +
           (g.uuid.empty() ? "?" : g.uuid) + "\n";
  }
  out += RenderMigText(t);
  out += "\nNUMA groups:   ";
  for (size_t i = 0; i < facts.numa_groups.size(); ++i) {
    if (i) out += " | ";
    out += (facts.numa_ids[i] >= 0 ? "node " + std::to_string(facts.numa_ids[i])
                                   : std::string("by CPU affinity")) +
           ": " + facts.numa_groups[i].ToString();
  }
  out += "\nPCIe switches: ";
  if (facts.pcie_groups.empty()) out += "not known (hidden under NVLink, or no switch)";
  for (size_t i = 0; i < facts.pcie_groups.size(); ++i) {
    out += (i ? " | " : "") + facts.pcie_groups[i].ToString();
  }
  out += "\nNVLink groups: ";
  if (facts.nvlink_groups.empty()) out += "none";
  for (size_t i = 0; i < facts.nvlink_groups.size(); ++i) {
    out += (i ? " | " : "") + facts.nvlink_groups[i].ToString();
  }
  out += "\n";
  if (!t.nics().empty()) {
    out += "NICs:          ";
    for (size_t i = 0; i < t.nics().size(); ++i) {
      const topo::Nic& nic = t.nics()[i];
      GpuSet near;
      for (size_t g = 0; g < nic.gpu_paths.size(); ++g) {
        if (nic.gpu_paths[g] == topo::PciePath::kPix ||
            nic.gpu_paths[g] == topo::PciePath::kPxb) {
          near.Insert(static_cast<int>(g));
        }
      }
      out += (i ? ", " : "") + nic.device;
      if (!near.empty()) out += " (near GPU " + near.ToString() + ")";
    }
    out += "\n";
  }
  out += "\n" + RenderFindingsText(findings);
  return out;
}

namespace {

json FindingsJson(const std::vector<Finding>& findings) {
  json arr = json::array();
  for (const Finding& f : findings) {
    arr.push_back({{"severity", topo::SeverityName(f.severity)},
                   {"code", f.code},
                   {"gpus", Indices(f.gpus)},
                   {"message", f.message}});
  }
  return arr;
}

std::string StatusWord(const std::vector<Finding>& findings) {
  if (findings.empty()) return "ok";
  return std::string(topo::SeverityName(topo::WorstSeverity(findings)));
}

}  // namespace

std::string RenderTopologyJson(const Topology& t, const TopologyFacts& facts,
                               const std::vector<Finding>& findings) {
  int n = t.gpu_count();
  json j;
  j["source"] = t.source();
  j["fingerprint"] = facts.fingerprint;
  j["class"] = topo::InterconnectClassName(facts.interconnect);
  json gpus = json::array();
  for (const topo::Gpu& g : t.gpus()) {
    json mig = json::array();
    for (const topo::MigDevice& m : g.mig_devices) {
      mig.push_back({{"profile", m.profile},
                     {"uuid", m.uuid},
                     {"gpu_instance", m.gpu_instance},
                     {"compute_instance", m.compute_instance},
                     {"memory_mib", m.memory_mib},
                     {"slices", m.slices()}});
    }
    gpus.push_back({{"index", g.index},
                    {"uuid", g.uuid},
                    {"model", g.model},
                    {"memory_mib", g.memory_mib},
                    {"pci_bus_id", g.pci_bus_id},
                    {"numa_node", g.numa_node},
                    {"cpu_affinity", g.cpu_affinity},
                    {"mig_enabled", g.mig_enabled},
                    {"mig_devices", std::move(mig)}});
  }
  j["gpus"] = gpus;
  json links = json::array(), pcie = json::array(), nvlinks = json::array();
  for (int a = 0; a < n; ++a) {
    json row = json::array(), prow = json::array(), nrow = json::array();
    for (int b = 0; b < n; ++b) {
      const topo::Link& l = t.link(a, b);
      row.push_back(a == b ? "X" : l.Label());
      prow.push_back(a == b ? "X" : std::string(topo::PciePathName(l.pcie)));
      nrow.push_back(a == b ? 0 : l.nvlinks);
    }
    links.push_back(row);
    pcie.push_back(prow);
    nvlinks.push_back(nrow);
  }
  j["links"] = links;
  j["nvlinks"] = nvlinks;
  j["pcie"] = pcie;
  json nics = json::array();
  for (const topo::Nic& nic : t.nics()) {
    json paths = json::array();
    for (topo::PciePath p : nic.gpu_paths) paths.push_back(topo::PciePathName(p));
    nics.push_back({{"name", nic.name}, {"device", nic.device}, {"gpu_paths", paths}});
  }
  j["nics"] = nics;
  json numa = json::array();
  for (size_t i = 0; i < facts.numa_groups.size(); ++i) {
    numa.push_back(
        {{"numa_node", facts.numa_ids[i]}, {"gpus", Indices(facts.numa_groups[i])}});
  }
  j["numa_groups"] = numa;
  json pg = json::array(), ng = json::array();
  for (GpuSet s : facts.pcie_groups) pg.push_back(Indices(s));
  for (GpuSet s : facts.nvlink_groups) ng.push_back(Indices(s));
  j["pcie_groups"] = pg;
  j["nvlink_groups"] = ng;
  j["findings"] = FindingsJson(findings);
  j["status"] = StatusWord(findings);
  return j.dump(2) + "\n";
}

std::string RenderCheckJson(const Topology& t, const std::vector<Finding>& findings) {
  json j;
  j["source"] = t.source();
  j["gpus"] = t.gpu_count();
  j["status"] = StatusWord(findings);
  j["findings"] = FindingsJson(findings);
  return j.dump(2) + "\n";
}

std::string RenderAllocText(const Topology& t, const AllocReport& r) {
  std::string out;
  out += "Node:     " + t.source() + " (" + std::to_string(t.gpu_count()) + " GPUs)\n";
  out += "Request:  " + std::to_string(r.request.count) +
         (r.request.count == 1 ? " GPU" : " GPUs");
  if (!r.request.required.empty())
    out += ", must include " + r.request.required.ToString();
  out += "; free " + r.free.ToString() + "; policy " + r.policy + "\n";
  out += "Chosen:   " + r.choice.gpus.ToString() +
         "  (CUDA_VISIBLE_DEVICES=" + r.choice.gpus.ToList() + ")\n";
  const alloc::ScoreParts& p = r.choice.parts;
  out += "Score parts, in the order they decide:\n";
  out += "  1. weakest link in the set:  " + p.bottleneck_label;
  if (p.bottleneck != alloc::ScoreParts::kNoPair) {
    out += " (score " + std::to_string(p.bottleneck) + ")";
  }
  out += "\n  2. total link score:         " + std::to_string(p.total) + "\n";
  out += "  3. NUMA nodes spanned:       " + std::to_string(p.numa_nodes) + "\n";
  out += "  4. PCIe switch groups:       " + std::to_string(p.pcie_groups) + "\n";
  out += "  5. what stays free:          " +
         (p.leftover.empty() ? std::string("nothing of 2+ GPUs") : p.leftover) + "\n";
  out += "Why:      " + r.choice.Explain() + "\n";
  return out;
}

std::string RenderAllocJson(const AllocReport& r) {
  const alloc::ScoreParts& p = r.choice.parts;
  json j;
  j["policy"] = r.policy;
  j["count"] = r.request.count;
  j["free"] = Indices(r.free);
  j["required"] = Indices(r.request.required);
  j["gpus"] = Indices(r.choice.gpus);
  j["cuda_visible_devices"] = r.choice.gpus.ToList();
  json score;
  score["bottleneck"] =
      p.bottleneck == alloc::ScoreParts::kNoPair ? json(nullptr) : json(p.bottleneck);
  score["bottleneck_link"] = p.bottleneck_label;
  score["total"] = p.total;
  score["numa_nodes"] = p.numa_nodes;
  score["pcie_groups"] = p.pcie_groups;
  score["leftover"] = p.leftover;
  j["score"] = score;
  j["explanation"] = r.choice.Explain();
  return j.dump(2) + "\n";
}

}  // namespace hachi::cli
