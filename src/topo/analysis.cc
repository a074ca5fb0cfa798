#include "topo/analysis.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>

namespace hachi::topo {

std::string_view InterconnectClassName(InterconnectClass c) {
  switch (c) {
    case InterconnectClass::kPcieOnly:
      return "pcie-only";
    case InterconnectClass::kNvLinkPairs:
      return "nvlink-pairs";
    case InterconnectClass::kNvLinkMesh:
      return "nvlink-mesh";
    case InterconnectClass::kNvSwitch:
      return "nvswitch";
    case InterconnectClass::kUnknown:
      break;
  }
  return "unknown";
}

bool IsNvLinkClass(InterconnectClass c) {
  return c == InterconnectClass::kNvLinkPairs || c == InterconnectClass::kNvLinkMesh ||
         c == InterconnectClass::kNvSwitch;
}

namespace {

// The larger of the two directions: an asymmetric matrix is reported by the checks, and
// for facts the better reading is the likelier truth (a cell lost, not a link gained).
Link PairLink(const Topology& t, int a, int b) {
  const Link& x = t.link(a, b);
  const Link& y = t.link(b, a);
  Link out;
  out.nvlinks = std::max(x.nvlinks, y.nvlinks);
  out.pcie = std::max(x.pcie, y.pcie);
  return out;
}

// Connected components (size > 1) of the graph whose edges satisfy `edge`.
template <typename Edge>
std::vector<GpuSet> Components(const Topology& t, Edge edge) {
  int n = t.gpu_count();
  std::vector<int> comp(static_cast<size_t>(n), -1);
  std::vector<GpuSet> out;
  for (int s = 0; s < n; ++s) {
    if (comp[static_cast<size_t>(s)] >= 0) continue;
    GpuSet members;
    std::vector<int> stack = {s};
    comp[static_cast<size_t>(s)] = s;
    while (!stack.empty()) {
      int a = stack.back();
      stack.pop_back();
      members.Insert(a);
      for (int b = 0; b < n; ++b) {
        if (b == a || comp[static_cast<size_t>(b)] >= 0 || !edge(a, b)) continue;
        comp[static_cast<size_t>(b)] = s;
        stack.push_back(b);
      }
    }
    if (members.size() > 1) out.push_back(members);
  }
  return out;
}

// The most common positive value (ties: the larger), 0 when none.
int Mode(const std::vector<int>& values) {
  std::map<int, int> count;
  for (int v : values) {
    if (v > 0) ++count[v];
  }
  int best = 0, best_n = 0;
  for (auto [v, c] : count) {
    if (c >= best_n) best = v, best_n = c;
  }
  return best;
}

std::string GpuWord(GpuSet s) {
  return (s.size() == 1 ? "GPU " : "GPUs ") + s.ToString();
}

}  // namespace

std::string Fingerprint(const Topology& t) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  auto mix = [&h](const void* data, size_t len) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < len; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  auto mix_int = [&mix](int64_t v) { mix(&v, sizeof v); };
  int n = t.gpu_count();
  mix_int(n);
  for (const Gpu& g : t.gpus()) {
    mix(g.model.data(), g.model.size());
    mix_int(g.memory_mib);
    mix_int(g.numa_node);
  }
  // Links as nvidia-smi shows them (NV<n>, else the PCIe relation), so a node read by
  // NVML (which also knows the PCIe path under NVLink) and by `topo -m` can match.
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      std::string label = t.link(a, b).Label();
      mix(label.data(), label.size() + 1);
    }
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

