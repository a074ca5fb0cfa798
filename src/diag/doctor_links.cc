// doctor's checks of the driver, the GPUs it sees and how they are linked: the GPU count,
// every NVLink (against the preset, else against the links NVML lists), the NVSwitch
// fabric, and the anomalies `hachi topo check` finds. Pure functions of NvmlReadings.
#include <algorithm>
#include <string>
#include <utility>

#include "diag/doctor_stages.h"
#include "topo/analysis.h"
#include "topo/nvml_api.h"

namespace hachi::diag {
namespace {

namespace nv = topo::nvml;

std::string Gpu(int i) { return "GPU " + std::to_string(i); }

std::string Plural(size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

std::string PresetWord(const Expectation& e) { return "preset " + e.preset; }

// The NVLinks GPU i of the preset's node has: on NVSwitch nodes its link count to any
// peer (all of them cross the switches), else the sum over its peers; -1 unknown.
int ExpectedLinks(const Expectation& e, int i) {
  if (!e.topology || i >= e.topology->gpu_count()) return -1;
  const topo::Topology& p = *e.topology;
  const int n = p.gpu_count();
  if (n < 2) return 0;
  if (topo::Analyze(p).interconnect == topo::InterconnectClass::kNvSwitch) {
    return p.link(i, i == 0 ? 1 : 0).nvlinks;
  }
  int sum = 0;
  for (int j = 0; j < n; ++j) {
    if (j != i) sum += p.link(i, j).nvlinks;
  }
  return sum;
}

std::string LinkList(const std::vector<unsigned>& links) {
  std::string s;
  for (unsigned l : links) s += (s.empty() ? "" : ", ") + std::to_string(l);
  return s;
}

}  // namespace

std::vector<CheckItem> DriverChecks(const NvmlReadings& r, const Expectation& e,
                                    int only_gpu) {
  std::vector<CheckItem> out;
  if (!r.error.empty()) {
    out.push_back({"driver",
                   CheckStatus::kFail,
                   {},
                   "no GPU check can run: " + r.error,
                   "install the NVIDIA driver and load it (nvidia-smi must list the "
                   "GPUs); --nvml-library names another libnvidia-ml.so.1"});
    return out;
  }
  std::string versions = "driver " + (r.driver_version.empty() ? "?" : r.driver_version);
  if (!r.nvml_version.empty()) versions += ", NVML " + r.nvml_version;
  if (!r.cuda_version.empty()) versions += ", CUDA " + r.cuda_version;
  out.push_back({"driver", CheckStatus::kOk, {}, versions, ""});

  const int n = r.device_count;
  if (n == 0) {
    out.push_back({"gpu-count",
                   CheckStatus::kFail,
                   {},
                   "the driver sees no GPU",
                   "check that the GPUs are on the bus (lspci -d 10de:) and the kernel "
                   "log for the driver's errors"});
  } else if (e.gpus > 0 && n != e.gpus) {
    out.push_back(
        {"gpu-count",
         CheckStatus::kFail,
         {},
         Plural(n, "GPU") + ", expected " + std::to_string(e.gpus) +
             (e.preset.empty() ? "" : " (" + PresetWord(e) + ")"),
         "a GPU has fallen off the bus or is hidden: compare lspci -d 10de: with "
         "nvidia-smi -L, look for Xid 79 in the kernel log; reseat or replace it"});
  } else {
    out.push_back(
        {"gpu-count",
         CheckStatus::kOk,
         {},
         Plural(n, "GPU") +
             (e.gpus > 0
                  ? ", as expected" + (e.preset.empty() ? "" : " (" + PresetWord(e) + ")")
                  : " (no expectation: --expect-gpus or --preset)"),
         ""});
  }
  for (const GpuReadings& g : r.gpus) {
    if (!Selected(only_gpu, g.index) || g.error.empty()) continue;
    out.push_back({"gpu",
                   CheckStatus::kFail,
                   {g.index},
                   Gpu(g.index) + ": NVML cannot reach it (" + g.error + ")",
                   "the GPU may have fallen off the bus (Xid 79): check the kernel log "
                   "and lspci; reset it or reboot, reseat or replace it if it recurs"});
  }
  return out;
}

std::vector<CheckItem> NvLinkChecks(const NvmlReadings& r, const Expectation& e,
                                    int only_gpu) {
  std::vector<CheckItem> out;
  bool any_up = false, any_listed = false, any_expected = false;
  for (const GpuReadings& g : r.gpus) {
    any_up = any_up || !g.links_up.empty();
    any_listed = any_listed || !g.links_up.empty() || !g.links_down.empty();
    any_expected = any_expected || ExpectedLinks(e, g.index) > 0;
  }
  if (!any_listed && !any_expected) {
    out.push_back({"nvlink", CheckStatus::kOk, {}, "no NVLinks (PCIe only)", ""});
    return out;
  }
  // NVML lists links on every GPU and none is up: a node without NVLink bridges, or an
  // NVSwitch node whose links the fabric manager never trained. Without a preset there
  // is no telling which, and one item says so instead of a FAIL per GPU.
  if (!any_up && !any_expected) {
    out.push_back(
        {"nvlink",
         CheckStatus::kWarn,
         {},
         "NVML lists NVLinks on the GPUs but none is up: no NVLink bridges "
         "fitted, or an NVSwitch node whose fabric is down",
         "give --preset for the node this should be; nvidia-smi nvlink -s shows "
         "each link"});
    return out;
  }
  // Every GPU is judged, the selected ones reported: a pair's shortfall that its GPU's
  // own links explain is not the pair's fault, whichever GPU --gpu names.
  std::vector<bool> flagged(r.gpus.size(), false);
  for (const GpuReadings& g : r.gpus) {
    if (!g.error.empty()) continue;
    const size_t up = g.links_up.size(), listed = up + g.links_down.size();
    const int expected = ExpectedLinks(e, g.index);
    const std::string tag = Gpu(g.index) + ": ";
    const std::string fix =
        "reseat the GPU or its NVLink bridge, check the baseboard; nvidia-smi nvlink -s "
        "shows each link, nvidia-smi nvlink -e its errors";
    if (listed == 0 && expected <= 0) continue;
    CheckItem item;
    if (!g.links_down.empty()) {
      item = {"nvlink",
              CheckStatus::kFail,
              {g.index},
              tag + "NVLink " + LinkList(g.links_down) + " down (" + std::to_string(up) +
                  " of " + std::to_string(listed) + " up" +
                  (expected > 0 && static_cast<size_t>(expected) != listed
                       ? ", " + PresetWord(e) + " has " + std::to_string(expected)
                       : "") +
                  ")",
              fix};
    } else if (expected > 0 && up < static_cast<size_t>(expected)) {
      item = {"nvlink",
              CheckStatus::kFail,
              {g.index},
              tag + Plural(up, "NVLink") + " up, expected " + std::to_string(expected) +
                  " (" + PresetWord(e) + ")",
              fix};
    } else if (expected >= 0 && up > static_cast<size_t>(expected)) {
      item = {"nvlink",
              CheckStatus::kWarn,
              {g.index},
              tag + Plural(up, "NVLink") + " up where " + PresetWord(e) + " has " +
                  std::to_string(expected),
              "is this the node the preset describes? hachi topo show prints its links"};
    } else {
      item = {"nvlink",
              CheckStatus::kOk,
              {g.index},
              tag + std::to_string(up) + " of " + std::to_string(listed) + " NVLinks up",
              ""};
    }
    flagged[static_cast<size_t>(g.index)] = item.status == CheckStatus::kFail;
    if (Selected(only_gpu, g.index)) out.push_back(std::move(item));
  }
  // Pairs against the preset, where the GPUs' own counts do not already explain it
  // (links cabled to the wrong peer, a bridge on the wrong pair).
  const topo::Topology& t = r.topology;
  if (e.topology) {
    const int n = std::min(t.gpu_count(), e.topology->gpu_count());
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        if (!Selected(only_gpu, a) && !Selected(only_gpu, b)) continue;
        if (flagged[static_cast<size_t>(a)] || flagged[static_cast<size_t>(b)]) continue;
        const int have = t.link(a, b).nvlinks, want = e.topology->link(a, b).nvlinks;
        if (have == want) continue;
        out.push_back({"nvlink-pair",
                       have < want ? CheckStatus::kFail : CheckStatus::kWarn,
                       {a, b},
                       "GPUs " + std::to_string(a) + "-" + std::to_string(b) + ": " +
                           t.link(a, b).Label() + ", expected " +
                           e.topology->link(a, b).Label() + " (" + PresetWord(e) + ")",
                       "check the NVLink bridges or baseboard cabling of this pair; "
                       "hachi topo show prints the links"});
      }
    }
  }
  return out;
}

