// A fake NVML (built as libnvidia-ml.so.1) for tests and CI machines without GPUs.
// It answers the NVML calls of topo/nvml_api.h for the topology described by the Hachi
// topology file named by $HACHI_FAKE_NVML_TOPOLOGY, read at nvmlInit_v2.
//
// NVLinks are modelled the way the hardware reports them: when every GPU pair has the
// same NV<n> the node is taken to be NVSwitch-based, and each GPU gets n links whose
// remote PCI info is an NVSwitch's bus id; otherwise (DGX-1 mesh, bridged pairs) each
// NV<n> pair gives n links whose remote PCI info is the peer GPU's bus id.
//
// Other knobs, for error paths:
//   HACHI_FAKE_NVML_INIT_ERROR=<nvmlReturn_t>  nvmlInit_v2 fails with that code.
//   HACHI_FAKE_NVML_UNSUPPORTED=<fn>,<fn>      those functions answer "Not Supported".
// Not thread-safe: tests call it from one thread.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/cpulist.h"
#include "core/strings.h"
#include "topo/nvml_api.h"
#include "topo/topology_file.h"

namespace nvml = hachi::topo::nvml;

struct hachi::topo::nvml::DeviceOpaque {
  int index;
};

namespace {

struct Remote {
  bool is_switch = false;
  int peer = -1;  // GPU index, or the NVSwitch number when is_switch
};

struct State {
  int init_count = 0;
  std::string error;  // why the last nvmlInit_v2 failed with kErrorUnknown
  hachi::topo::Topology topo;
  std::vector<nvml::DeviceOpaque> devices;
  std::vector<std::string> bus_ids;
  std::vector<std::vector<Remote>> links;  // per GPU, per NVLink
  std::vector<std::string> switch_bus_ids;
  std::set<std::string> unsupported;
};

State& S() {
  static State state;
  return state;
}

bool Unsupported(const char* fn) { return S().unsupported.count(fn) > 0; }

// "00000000:18:00.0" -> domain, bus, device.
void FillPci(const std::string& bus_id, nvml::PciInfo* pci) {
  std::memset(pci, 0, sizeof(*pci));
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function);
  pci->domain = domain;
  pci->bus = bus;
  pci->device = device;
  pci->pci_device_id = 0x000010DE;  // NVIDIA's vendor id; the device id is left 0
  std::snprintf(pci->bus_id, sizeof(pci->bus_id), "%s", bus_id.c_str());
  std::snprintf(pci->bus_id_legacy, sizeof(pci->bus_id_legacy), "%04X:%02X:%02X.%X",
                domain & 0xFFFF, bus, device, function);
}

// Builds the per-GPU NVLink table from the topology's link matrix.
void BuildLinks(State& s) {
  const int n = s.topo.gpu_count();
  int common = n > 1 ? s.topo.link(0, 1).nvlinks : 0;
  bool all_same = common > 0;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i != j && s.topo.link(i, j).nvlinks != common) all_same = false;
    }
  }
  s.links.assign(n, {});
  if (all_same) {
    // HGX H100 has 4 NVSwitch chips; A100/HGX-2 baseboards have 6.
    const int switches = common == 18 ? 4 : 6;
    std::set<std::string> used(s.bus_ids.begin(), s.bus_ids.end());
    for (unsigned bus = 0xFF; s.switch_bus_ids.size() < static_cast<size_t>(switches);
         --bus) {
      char id[32];
      std::snprintf(id, sizeof(id), "00000000:%02X:00.0", bus);
      if (!used.count(id)) s.switch_bus_ids.push_back(id);
    }
    for (int i = 0; i < n; ++i) {
      for (int l = 0; l < common && l < static_cast<int>(nvml::kNvLinkMaxLinks); ++l) {
        s.links[i].push_back({true, l % switches});
      }
    }
    return;
  }
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      for (int k = 0; k < s.topo.link(i, j).nvlinks; ++k) {
        if (s.links[i].size() < nvml::kNvLinkMaxLinks) s.links[i].push_back({false, j});
      }
    }
  }
}

int DeviceIndex(nvml::Device d) {
  State& s = S();
  if (s.init_count == 0 || !d) return -1;
  int i = d->index;
  return i >= 0 && i < s.topo.gpu_count() ? i : -1;
}

const Remote* LinkOf(nvml::Device d, unsigned link) {
  int i = DeviceIndex(d);
  if (i < 0 || link >= S().links[i].size()) return nullptr;
  return &S().links[i][link];
}

}  // namespace