TopologyFacts Analyze(const Topology& t) {
  TopologyFacts f;
  int n = t.gpu_count();
  f.fingerprint = Fingerprint(t);

  // NUMA groups: by NUMA node; when no node is known, by identical CPU affinity.
  std::map<int, GpuSet> by_numa;
  std::map<std::string, GpuSet> by_affinity;
  GpuSet unknown;
  for (const Gpu& g : t.gpus()) {
    if (g.numa_node >= 0) {
      by_numa[g.numa_node].Insert(g.index);
    } else if (!g.cpu_affinity.empty()) {
      by_affinity[g.cpu_affinity].Insert(g.index);
    } else {
      unknown.Insert(g.index);
    }
  }
  for (auto& [id, set] : by_numa) {
    f.numa_groups.push_back(set);
    f.numa_ids.push_back(id);
  }
  if (by_numa.empty()) {
    std::vector<GpuSet> groups;
    for (auto& [aff, set] : by_affinity) groups.push_back(set);
    std::sort(groups.begin(), groups.end(),
              [](GpuSet a, GpuSet b) { return a.First() < b.First(); });
    for (GpuSet s : groups) {
      f.numa_groups.push_back(s);
      f.numa_ids.push_back(-1);
    }
  }
  if (!unknown.empty()) {
    f.numa_groups.push_back(unknown);
    f.numa_ids.push_back(-1);
  }

  f.pcie_groups = Components(t, [&](int a, int b) {
    PciePath p = PairLink(t, a, b).pcie;
    return p == PciePath::kPix || p == PciePath::kPxb;
  });
  f.nvlink_groups =
      Components(t, [&](int a, int b) { return PairLink(t, a, b).nvlinks > 0; });

  // Interconnect class, judged on the GPUs that have NVLink at all (a GPU that lost its
  // NVLinks is an anomaly of an NVLink node, not a different class of node).
  int nv_pairs = 0, known_pairs = 0;
  GpuSet nv_gpus;
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      Link l = PairLink(t, a, b);
      if (l.known()) ++known_pairs;
      if (l.nvlinks > 0) {
        ++nv_pairs;
        nv_gpus.Insert(a);
        nv_gpus.Insert(b);
      }
    }
  }
  if (n == 1) {
    f.interconnect = InterconnectClass::kPcieOnly;
  } else if (nv_pairs == 0) {
    f.interconnect =
        known_pairs == 0 ? InterconnectClass::kUnknown : InterconnectClass::kPcieOnly;
  } else {
    int m = nv_gpus.size();
    bool all_to_all = nv_pairs == m * (m - 1) / 2;
    bool cliques = true;
    for (GpuSet g : f.nvlink_groups) {
      int k = g.size();
      int edges = 0;
      for (int a : g.Indices()) {
        for (int b : g.Indices()) {
          if (a < b && PairLink(t, a, b).nvlinks > 0) ++edges;
        }
      }
      if (edges != k * (k - 1) / 2) cliques = false;
    }
    if (all_to_all && f.nvlink_groups.size() == 1 && m * 2 > n) {
      f.interconnect = InterconnectClass::kNvSwitch;
    } else if (cliques) {
      f.interconnect = InterconnectClass::kNvLinkPairs;
    } else {
      f.interconnect = InterconnectClass::kNvLinkMesh;
    }
  }
  return f;
}

namespace {

// No GPUs, or not as many as expected.
void CheckGpuCount(const Topology& t, const TopologyFacts&, const CheckOptions& opts,
                   std::vector<Finding>* out) {
  const int n = t.gpu_count();
  if (n == 0) {
    out->push_back({Severity::kError, "no-gpus", {}, "no GPU found"});
  }
  if (opts.expected_gpus > 0 && n != opts.expected_gpus) {
    out->push_back(
        {Severity::kError,
         "gpu-count-mismatch",
         {},
         "found " + std::to_string(n) + " GPUs, expected " +
             std::to_string(opts.expected_gpus) +
             ": a GPU may have fallen off the bus (check `dmesg` for Xid 79) or "
             "be hidden by the driver"});
  }
}

// Asymmetric cells: both directions known and different.
void CheckSymmetry(const Topology& t, const TopologyFacts&, const CheckOptions&,
                   std::vector<Finding>* out) {
  const int n = t.gpu_count();
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      const Link& x = t.link(a, b);
      const Link& y = t.link(b, a);
      if (x.known() && y.known() && !(x == y)) {
        out->push_back(
            {Severity::kError, "asymmetric", GpuSet::FromIndices({a, b}),
             "the link GPU" + std::to_string(a) + "->GPU" + std::to_string(b) + " is " +
                 x.Label() + " but GPU" + std::to_string(b) + "->GPU" +
                 std::to_string(a) + " is " + y.Label() +
                 ": the matrix is inconsistent; re-read it or check the driver"});
      }
    }
  }
}

// On an NVLink node, a GPU with no NVLink while most of its peers have some: it fell back
// to PCIe.
void CheckPcieGpu(const Topology& t, const TopologyFacts& facts, const CheckOptions&,
                  std::vector<Finding>* out) {
  const int n = t.gpu_count();
  if (!IsNvLinkClass(facts.interconnect)) return;
  GpuSet linked;
  for (GpuSet g : facts.nvlink_groups) linked = linked | g;
  GpuSet lonely = t.AllGpus() - linked;
  if (!lonely.empty() && linked.size() * 2 > n) {
    bool expected = facts.interconnect != InterconnectClass::kNvLinkPairs;
    std::string links;
    for (int g : lonely.Indices()) {
      int peer = linked.First();
      links += (links.empty() ? "" : ", ") + std::string("GPU") + std::to_string(g) +
               "-GPU" + std::to_string(peer) + " " + PairLink(t, g, peer).Label();
    }
    out->push_back({expected ? Severity::kError : Severity::kWarning, "pcie-gpu", lonely,
                    GpuWord(lonely) + ": PCIe links only (" + links + ") while " +
                        std::to_string(linked.size()) +
                        " peers are NVLinked: its NVLinks are down or missing. Reseat "
                        "the GPU / check the NVLink bridge or baseboard, and the PCIe "
                        "switch; `nvidia-smi nvlink -s` shows link state"});
  }
}

