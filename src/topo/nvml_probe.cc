#include "topo/nvml_probe.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "core/cpulist.h"
#include "core/strings.h"
#include "topo/nvml_api.h"
#include "topo/nvml_library.h"

namespace hachi::topo {
namespace {

using Api = NvmlApi;

// Failures of one query, gathered over all GPUs into one finding.
class QueryFailures {
 public:
  void Add(const std::string& query, int gpu, const std::string& error) {
    Entry& e = entries_[query];
    if (gpu >= 0) e.gpus.Insert(gpu);
    if (e.error.empty()) e.error = error;
  }
  void Report(Topology& t) const {
    for (const auto& [query, e] : entries_) {
      t.AddReadFinding({Severity::kWarning, "nvml-query-failed", e.gpus,
                        query + " failed" +
                            (e.gpus.empty() ? "" : " for GPU(s) " + e.gpus.ToString()) +
                            ": " + e.error + "; the field is left unknown"});
    }
  }

 private:
  struct Entry {
    GpuSet gpus;
    std::string error;
  };
  std::map<std::string, Entry> entries_;
};

using PciKey = std::tuple<unsigned, unsigned, unsigned>;  // domain, bus, device

PciePath PathOfLevel(nvml::TopologyLevel level) {
  switch (level) {
    case nvml::kTopologyInternal:  // two GPUs on one board: as close as PCIe gets
    case nvml::kTopologySingle:
      return PciePath::kPix;
    case nvml::kTopologyMultiple:
      return PciePath::kPxb;
    case nvml::kTopologyHostBridge:
      return PciePath::kPhb;
    case nvml::kTopologyNode:
      return PciePath::kNode;
    case nvml::kTopologySystem:
      return PciePath::kSys;
    default:
      return PciePath::kUnknown;
  }
}

// The NUMA node sysfs gives the GPU's PCI function: the CPU-side node, the one
// `nvidia-smi topo -m` shows as NUMA Affinity. -1 when unreadable or not set.
int SysfsNumaNode(const std::string& sysfs_root, const std::string& bus_id) {
  // NVML: "00000000:18:00.0"; sysfs: "0000:18:00.0", lower case.
  std::string bdf = ToLower(bus_id);
  size_t colon = bdf.find(':');
  if (colon == 8) bdf = bdf.substr(4);
  std::optional<std::string> text =
      ReadFile(sysfs_root + "/bus/pci/devices/" + bdf + "/numa_node", nullptr);
  if (!text) return -1;
  std::optional<long long> n = ParseInt(Trim(*text));
  return n && *n >= 0 && *n < 4096 ? static_cast<int>(*n) : -1;
}

// The NUMA node that holds every CPU of the GPU's affinity, from the kernel's node
// cpulists
// (/sys/devices/system/node/nodeN/cpulist); -1 when none or several do. This is how
// nvidia-smi fills NUMA Affinity where the PCI function has no node (seen in a VM with an
// H200: sysfs numa_node -1 and nvmlDeviceGetNumaNodeId "Not Supported", nvidia-smi "0").
int NumaNodeOfCpus(const std::string& sysfs_root, const std::string& affinity) {
  if (affinity.empty()) return -1;
  Result<std::vector<int>> cpus = ParseCpuList(affinity);
  if (!cpus.ok() || cpus->empty()) return -1;
  int found = -1;
  for (int node = 0; node < 4096; ++node) {
    std::optional<std::string> text = ReadFile(
        sysfs_root + "/devices/system/node/node" + std::to_string(node) + "/cpulist",
        nullptr);
    if (!text) {
      if (node >= 64)
        break;  // ids below 64 may have holes; past that the first gap ends it
      continue;
    }
    Result<std::vector<int>> mine = ParseCpuList(Trim(*text));
    if (!mine.ok()) continue;
    const bool holds_all =
        std::includes(mine->begin(), mine->end(), cpus->begin(), cpus->end());
    if (holds_all) {
      if (found >= 0) return -1;
      found = node;
    }
  }
  return found;
}

std::string CpuAffinity(const Api& api, nvml::Device dev, QueryFailures& failures,
                        int gpu) {
  // 64 longs: 4096 CPUs, beyond any current server.
  constexpr unsigned kWords = 64;
  unsigned long set[kWords] = {};
  nvml::Return rc = api.get_cpu_affinity(dev, kWords, set);
  if (rc != nvml::kSuccess) {
    failures.Add("nvmlDeviceGetCpuAffinity", gpu, api.ErrorText(rc));
    return "";
  }
  std::vector<int> cpus;
  constexpr int kBits = 8 * sizeof(unsigned long);
  for (unsigned w = 0; w < kWords; ++w) {
    for (int b = 0; b < kBits; ++b) {
      if ((set[w] >> b) & 1UL) cpus.push_back(static_cast<int>(w) * kBits + b);
    }
  }
  return cpus.empty() ? "" : FormatCpuList(cpus);
}

// The optional symbols whose absence the probe reports
// (nvmlDeviceGetNvLinkRemoteDeviceType only confirms what the bus id already says, and
// older drivers lack it: not reported).
std::vector<std::string> MissingOptional(const Api& api) {
  const std::pair<const char*, bool> optional[] = {
      {"nvmlDeviceGetName", api.get_name != nullptr},
      {"nvmlDeviceGetUUID", api.get_uuid != nullptr},
      {"nvmlDeviceGetMemoryInfo", api.get_memory != nullptr},
      {"nvmlDeviceGetPciInfo_v3", api.get_pci != nullptr},
      {"nvmlDeviceGetCpuAffinity", api.get_cpu_affinity != nullptr},
      {"nvmlDeviceGetNumaNodeId", api.get_numa != nullptr},
      {"nvmlDeviceGetTopologyCommonAncestor", api.get_ancestor != nullptr},
      {"nvmlDeviceGetNvLinkState", api.get_nvlink_state != nullptr},
      {"nvmlDeviceGetNvLinkRemotePciInfo_v2", api.get_nvlink_remote_pci != nullptr},
  };
  std::vector<std::string> missing;
  for (const auto& [name, found] : optional) {
    if (!found) missing.push_back(name);
  }
  return missing;
}

// Name, UUID, memory, bus id, CPU affinity and NUMA node of GPU i.
void ReadGpu(const Api& api, const NvmlProbeOptions& opts, nvml::Device dev, Gpu& gpu,
             std::optional<PciKey>& key, QueryFailures& failures) {
  const int i = gpu.index;
  nvml::Return rc;
  if (api.get_name) {
    char name[nvml::kDeviceNameBufferSize] = {};
    rc = api.get_name(dev, name, sizeof(name));
    if (rc == nvml::kSuccess)
      gpu.model = name;
    else
      failures.Add("nvmlDeviceGetName", i, api.ErrorText(rc));
  }
  if (api.get_uuid) {
    char uuid[nvml::kDeviceUuidBufferSize] = {};
    rc = api.get_uuid(dev, uuid, sizeof(uuid));
    if (rc == nvml::kSuccess)
      gpu.uuid = uuid;
    else
      failures.Add("nvmlDeviceGetUUID", i, api.ErrorText(rc));
  }
  if (api.get_memory) {
    nvml::Memory mem = {};
    rc = api.get_memory(dev, &mem);
    if (rc == nvml::kSuccess)
      gpu.memory_mib = static_cast<int64_t>(mem.total >> 20);
    else
      failures.Add("nvmlDeviceGetMemoryInfo", i, api.ErrorText(rc));
  }
  if (api.get_pci) {
    nvml::PciInfo pci = {};
    rc = api.get_pci(dev, &pci);
    if (rc == nvml::kSuccess) {
      pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
      gpu.pci_bus_id = pci.bus_id;
      key = PciKey{pci.domain, pci.bus, pci.device};
    } else {
      failures.Add("nvmlDeviceGetPciInfo_v3", i, api.ErrorText(rc));
    }
  }
  if (api.get_cpu_affinity) gpu.cpu_affinity = CpuAffinity(api, dev, failures, i);
  // sysfs first: nvmlDeviceGetNumaNodeId answers only where the GPU's own memory is a
  // NUMA node (coherent platforms), and then names that node, not the CPU-side one.
  if (!gpu.pci_bus_id.empty())
    gpu.numa_node = SysfsNumaNode(opts.sysfs_root, gpu.pci_bus_id);
  if (gpu.numa_node < 0 && api.get_numa) {
    unsigned int node = 0;
    if (api.get_numa(dev, &node) == nvml::kSuccess && node < 4096) {
      gpu.numa_node = static_cast<int>(node);
    }
  }
  if (gpu.numa_node < 0)
    gpu.numa_node = NumaNodeOfCpus(opts.sysfs_root, gpu.cpu_affinity);
}

// The profile in a MIG device's name: "NVIDIA A100-SXM4-40GB MIG 1g.5gb" -> "1g.5gb"
// (older drivers leave out "NVIDIA "); empty when the name has no " MIG ".
std::string ProfileOfMigName(std::string_view name) {
  const size_t at = name.rfind(" MIG ");
  if (at == std::string_view::npos) return "";
  return std::string(Trim(name.substr(at + 5)));
}

// The MIG devices of a GPU whose MIG mode is on now (a change pending a reset changes
// nothing yet). False when they could not all be listed (the library lacks the calls, or
// one failed: a query failure says which).
bool ReadMig(const Api& api, nvml::Device dev, Gpu& gpu, QueryFailures& failures) {
  const int i = gpu.index;
  unsigned now = 0, pending = 0;
  // GPUs without MIG answer "Not Supported": MIG off, not a failure.
  if (!api.get_mig_mode || api.get_mig_mode(dev, &now, &pending) != nvml::kSuccess ||
      now != nvml::kDeviceMigEnable) {
    return true;
  }
  gpu.mig_enabled = true;
  if (!api.has_mig()) return false;
  unsigned max = 0;
  if (nvml::Return rc = api.get_max_mig_count(dev, &max); rc != nvml::kSuccess) {
    failures.Add("nvmlDeviceGetMaxMigDeviceCount", i, api.ErrorText(rc));
    return false;
  }
  bool complete = true;
  // Indices run to the most the GPU could hold (7 on A100/H100); the slots of a layout
  // with fewer devices answer NOT_FOUND.
  for (unsigned k = 0; k < max && k < 64; ++k) {
    nvml::Device mig = nullptr;
    nvml::Return rc = api.get_mig_handle(dev, k, &mig);
    if (rc == nvml::kErrorNotFound) continue;
    if (rc != nvml::kSuccess) {
      failures.Add("nvmlDeviceGetMigDeviceHandleByIndex", i, api.ErrorText(rc));
      complete = false;
      continue;
    }
    MigDevice m;
    if (char name[nvml::kDeviceNameBufferSize] = {};
        api.get_name && (rc = api.get_name(mig, name, sizeof(name))) == nvml::kSuccess) {
      m.profile = ProfileOfMigName(name);
      if (m.profile.empty()) {
        failures.Add("MIG device name", i,
                     "'" + std::string(name) + "' has no ' MIG <profile>'");
      }
    } else if (api.get_name) {
      failures.Add("nvmlDeviceGetName (MIG device)", i, api.ErrorText(rc));
    }
    if (char uuid[nvml::kDeviceUuidBufferSize] = {};
        api.get_uuid && (rc = api.get_uuid(mig, uuid, sizeof(uuid))) == nvml::kSuccess) {
      m.uuid = uuid;
    } else if (api.get_uuid) {
      failures.Add("nvmlDeviceGetUUID (MIG device)", i, api.ErrorText(rc));
    }
    if (nvml::Memory mem = {};
        api.get_memory && api.get_memory(mig, &mem) == nvml::kSuccess) {
      m.memory_mib = static_cast<int64_t>(mem.total >> 20);
    }
    if (unsigned id = 0;
        api.get_gpu_instance_id && api.get_gpu_instance_id(mig, &id) == nvml::kSuccess) {
      m.gpu_instance = static_cast<int>(id);
    }
    if (unsigned id = 0; api.get_compute_instance_id &&
                         api.get_compute_instance_id(mig, &id) == nvml::kSuccess) {
      m.compute_instance = static_cast<int>(id);
    }
    gpu.mig_devices.push_back(std::move(m));
  }
  return complete;
}

// Findings about MIG GPUs: those that cannot run jobs, those whose devices are unknown.
void ReportMig(const std::string& path, GpuSet unlisted, Topology& t) {
  GpuSet empty;
  for (const Gpu& g : t.gpus()) {
    if (g.mig_enabled && g.mig_devices.empty() && !unlisted.contains(g.index)) {
      empty.Insert(g.index);
    }
  }
  if (!empty.empty()) {
    t.AddReadFinding(
        {Severity::kWarning, "mig-no-instances", empty,
         "GPU(s) " + empty.ToString() +
             ": MIG on, no instances: the GPU cannot run jobs until instances are "
             "created (nvidia-smi mig -cgi PROFILES -C), or MIG is turned off"});
  }
  if (!unlisted.empty()) {
    t.AddReadFinding(
        {Severity::kWarning, "mig-unreadable", unlisted,
         "GPU(s) " + unlisted.ToString() + " are in MIG mode but " + path +
             " could not list their MIG devices (it lacks "
             "nvmlDeviceGetMaxMigDeviceCount or nvmlDeviceGetMigDeviceHandleByIndex, an "
             "older driver, or they failed); those listed are kept, others unknown"});
  }
}

// Counts active NVLinks per GPU pair, and the links each GPU has into NVSwitches.
void ReadNvLinks(const Api& api, const std::vector<nvml::Device>& devs,
                 const std::map<PciKey, int>& gpu_by_pci, Topology& t,
                 QueryFailures& failures) {
  const int n = t.gpu_count();
  std::vector<int> direct(static_cast<size_t>(n) * n, 0), to_switch(n, 0);
  GpuSet unseen_peer, cpu_peer;
  for (int i = 0; i < n; ++i) {
    if (!devs[i]) continue;
    for (unsigned l = 0; l < nvml::kNvLinkMaxLinks; ++l) {
      nvml::EnableState active = nvml::kFeatureDisabled;
      // Links a GPU does not have answer "not supported"/"invalid argument": skip them.
      if (api.get_nvlink_state(devs[i], l, &active) != nvml::kSuccess) continue;
      if (active != nvml::kFeatureEnabled) continue;
      nvml::PciInfo remote = {};
      nvml::Return rc = api.get_nvlink_remote_pci(devs[i], l, &remote);
      if (rc != nvml::kSuccess) {
        failures.Add("nvmlDeviceGetNvLinkRemotePciInfo_v2", i, api.ErrorText(rc));
        continue;
      }
      auto peer = gpu_by_pci.find(PciKey{remote.domain, remote.bus, remote.device});
      if (peer != gpu_by_pci.end()) {
        if (peer->second != i) ++direct[i * n + peer->second];
        continue;
      }
      nvml::NvLinkDeviceType type = nvml::kNvLinkDeviceUnknown;
      if (api.get_nvlink_remote_type &&
          api.get_nvlink_remote_type(devs[i], l, &type) != nvml::kSuccess) {
        type = nvml::kNvLinkDeviceUnknown;
      }
      if (type == nvml::kNvLinkDeviceGpu) {
        unseen_peer.Insert(i);  // e.g. a container that sees only some of the GPUs
      } else if (type == nvml::kNvLinkDeviceIbmNpu) {
        cpu_peer.Insert(i);
      } else {
        ++to_switch[i];
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      Link l = t.link(i, j);
      // Through NVSwitches a pair gets what the less-connected of the two brings.
      int via_switch = (to_switch[i] > 0 && to_switch[j] > 0)
                           ? std::min(to_switch[i], to_switch[j])
                           : 0;
      l.nvlinks = direct[i * n + j] + via_switch;
      t.SetLink(i, j, l);
    }
  }
  if (!unseen_peer.empty()) {
    t.AddReadFinding({Severity::kInfo, "nvlink-peer-not-visible", unseen_peer,
                      "GPU(s) " + unseen_peer.ToString() +
                          " have NVLinks to GPUs that NVML does not list (hidden from "
                          "this container or process); those links are not counted"});
  }
  if (!cpu_peer.empty()) {
    t.AddReadFinding(
        {Severity::kInfo, "nvlink-to-cpu", cpu_peer,
         "GPU(s) " + cpu_peer.ToString() +
             " have NVLinks to the CPU (IBM NPU); not counted as GPU links"});
  }
}

}  // namespace

std::string NvmlLibraryPath(const NvmlProbeOptions& opts) {
  return ResolveNvmlLibrary(opts.library);
}

Result<Topology> ProbeNvml(const NvmlProbeOptions& opts) {
  const std::string path = NvmlLibraryPath(opts);
  Result<const Api*> loaded = LoadNvml(path);
  if (!loaded.ok()) return loaded.status();
  const Api& api = **loaded;
  const std::vector<std::string> missing = MissingOptional(api);

  nvml::Return rc = api.init();
  if (rc != nvml::kSuccess) {
    return Unavailable("NVML (" + path + ") failed to initialise: " + api.ErrorText(rc));
  }
  struct Shutdown {
    nvml::ShutdownFn* fn;
    ~Shutdown() { fn(); }
  } shutdown{api.shutdown};

  unsigned int count = 0;
  rc = api.get_count(&count);
  if (rc != nvml::kSuccess) {
    return Unavailable("NVML (" + path + ") cannot count GPUs: " + api.ErrorText(rc));
  }
  if (count == 0) return Unavailable("NVML (" + path + ") sees no GPUs");
  if (count > static_cast<unsigned>(GpuSet::kMaxGpus)) {
    return Unavailable("NVML reports " + std::to_string(count) +
                       " GPUs; Hachi handles at most 64 per node");
  }

  const int n = static_cast<int>(count);
  Topology t(n);
  t.set_source("NVML (" + path + ")");
  if (!missing.empty()) {
    std::string list;
    for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
    t.AddReadFinding(
        {Severity::kWarning, "nvml-missing-symbol", GpuSet(),
         path + " lacks " + list + " (older driver?); what they read is left unknown"});
  }
  QueryFailures failures;
  GpuSet mig_unlisted;
  std::vector<nvml::Device> devs(n, nullptr);
  std::map<PciKey, int> gpu_by_pci;
  for (int i = 0; i < n; ++i) {
    rc = api.get_handle(static_cast<unsigned>(i), &devs[i]);
    if (rc != nvml::kSuccess) {
      devs[i] = nullptr;
      GpuSet gpu;
      gpu.Insert(i);
      t.AddReadFinding({Severity::kError, "nvml-gpu-unreadable", gpu,
                        "NVML cannot open GPU " + std::to_string(i) + ": " +
                            api.ErrorText(rc) + "; it may have fallen off the bus"});
      continue;
    }
    std::optional<PciKey> key;
    ReadGpu(api, opts, devs[i], t.mutable_gpu(i), key, failures);
    if (key) gpu_by_pci[*key] = i;
    if (!ReadMig(api, devs[i], t.mutable_gpu(i), failures)) mig_unlisted.Insert(i);
  }
  ReportMig(path, mig_unlisted, t);
  if (api.get_ancestor) {
    for (int i = 0; i < n; ++i) {
      for (int j = i + 1; j < n; ++j) {
        if (!devs[i] || !devs[j]) continue;
        nvml::TopologyLevel level = 0;
        rc = api.get_ancestor(devs[i], devs[j], &level);
        if (rc != nvml::kSuccess) {
          failures.Add("nvmlDeviceGetTopologyCommonAncestor", i, api.ErrorText(rc));
          continue;
        }
        t.SetSymmetricLink(i, j, {0, PathOfLevel(level)});
      }
    }
  }
  if (api.get_nvlink_state && api.get_nvlink_remote_pci) {
    ReadNvLinks(api, devs, gpu_by_pci, t, failures);
  }
  failures.Report(t);
  return t;
}

}  // namespace hachi::topo