#define FAKE_NVML_API extern "C" __attribute__((visibility("default")))

FAKE_NVML_API nvml::Return nvmlInit_v2() {
  State& s = S();
  if (const char* e = std::getenv("HACHI_FAKE_NVML_INIT_ERROR"); e && *e) {
    return std::atoi(e);
  }
  if (s.init_count > 0) {
    ++s.init_count;
    return nvml::kSuccess;
  }
  const char* path = std::getenv("HACHI_FAKE_NVML_TOPOLOGY");
  if (!path || !*path) {
    s.error = "fake NVML: HACHI_FAKE_NVML_TOPOLOGY is not set";
    return nvml::kErrorUnknown;
  }
  auto file = hachi::topo::ReadTopologyFile(path);
  if (!file.ok()) {
    s.error = "fake NVML: " + file.status().message();
    return nvml::kErrorUnknown;
  }
  s = State();
  s.topo = std::move(file->topology);
  const int n = s.topo.gpu_count();
  for (int i = 0; i < n; ++i) {
    s.devices.push_back({i});
    std::string id = s.topo.gpu(i).pci_bus_id;
    if (id.empty()) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "00000000:%02X:00.0", 0x10 + i);
      id = buf;
    }
    s.bus_ids.push_back(id);
  }
  if (const char* u = std::getenv("HACHI_FAKE_NVML_UNSUPPORTED")) {
    for (std::string_view fn : hachi::Split(u, ','))
      s.unsupported.insert(std::string(fn));
  }
  BuildLinks(s);
  s.init_count = 1;
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlShutdown() {
  if (S().init_count == 0) return nvml::kErrorUninitialized;
  --S().init_count;
  return nvml::kSuccess;
}

FAKE_NVML_API const char* nvmlErrorString(nvml::Return rc) {
  switch (rc) {
    case nvml::kSuccess:
      return "Success";
    case nvml::kErrorUninitialized:
      return "Uninitialized";
    case nvml::kErrorInvalidArgument:
      return "Invalid Argument";
    case nvml::kErrorNotSupported:
      return "Not Supported";
    case nvml::kErrorNotFound:
      return "Not Found";
    case nvml::kErrorInsufficientSize:
      return "Insufficient Size";
    case nvml::kErrorDriverNotLoaded:
      return "Driver Not Loaded";
    case nvml::kErrorLibraryNotFound:
      return "NVML Shared Library Not Found";
    case nvml::kErrorUnknown:
      return S().error.empty() ? "Unknown Error" : S().error.c_str();
    default:
      return "Unknown Error";
  }
}