bool IsNvSwitchNode(const NvmlReadings& r, const Expectation& e) {
  if (e.topology) {
    return topo::Analyze(*e.topology).interconnect == topo::InterconnectClass::kNvSwitch;
  }
  if (topo::Analyze(r.topology).interconnect == topo::InterconnectClass::kNvSwitch) {
    return true;
  }
  return std::any_of(r.gpus.begin(), r.gpus.end(),
                     [](const GpuReadings& g) { return g.fabric.has_value(); });
}

std::vector<CheckItem> FabricChecks(const NvmlReadings& r, std::optional<bool> fm_running,
                                    int only_gpu) {
  std::vector<CheckItem> out;
  const std::string driver = r.driver_version.empty() ? "the driver's" : r.driver_version;
  if (!fm_running) {
    out.push_back({"fabric-manager",
                   CheckStatus::kWarn,
                   {},
                   "NVSwitch node, and /proc cannot be listed to find nv-fabricmanager",
                   "systemctl status nvidia-fabricmanager"});
  } else if (*fm_running) {
    out.push_back({"fabric-manager",
                   CheckStatus::kOk,
                   {},
                   "NVSwitch node; nv-fabricmanager runs",
                   ""});
  } else {
    out.push_back(
        {"fabric-manager",
         CheckStatus::kFail,
         {},
         "NVSwitch node without an nv-fabricmanager process: CUDA fails to initialise on "
         "HGX without it",
         "systemctl enable --now nvidia-fabricmanager (the package's version must match "
         "the driver, " +
             driver + ")"});
  }
  for (const GpuReadings& g : r.gpus) {
    if (!Selected(only_gpu, g.index) || !g.error.empty() || !g.fabric) continue;
    const std::string tag = Gpu(g.index) + ": ";
    const GpuReadings::Fabric& f = *g.fabric;
    if (f.state == nv::kGpuFabricCompleted && f.status == nv::kSuccess) {
      out.push_back({"fabric",
                     CheckStatus::kOk,
                     {g.index},
                     tag + "registered with the NVSwitch fabric",
                     ""});
    } else if (f.state == nv::kGpuFabricCompleted) {
      out.push_back({"fabric",
                     CheckStatus::kFail,
                     {g.index},
                     tag + "NVSwitch fabric registration failed (" + f.status_text + ")",
                     "restart nvidia-fabricmanager and read its log "
                     "(/var/log/fabricmanager.log); its version must match the driver, " +
                         driver});
    } else if (f.state == nv::kGpuFabricInProgress) {
      out.push_back({"fabric",
                     CheckStatus::kWarn,
                     {g.index},
                     tag + "NVSwitch fabric registration in progress",
                     "run hachi doctor again in a minute; if it stays, restart "
                     "nvidia-fabricmanager"});
    } else {
      out.push_back(
          {"fabric",
           CheckStatus::kFail,
           {g.index},
           tag + "not registered with the NVSwitch fabric (not started)",
           "systemctl enable --now nvidia-fabricmanager (version " + driver + ")"});
    }
  }
  return out;
}