// On an NVLink node, fewer bonded NVLinks than the usual pair (all-to-all) or fewer in
// total than the usual GPU (meshes, pairs).
void CheckDegradedLinks(const Topology& t, const TopologyFacts& facts,
                        const CheckOptions&, std::vector<Finding>* out) {
  const int n = t.gpu_count();
  if (!IsNvLinkClass(facts.interconnect)) return;
  if (facts.interconnect == InterconnectClass::kNvSwitch) {
    std::vector<int> counts;
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) counts.push_back(PairLink(t, a, b).nvlinks);
    }
    int usual = Mode(counts);
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        int c = PairLink(t, a, b).nvlinks;
        if (c > 0 && c < usual) {
          out->push_back({Severity::kWarning, "degraded-link",
                          GpuSet::FromIndices({a, b}),
                          "GPU" + std::to_string(a) + "-GPU" + std::to_string(b) +
                              " has NV" + std::to_string(c) +
                              " where the other pairs "
                              "have NV" +
                              std::to_string(usual) +
                              ": some NVLinks are down (check `nvidia-smi nvlink -s`)"});
        }
      }
    }
  } else {
    std::vector<int> totals(static_cast<size_t>(n), 0);
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        if (a != b) totals[static_cast<size_t>(a)] += PairLink(t, a, b).nvlinks;
      }
    }
    int usual = Mode(totals);
    for (int a = 0; a < n; ++a) {
      int c = totals[static_cast<size_t>(a)];
      if (c > 0 && c < usual) {
        out->push_back({Severity::kWarning, "degraded-link", GpuSet::FromIndices({a}),
                        "GPU" + std::to_string(a) + " has " + std::to_string(c) +
                            " NVLinks in all where its peers have " +
                            std::to_string(usual) + ": a link is down"});
      }
    }
  }
}

// Unknown links that no read finding explains.
void CheckUnknownLinks(const Topology& t, const TopologyFacts&, const CheckOptions&,
                       std::vector<Finding>* out) {
  const int n = t.gpu_count();
  int unknown = 0;
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a != b && !t.link(a, b).known()) ++unknown;
    }
  }
  if (unknown > 0) {
    out->push_back({Severity::kWarning,
                    "unknown-links",
                    {},
                    std::to_string(unknown) + " GPU-to-GPU links are unknown"});
  }
}

// Mixed models in one node make "a GPU" mean different things.
void CheckModels(const Topology& t, const TopologyFacts&, const CheckOptions&,
                 std::vector<Finding>* out) {
  std::map<std::string, GpuSet> models;
  for (const Gpu& g : t.gpus()) {
    if (!g.model.empty()) models[g.model].Insert(g.index);
  }
  if (models.size() > 1) {
    std::string list;
    for (auto& [m, s] : models)
      list += (list.empty() ? "" : "; ") + m + ": " + s.ToString();
    out->push_back({Severity::kWarning, "mixed-models", t.AllGpus(),
                    "GPU models differ within the node (" + list + ")"});
  }
}

using TopologyCheck = void (*)(const Topology&, const TopologyFacts&, const CheckOptions&,
                               std::vector<Finding>*);
// In the order their findings are listed (then sorted by severity, stably).
constexpr TopologyCheck kChecks[] = {CheckGpuCount,      CheckSymmetry,     CheckPcieGpu,
                                     CheckDegradedLinks, CheckUnknownLinks, CheckModels};

}  // namespace

std::vector<Finding> CheckTopology(const Topology& t, const CheckOptions& opts) {
  std::vector<Finding> out = t.read_findings();
  const TopologyFacts facts = Analyze(t);
  for (TopologyCheck check : kChecks) check(t, facts, opts, &out);
  std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    return a.severity > b.severity;
  });
  return out;
}

Severity WorstSeverity(const std::vector<Finding>& findings) {
  Severity s = Severity::kInfo;
  for (const Finding& f : findings) s = std::max(s, f.severity);
  return s;
}

}  // namespace hachi::topo