FAKE_NVML_API nvml::Return nvmlDeviceGetCount_v2(unsigned int* count) {
  if (S().init_count == 0) return nvml::kErrorUninitialized;
  if (!count) return nvml::kErrorInvalidArgument;
  *count = static_cast<unsigned>(S().topo.gpu_count());
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetHandleByIndex_v2(unsigned int i,
                                                         nvml::Device* d) {
  State& s = S();
  if (s.init_count == 0) return nvml::kErrorUninitialized;
  if (!d || i >= s.devices.size()) return nvml::kErrorInvalidArgument;
  *d = &s.devices[i];
  return nvml::kSuccess;
}

namespace {
nvml::Return CopyString(const std::string& v, char* out, unsigned int size) {
  if (!out) return nvml::kErrorInvalidArgument;
  if (v.size() + 1 > size) return nvml::kErrorInsufficientSize;
  std::memcpy(out, v.c_str(), v.size() + 1);
  return nvml::kSuccess;
}
}  // namespace

FAKE_NVML_API nvml::Return nvmlDeviceGetName(nvml::Device d, char* name, unsigned int n) {
  int i = DeviceIndex(d);
  if (i < 0) return nvml::kErrorInvalidArgument;
  if (Unsupported("nvmlDeviceGetName")) return nvml::kErrorNotSupported;
  return CopyString(S().topo.gpu(i).model, name, n);
}

FAKE_NVML_API nvml::Return nvmlDeviceGetUUID(nvml::Device d, char* uuid, unsigned int n) {
  int i = DeviceIndex(d);
  if (i < 0) return nvml::kErrorInvalidArgument;
  if (Unsupported("nvmlDeviceGetUUID")) return nvml::kErrorNotSupported;
  return CopyString(S().topo.gpu(i).uuid, uuid, n);
}

FAKE_NVML_API nvml::Return nvmlDeviceGetMemoryInfo(nvml::Device d, nvml::Memory* m) {
  int i = DeviceIndex(d);
  if (i < 0 || !m) return nvml::kErrorInvalidArgument;
  m->total = static_cast<unsigned long long>(S().topo.gpu(i).memory_mib) << 20;
  m->free = m->total;
  m->used = 0;
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetPciInfo_v3(nvml::Device d, nvml::PciInfo* pci) {
  int i = DeviceIndex(d);
  if (i < 0 || !pci) return nvml::kErrorInvalidArgument;
  FillPci(S().bus_ids[i], pci);
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetCpuAffinity(nvml::Device d, unsigned int size,
                                                    unsigned long* set) {
  int i = DeviceIndex(d);
  if (i < 0 || !set) return nvml::kErrorInvalidArgument;
  const std::string& list = S().topo.gpu(i).cpu_affinity;
  if (list.empty() || Unsupported("nvmlDeviceGetCpuAffinity")) {
    return nvml::kErrorNotSupported;
  }
  auto cpus = hachi::ParseCpuList(list);
  if (!cpus.ok()) return nvml::kErrorUnknown;
  std::memset(set, 0, size * sizeof(unsigned long));
  constexpr unsigned kBits = 8 * sizeof(unsigned long);
  for (int c : *cpus) {
    unsigned cpu = static_cast<unsigned>(c);
    if (cpu / kBits < size) set[cpu / kBits] |= 1UL << (cpu % kBits);
  }
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetNumaNodeId(nvml::Device d, unsigned int* node) {
  int i = DeviceIndex(d);
  if (i < 0 || !node) return nvml::kErrorInvalidArgument;
  int numa = S().topo.gpu(i).numa_node;
  if (numa < 0 || Unsupported("nvmlDeviceGetNumaNodeId")) return nvml::kErrorNotSupported;
  *node = static_cast<unsigned>(numa);
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetTopologyCommonAncestor(
    nvml::Device a, nvml::Device b, nvml::TopologyLevel* level) {
  int i = DeviceIndex(a), j = DeviceIndex(b);
  if (i < 0 || j < 0 || !level) return nvml::kErrorInvalidArgument;
  if (Unsupported("nvmlDeviceGetTopologyCommonAncestor")) return nvml::kErrorNotSupported;
  if (i == j) {
    *level = nvml::kTopologyInternal;
    return nvml::kSuccess;
  }
  using hachi::topo::PciePath;
  switch (S().topo.link(i, j).pcie) {
    case PciePath::kPix:
      *level = nvml::kTopologySingle;
      break;
    case PciePath::kPxb:
      *level = nvml::kTopologyMultiple;
      break;
    case PciePath::kPhb:
      *level = nvml::kTopologyHostBridge;
      break;
    case PciePath::kNode:
      *level = nvml::kTopologyNode;
      break;
    case PciePath::kSys:
      *level = nvml::kTopologySystem;
      break;
    case PciePath::kUnknown:
      return nvml::kErrorNotSupported;
  }
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetNvLinkState(nvml::Device d, unsigned int link,
                                                    nvml::EnableState* active) {
  int i = DeviceIndex(d);
  if (i < 0 || !active) return nvml::kErrorInvalidArgument;
  if (link >= nvml::kNvLinkMaxLinks) return nvml::kErrorInvalidArgument;
  // GPUs without NVLink answer "not supported" for every link, as real ones do.
  if (S().links[i].empty() || link >= S().links[i].size())
    return nvml::kErrorNotSupported;
  *active = nvml::kFeatureEnabled;
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetNvLinkRemotePciInfo_v2(nvml::Device d,
                                                               unsigned int link,
                                                               nvml::PciInfo* pci) {
  const Remote* r = LinkOf(d, link);
  if (!r || !pci) return nvml::kErrorInvalidArgument;
  FillPci(r->is_switch ? S().switch_bus_ids[r->peer] : S().bus_ids[r->peer], pci);
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetNvLinkRemoteDeviceType(
    nvml::Device d, unsigned int link, nvml::NvLinkDeviceType* type) {
  const Remote* r = LinkOf(d, link);
  if (!r || !type) return nvml::kErrorInvalidArgument;
  if (Unsupported("nvmlDeviceGetNvLinkRemoteDeviceType")) return nvml::kErrorNotSupported;
  *type = r->is_switch ? nvml::kNvLinkDeviceSwitch : nvml::kNvLinkDeviceGpu;
  return nvml::kSuccess;
}