std::vector<CheckItem> TopologyChecks(const NvmlReadings& r,
                                      const std::vector<CheckItem>& nvlink_items,
                                      int only_gpu) {
  std::vector<CheckItem> out;
  if (r.topology.gpu_count() == 0) {
    if (!r.topology_error.empty()) {
      out.push_back({"topology",
                     CheckStatus::kWarn,
                     {},
                     "cannot read the topology: " + r.topology_error,
                     "hachi topo show says more"});
    }
    return out;
  }
  // A GPU the nvlink check already failed: the topology's view of the same links
  // (degraded-link, pcie-gpu: every pair with that GPU) would only repeat it.
  GpuSet explained;
  for (const CheckItem& c : nvlink_items) {
    if (c.status == CheckStatus::kFail) {
      for (int g : c.gpus) explained.Insert(g);
    }
  }
  for (const topo::Finding& f : topo::CheckTopology(r.topology)) {
    if (only_gpu >= 0 && !f.gpus.empty() && !f.gpus.contains(only_gpu)) continue;
    if ((f.code == "degraded-link" || f.code == "pcie-gpu") && !f.gpus.empty() &&
        !(f.gpus & explained).empty()) {
      continue;
    }
    if (f.code == "mig-no-instances") continue;  // the mig item says it, with the fix
    const CheckStatus s = f.severity == topo::Severity::kError     ? CheckStatus::kFail
                          : f.severity == topo::Severity::kWarning ? CheckStatus::kWarn
                                                                   : CheckStatus::kOk;
    out.push_back(
        {"topology", s, f.gpus.Indices(), f.code + ": " + f.message,
         s == CheckStatus::kOk ? "" : "hachi topo show prints the link matrix"});
  }
  if (out.empty()) {
    out.push_back({"topology",
                   CheckStatus::kOk,
                   {},
                   std::string(topo::InterconnectClassName(
                       topo::Analyze(r.topology).interconnect)) +
                       ", no anomalies (hachi topo check)",
                   ""});
  }
  return out;
}

}  // namespace hachi::diag
