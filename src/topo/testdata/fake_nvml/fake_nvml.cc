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
//   HACHI_FAKE_NVML_UNSUPPORTED=<fn>,<fn>      those functions answer "Not Supported"
//                                              (any NVML name this file exports).
//   HACHI_FAKE_NVML_EVENTS=<file>              faults to inject (agent/gpu_health tests).
//
// The events file is read from its start after nvmlInit_v2, then lazily: every device
// call and every nvmlEventSetWait_v2 poll (each 10 ms) consumes the complete lines
// appended since, in order, each once; a missing file means no events yet. Lines:
//   xid <gpu> <n>                  an Xid n event (nvmlEventTypeXidCriticalError)
//   dbe <gpu> / sbe <gpu>          a double-bit / single-bit ECC event
//   lost <gpu>                     the GPU falls off the bus: from then on every call
//                                  for it (handle, name, temperature, register events...)
//                                  answers GPU_IS_LOST (15), and one Xid 79 event is
//                                  delivered, as the driver logs it
//   temp <gpu> <celsius>           nvmlDeviceGetTemperature's answer (default 40)
//   remap <gpu> pending|failure    nvmlDeviceGetRemappedRows reports is_pending or
//                                  failure_occurred (and one uncorrected row)
//   proc <gpu> <pid> <mib> [<gi> <ci>]   a compute process on the GPU (as
//                                  nvmlDeviceGetComputeRunningProcesses_v3 lists it),
//                                  using <mib> MiB, in MIG instance gi/ci if given (the
//                                  GPU's handle lists it with those ids, that MIG
//                                  device's handle lists it); again for the same pid:
//                                  new usage
//   noproc <gpu> <pid>             that process left the GPU
// What the jobs on a GPU do (utilisation sampling, agent/usage.h): series advance one
// value per nvmlDeviceGetUtilizationRates call (a sample), the last value repeats:
//   util <gpu> <pct>[,<pct>...] [<mem pct>[,...]]   SM (and memory) utilisation
//                                  (default 0)
//   memused <gpu> <mib>[,<mib>...]  device memory used (nvmlDeviceGetMemoryInfo; by
//                                  default the sum of its `proc` lines)
//   power <gpu> <watts>            nvmlDeviceGetPowerUsage (default 70)
//   smclock <gpu> <mhz>            nvmlDeviceGetClockInfo(SM) (default 1980)
//   pcietput <gpu> <tx> <rx>       nvmlDeviceGetPcieThroughput, KB/s (default 0)
//   nvlinktput <gpu> <kib/s>       the NVLink data counters (nvmlDeviceGetFieldValues
//                                  138/139, link 0) grow by this each second
//   nvlinkkib <gpu> <kib,...>      those counters' values instead, one per sample
// Hardware state (hachi doctor, diag/link_facts.h); a healthy node by default, with the
// PCIe generation and NVLink version of its GPU model (H100/H200/H800: gen 5 and NVLink
// 4.0, A100/A800/A30: gen 4 and 3.0, V100: gen 3 and 2.0, B200: gen 5 and 5.0, others
// gen 4 and 3.0), x16, persistence on, no ECC errors, MIG off, and on an NV18 NVSwitch
// node (Hopper) the fabric registration complete:
//   persistence <gpu> on|off        nvmlDeviceGetPersistenceMode
//   nvlink <gpu> <link> down|up     that NVLink's state (nvmlDeviceGetNvLinkState)
//   pcie <gpu> <gen> <width>        the link as trained now (max stays the model's)
//   replay <gpu> <n>                nvmlDeviceGetPcieReplayCounter
//   ecc <gpu> <uncorrected> [<corrected>]   aggregate (and volatile) ECC error counts
//   retired <gpu> <sbe> <dbe> [pending]     retired pages by cause, pending retirement
//   throttle <gpu> <mask>           clock event reasons (decimal or 0x hex)
//   mig <gpu> <now> <pending>       MIG mode, 0 or 1
//   migdev <gpu> [<profile>[/<gi>/<ci>] | - ...]   MIG on (now and pending) with these
//                                  MIG devices in slots 0, 1, ... ("-": an empty slot,
//                                  NOT_FOUND; none: MIG on without instances; at most 7).
//                                  GI ids default to slot + 1, CI ids to 0. A device's
//                                  name is "<GPU model> MIG <profile>", its memory the
//                                  profile's GB x 1024 x 0.95 MiB (A100's 1g.5gb: 4864),
//                                  its UUID "MIG-" + a hash of the GPU's UUID, gi and
//                                  ci. A GPU with "mig_enabled" in the topology file
//                                  starts in MIG mode with its "mig_devices" (missing
//                                  fields filled in the same way).
//   MIG device handles (nvmlDeviceGetMigDeviceHandleByIndex) answer nvmlDeviceGetName,
//   ...GetUUID, ...GetMemoryInfo, ...GetGpuInstanceId, ...GetComputeInstanceId,
//   ...IsMigDeviceHandle, ...GetDeviceHandleFromMigDeviceHandle and
//   ...GetComputeRunningProcesses_v3; other calls refuse them (invalid argument).
//   fabric <gpu> not-started|in-progress|completed|failed|unsupported
// $HACHI_FAKE_NVML_DRIVER sets the driver version (default 550.54.15).
// Blank lines and lines starting with '#' are skipped; others are reported on stderr.
// An event goes to every event set that had registered its GPU for its type when its
// line was read, as NVML fans events out and keeps none from before a registration
// (nvmlDeviceRegisterEvents reads the file first, so a line written before it is not
// delivered). Events injected for a GPU already lost are dropped.
//
// Thread-safe: one mutex guards the state; nvmlEventSetWait_v2 sleeps without it. The
// state is declared in fake_nvml_state.h; the MIG calls live in fake_nvml_mig.cc.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/cpulist.h"
#include "core/strings.h"
#include "topo/nvml_api.h"
#include "topo/testdata/fake_nvml/fake_nvml_state.h"
#include "topo/topology_file.h"

namespace fake_nvml {

// The event types the fake supports on every GPU.
constexpr unsigned long long kSupportedEvents =
    nvml::kEventSingleBitEccError | nvml::kEventDoubleBitEccError | nvml::kEventPState |
    nvml::kEventXidCriticalError | nvml::kEventClock;

State& S() {
  static State state;
  return state;
}

std::mutex& Mu() {
  static std::mutex mu;
  return mu;
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
  // A MIG handle is not a GPU: only the calls that answer for MIG devices take one.
  if (s.init_count == 0 || !d || IsMigHandle(d)) return -1;
  int i = d->index;
  return i >= 0 && i < s.topo.gpu_count() ? i : -1;
}

const Remote* LinkOf(nvml::Device d, unsigned link) {
  int i = DeviceIndex(d);
  if (i < 0 || link >= S().links[i].size()) return nullptr;
  return &S().links[i][link];
}

bool ModelHas(const std::string& model, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (model.find(n) != std::string::npos) return true;
  }
  return false;
}

// The PCIe generation and NVLink version of GPU i's model, and the fabric state of a
// Hopper NVSwitch node.
void SetHardwareDefaults(State& s) {
  const int n = s.topo.gpu_count();
  s.hardware.assign(n, Hardware());
  bool nvswitch18 = n > 1;
  for (int i = 0; i < n; ++i) {
    if (s.links[i].size() != 18 || s.links[i].empty() || !s.links[i][0].is_switch) {
      nvswitch18 = false;
    }
  }
  for (int i = 0; i < n; ++i) {
    Hardware& h = s.hardware[i];
    const std::string& m = s.topo.gpu(i).model;
    unsigned gen = 4;
    if (ModelHas(m, {"H100", "H200", "H800", "GH200"})) {
      gen = 5;
      h.nvlink_version = nvml::kNvLinkVersion4_0;
    } else if (ModelHas(m, {"B200", "B100", "GB200"})) {
      gen = 5;
      h.nvlink_version = nvml::kNvLinkVersion5_0;
    } else if (ModelHas(m, {"V100"})) {
      gen = 3;
      h.nvlink_version = nvml::kNvLinkVersion2_0;
    } else if (ModelHas(m, {"P100"})) {
      gen = 3;
      h.nvlink_version = nvml::kNvLinkVersion1_0;
    }
    h.pcie_gen = h.pcie_max_gen = gen;
    if (nvswitch18 && ModelHas(m, {"H100", "H200", "H800"})) {
      h.fabric = nvml::kGpuFabricCompleted;
    }
  }
}

// A hardware-state line (see the top of this file); false when `f` is not one.
bool ApplyHardwareLine(State& s, const std::vector<std::string>& f, int g) {
  Hardware& h = s.hardware[g];
  auto num = [&](size_t k) -> long long {
    if (k >= f.size()) return -1;
    char* end = nullptr;
    unsigned long long v = std::strtoull(f[k].c_str(), &end, 0);
    return end && *end == '\0' && !f[k].empty() ? static_cast<long long>(v) : -1;
  };
  const std::string& what = f[0];
  if (what == "persistence" && f.size() == 3 && (f[2] == "on" || f[2] == "off")) {
    h.persistence = f[2] == "on";
  } else if (what == "nvlink" && f.size() == 4 && num(2) >= 0 &&
             (f[3] == "down" || f[3] == "up")) {
    if (f[3] == "down") {
      h.links_down.insert(static_cast<unsigned>(num(2)));
    } else {
      h.links_down.erase(static_cast<unsigned>(num(2)));
    }
  } else if (what == "pcie" && f.size() == 4 && num(2) > 0 && num(3) > 0) {
    h.pcie_gen = static_cast<unsigned>(num(2));
    h.pcie_width = static_cast<unsigned>(num(3));
  } else if (what == "replay" && f.size() == 3 && num(2) >= 0) {
    h.replays = static_cast<unsigned>(num(2));
  } else if (what == "ecc" && (f.size() == 3 || f.size() == 4) && num(2) >= 0) {
    h.ecc_uncorrected = static_cast<unsigned long long>(num(2));
    if (f.size() == 4 && num(3) >= 0)
      h.ecc_corrected = static_cast<unsigned long long>(num(3));
  } else if (what == "retired" && (f.size() == 4 || f.size() == 5) && num(2) >= 0 &&
             num(3) >= 0 && (f.size() == 4 || f[4] == "pending")) {
    h.retired_sbe = static_cast<unsigned>(num(2));
    h.retired_dbe = static_cast<unsigned>(num(3));
    h.retired_pending = f.size() == 5;
  } else if (what == "throttle" && f.size() == 3 && num(2) >= 0) {
    h.throttle = static_cast<unsigned long long>(num(2));
  } else if (what == "mig" && f.size() == 4 && (num(2) == 0 || num(2) == 1) &&
             (num(3) == 0 || num(3) == 1)) {
    h.mig_now = static_cast<unsigned>(num(2));
    h.mig_pending = static_cast<unsigned>(num(3));
  } else if (what == "migdev") {
    return ApplyMigLine(s, f, g);
  } else if (what == "fabric" && f.size() == 3) {
    h.fabric_status = nvml::kSuccess;
    if (f[2] == "not-started") {
      h.fabric = nvml::kGpuFabricNotStarted;
    } else if (f[2] == "in-progress") {
      h.fabric = nvml::kGpuFabricInProgress;
    } else if (f[2] == "completed") {
      h.fabric = nvml::kGpuFabricCompleted;
    } else if (f[2] == "failed") {
      h.fabric = nvml::kGpuFabricCompleted;
      h.fabric_status = nvml::kErrorUnknown;
    } else if (f[2] == "unsupported") {
      h.fabric = nvml::kGpuFabricNotSupported;
    } else {
      return false;
    }
  } else {
    return false;
  }
  return true;
}

void ApplyEventLine(State& s, std::string_view line) {
  line = hachi::Trim(line);
  if (line.empty() || line[0] == '#') return;
  std::vector<std::string> f;
  for (std::string_view w : hachi::Split(line, ' ')) {
    if (!w.empty()) f.emplace_back(w);
  }
  // -1: absent or not a number (plain values: GCC warns on optionals here).
  auto number = [&](size_t k) -> long long {
    std::optional<long long> v = k < f.size() ? hachi::ParseInt(f[k]) : std::nullopt;
    return v && *v >= 0 ? *v : -1;
  };
  const long long gpu = number(1), arg = number(2);
  if (gpu < 0 || gpu >= s.topo.gpu_count()) {
    std::fprintf(stderr, "fake NVML: ignoring events line '%.*s'\n",
                 static_cast<int>(line.size()), line.data());
    return;
  }
  const int g = static_cast<int>(gpu);
  Health& h = s.health[g];
  const std::string& what = f[0];
  if (what == "xid" && f.size() == 3 && arg >= 0) {
    if (!h.lost) {
      s.events.push_back(
          {g, nvml::kEventXidCriticalError, static_cast<unsigned long long>(arg)});
    }
  } else if ((what == "dbe" || what == "sbe") && f.size() == 2) {
    if (!h.lost) {
      s.events.push_back(
          {g,
           what == "dbe" ? nvml::kEventDoubleBitEccError : nvml::kEventSingleBitEccError,
           0});
    }
  } else if (what == "lost" && f.size() == 2) {
    if (!h.lost) s.events.push_back({g, nvml::kEventXidCriticalError, 79});
    h.lost = true;
  } else if (what == "temp" && f.size() == 3 && arg >= 0) {
    h.temperature = static_cast<unsigned>(arg);
  } else if (what == "proc" && (f.size() == 4 || f.size() == 6) && arg > 0 &&
             number(3) >= 0 && (f.size() == 4 || (number(4) >= 0 && number(5) >= 0))) {
    Process& p = h.processes[static_cast<unsigned>(arg)];
    p.bytes = static_cast<unsigned long long>(number(3)) << 20;
    if (f.size() == 6) {
      p.gpu_instance = static_cast<unsigned>(number(4));
      p.compute_instance = static_cast<unsigned>(number(5));
    }
  } else if (ApplyActivityLine(h.activity, f)) {
  } else if (what == "noproc" && f.size() == 3 && arg > 0) {
    h.processes.erase(static_cast<unsigned>(arg));
  } else if (what == "remap" && f.size() == 3 &&
             (f[2] == "pending" || f[2] == "failure")) {
    (f[2] == "pending" ? h.remap_pending : h.remap_failure) = true;
  } else if (!ApplyHardwareLine(s, f, g)) {
    std::fprintf(stderr, "fake NVML: ignoring events line '%.*s'\n",
                 static_cast<int>(line.size()), line.data());
  }
}

// Consumes the complete lines appended to the events file since the last read.
void ReadEvents(State& s) {
  if (s.init_count == 0 || s.events_path.empty()) return;
  std::FILE* f = std::fopen(s.events_path.c_str(), "rb");
  if (!f) return;  // not written yet
  std::string text;
  if (std::fseek(f, s.events_offset, SEEK_SET) == 0) {
    char buf[4096];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, got);
  }
  std::fclose(f);
  // A line still being written (no newline yet) waits for the next read.
  const size_t end = text.rfind('\n');
  if (end == std::string::npos) return;
  s.events_offset += static_cast<long>(end + 1);
  for (std::string_view line :
       hachi::Split(std::string_view(text).substr(0, end), '\n')) {
    ApplyEventLine(s, line);
  }
}

// The index of a device the caller may use: reads pending events first, so that a
// "lost" line takes effect on the next call. kSuccess, or the error to return
// (invalid argument for a bad handle or before nvmlInit_v2, as DeviceIndex).
nvml::Return Use(nvml::Device d, int* index) {
  State& s = S();
  ReadEvents(s);
  *index = DeviceIndex(d);
  if (*index < 0) return nvml::kErrorInvalidArgument;
  if (s.health[*index].lost) return nvml::kErrorGpuIsLost;
  return nvml::kSuccess;
}

nvml::EventSetOpaque* FindSet(nvml::EventSet set) {
  for (const auto& p : S().sets) {
    if (p.get() == set) return p.get();
  }
  return nullptr;
}

nvml::Return CopyString(const std::string& v, char* out, unsigned int size) {
  if (!out) return nvml::kErrorInvalidArgument;
  if (v.size() + 1 > size) return nvml::kErrorInsufficientSize;
  std::memcpy(out, v.c_str(), v.size() + 1);
  return nvml::kSuccess;
}

}  // namespace fake_nvml

using namespace fake_nvml;  // NOLINT: the exported functions below are its users

FAKE_NVML_API nvml::Return nvmlInit_v2() {
  std::lock_guard<std::mutex> lock(Mu());
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
    s.mig_handles.emplace_back();
    for (unsigned k = 0; k < kMigSlots; ++k) {
      s.mig_handles.back()[k] = {i, static_cast<int>(k)};
    }
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
  s.health.assign(n, Health());
  SetHardwareDefaults(s);
  SeedMig(s);
  if (const char* d = std::getenv("HACHI_FAKE_NVML_DRIVER"); d && *d) s.driver = d;
  if (const char* e = std::getenv("HACHI_FAKE_NVML_EVENTS")) s.events_path = e;
  s.init_count = 1;
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlShutdown() {
  std::lock_guard<std::mutex> lock(Mu());
  if (S().init_count == 0) return nvml::kErrorUninitialized;
  --S().init_count;
  return nvml::kSuccess;
}

FAKE_NVML_API const char* nvmlErrorString(nvml::Return rc) {
  std::lock_guard<std::mutex> lock(Mu());
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
    case nvml::kErrorTimeout:
      return "Timeout";
    case nvml::kErrorLibraryNotFound:
      return "NVML Shared Library Not Found";
    case nvml::kErrorGpuIsLost:
      return "GPU is lost";
    case nvml::kErrorUnknown:
      return S().error.empty() ? "Unknown Error" : S().error.c_str();
    default:
      return "Unknown Error";
  }
}

FAKE_NVML_API nvml::Return nvmlDeviceGetCount_v2(unsigned int* count) {
  std::lock_guard<std::mutex> lock(Mu());
  if (S().init_count == 0) return nvml::kErrorUninitialized;
  if (!count) return nvml::kErrorInvalidArgument;
  *count = static_cast<unsigned>(S().topo.gpu_count());
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetHandleByIndex_v2(unsigned int i,
                                                         nvml::Device* d) {
  std::lock_guard<std::mutex> lock(Mu());
  State& s = S();
  if (s.init_count == 0) return nvml::kErrorUninitialized;
  if (!d || i >= s.devices.size()) return nvml::kErrorInvalidArgument;
  ReadEvents(s);
  // As the real driver: nvidia-smi's "Unable to determine the device handle for GPU
  // ...: GPU is lost".
  if (s.health[i].lost) return nvml::kErrorGpuIsLost;
  *d = &s.devices[i];
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetName(nvml::Device d, char* name, unsigned int n) {
  std::lock_guard<std::mutex> lock(Mu());
  if (IsMigHandle(d)) return MigName(d, name, n);
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  if (Unsupported("nvmlDeviceGetName")) return nvml::kErrorNotSupported;
  return CopyString(S().topo.gpu(i).model, name, n);
}

FAKE_NVML_API nvml::Return nvmlDeviceGetUUID(nvml::Device d, char* uuid, unsigned int n) {
  std::lock_guard<std::mutex> lock(Mu());
  if (IsMigHandle(d)) return MigUuid(d, uuid, n);
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  if (Unsupported("nvmlDeviceGetUUID")) return nvml::kErrorNotSupported;
  return CopyString(S().topo.gpu(i).uuid, uuid, n);
}

FAKE_NVML_API nvml::Return nvmlDeviceGetMemoryInfo(nvml::Device d, nvml::Memory* m) {
  std::lock_guard<std::mutex> lock(Mu());
  if (IsMigHandle(d)) return MigMemory(d, m);
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  if (!m) return nvml::kErrorInvalidArgument;
  m->total = static_cast<unsigned long long>(S().topo.gpu(i).memory_mib) << 20;
  const Health& h = S().health[i];
  const Activity& a = h.activity;
  unsigned long long used = 0;
  if (!a.mem_used_mib.empty()) {
    used = static_cast<unsigned long long>(
               Activity::At(a.mem_used_mib, a.tick > 0 ? a.tick - 1 : 0))
           << 20;
  } else {
    for (const auto& [pid, p] : h.processes) used += p.bytes;
  }
  m->used = std::min(used, m->total);
  m->free = m->total - m->used;
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetPciInfo_v3(nvml::Device d, nvml::PciInfo* pci) {
  std::lock_guard<std::mutex> lock(Mu());
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  if (!pci) return nvml::kErrorInvalidArgument;
  FillPci(S().bus_ids[i], pci);
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetCpuAffinity(nvml::Device d, unsigned int size,
                                                    unsigned long* set) {
  std::lock_guard<std::mutex> lock(Mu());
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  if (!set) return nvml::kErrorInvalidArgument;
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
  std::lock_guard<std::mutex> lock(Mu());
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  if (!node) return nvml::kErrorInvalidArgument;
  int numa = S().topo.gpu(i).numa_node;
  if (numa < 0 || Unsupported("nvmlDeviceGetNumaNodeId")) return nvml::kErrorNotSupported;
  *node = static_cast<unsigned>(numa);
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetTopologyCommonAncestor(
    nvml::Device a, nvml::Device b, nvml::TopologyLevel* level) {
  std::lock_guard<std::mutex> lock(Mu());
  int i = -1, j = -1;
  if (nvml::Return rc = Use(a, &i); rc != nvml::kSuccess) return rc;
  if (nvml::Return rc = Use(b, &j); rc != nvml::kSuccess) return rc;
  if (!level) return nvml::kErrorInvalidArgument;
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
  std::lock_guard<std::mutex> lock(Mu());
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  if (!active) return nvml::kErrorInvalidArgument;
  if (link >= nvml::kNvLinkMaxLinks) return nvml::kErrorInvalidArgument;
  // GPUs without NVLink answer "not supported" for every link, as real ones do.
  if (S().links[i].empty() || link >= S().links[i].size())
    return nvml::kErrorNotSupported;
  *active = S().hardware[i].links_down.count(link) ? nvml::kFeatureDisabled
                                                   : nvml::kFeatureEnabled;
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetNvLinkRemotePciInfo_v2(nvml::Device d,
                                                               unsigned int link,
                                                               nvml::PciInfo* pci) {
  std::lock_guard<std::mutex> lock(Mu());
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  const Remote* r = LinkOf(d, link);
  if (!r || !pci) return nvml::kErrorInvalidArgument;
  FillPci(r->is_switch ? S().switch_bus_ids[r->peer] : S().bus_ids[r->peer], pci);
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetNvLinkRemoteDeviceType(
    nvml::Device d, unsigned int link, nvml::NvLinkDeviceType* type) {
  std::lock_guard<std::mutex> lock(Mu());
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  const Remote* r = LinkOf(d, link);
  if (!r || !type) return nvml::kErrorInvalidArgument;
  if (Unsupported("nvmlDeviceGetNvLinkRemoteDeviceType")) return nvml::kErrorNotSupported;
  *type = r->is_switch ? nvml::kNvLinkDeviceSwitch : nvml::kNvLinkDeviceGpu;
  return nvml::kSuccess;
}

// Events and health: driven by $HACHI_FAKE_NVML_EVENTS (see the top of this file).

FAKE_NVML_API nvml::Return nvmlEventSetCreate(nvml::EventSet* set) {
  std::lock_guard<std::mutex> lock(Mu());
  State& s = S();
  if (s.init_count == 0) return nvml::kErrorUninitialized;
  if (!set) return nvml::kErrorInvalidArgument;
  if (Unsupported("nvmlEventSetCreate")) return nvml::kErrorNotSupported;
  s.sets.push_back(std::make_unique<nvml::EventSetOpaque>());
  *set = s.sets.back().get();
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlEventSetFree(nvml::EventSet set) {
  std::lock_guard<std::mutex> lock(Mu());
  State& s = S();
  if (s.init_count == 0) return nvml::kErrorUninitialized;
  if (Unsupported("nvmlEventSetFree")) return nvml::kErrorNotSupported;
  for (auto it = s.sets.begin(); it != s.sets.end(); ++it) {
    if (it->get() == set) {
      s.sets.erase(it);
      return nvml::kSuccess;
    }
  }
  return nvml::kErrorInvalidArgument;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetSupportedEventTypes(nvml::Device d,
                                                            unsigned long long* types) {
  std::lock_guard<std::mutex> lock(Mu());
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  if (!types) return nvml::kErrorInvalidArgument;
  if (Unsupported("nvmlDeviceGetSupportedEventTypes")) return nvml::kErrorNotSupported;
  *types = kSupportedEvents;
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceRegisterEvents(nvml::Device d,
                                                    unsigned long long types,
                                                    nvml::EventSet set) {
  std::lock_guard<std::mutex> lock(Mu());
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  nvml::EventSetOpaque* es = FindSet(set);
  if (!es) return nvml::kErrorInvalidArgument;
  // NVML refuses the whole mask when any type in it is unsupported.
  if (Unsupported("nvmlDeviceRegisterEvents") || (types & ~kSupportedEvents) != 0) {
    return nvml::kErrorNotSupported;
  }
  auto [reg, fresh] = es->registered.try_emplace(i);
  if (fresh) reg->second.since = S().events.size();
  reg->second.types |= types;
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlEventSetWait_v2(nvml::EventSet set, nvml::EventData* data,
                                               unsigned int timeout_ms) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(Mu());
      State& s = S();
      if (s.init_count == 0) return nvml::kErrorUninitialized;
      nvml::EventSetOpaque* es = FindSet(set);
      if (!es || !data) return nvml::kErrorInvalidArgument;
      if (Unsupported("nvmlEventSetWait_v2")) return nvml::kErrorNotSupported;
      ReadEvents(s);
      while (es->next < s.events.size()) {
        const size_t k = es->next++;
        const Injected& e = s.events[k];
        auto reg = es->registered.find(e.gpu);
        if (reg == es->registered.end() || (reg->second.types & e.type) == 0 ||
            k < reg->second.since) {
          continue;
        }
        *data = {};
        data->device = &s.devices[e.gpu];
        data->event_type = e.type;
        data->event_data = e.data;
        return nvml::kSuccess;
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return nvml::kErrorTimeout;
    // The file is polled; the lock is not held while sleeping.
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        deadline - now, std::chrono::milliseconds(10)));
  }
}

FAKE_NVML_API nvml::Return nvmlDeviceGetTemperature(nvml::Device d, int sensor,
                                                    unsigned int* celsius) {
  std::lock_guard<std::mutex> lock(Mu());
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  if (!celsius || sensor != nvml::kTemperatureGpu) return nvml::kErrorInvalidArgument;
  if (Unsupported("nvmlDeviceGetTemperature")) return nvml::kErrorNotSupported;
  *celsius = S().health[i].temperature;
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetComputeRunningProcesses_v3(
    nvml::Device d, unsigned int* count, nvml::ProcessInfo* infos) {
  std::lock_guard<std::mutex> lock(Mu());
  if (IsMigHandle(d)) return MigProcesses(d, count, infos);
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  if (!count) return nvml::kErrorInvalidArgument;
  if (Unsupported("nvmlDeviceGetComputeRunningProcesses_v3")) {
    return nvml::kErrorNotSupported;
  }
  const auto& procs = S().health[i].processes;
  // As NVML: too small a buffer (or none) gets the count needed.
  if (*count < procs.size() || (!infos && !procs.empty())) {
    *count = static_cast<unsigned>(procs.size());
    return nvml::kErrorInsufficientSize;
  }
  unsigned k = 0;
  // On a MIG GPU, as NVML answers root on the GPU's own handle: every process, with
  // the instance it runs in.
  for (const auto& [pid, p] : procs) {
    infos[k++] = nvml::ProcessInfo{pid, p.bytes, p.gpu_instance, p.compute_instance};
  }
  *count = k;
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetRemappedRows(nvml::Device d,
                                                     unsigned int* corrected,
                                                     unsigned int* uncorrected,
                                                     unsigned int* pending,
                                                     unsigned int* failure) {
  std::lock_guard<std::mutex> lock(Mu());
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  if (!corrected || !uncorrected || !pending || !failure) {
    return nvml::kErrorInvalidArgument;
  }
  if (Unsupported("nvmlDeviceGetRemappedRows")) return nvml::kErrorNotSupported;
  const Health& h = S().health[i];
  *corrected = 0;
  *uncorrected = h.remap_pending || h.remap_failure ? 1 : 0;
  *pending = h.remap_pending ? 1 : 0;
  *failure = h.remap_failure ? 1 : 0;
  return nvml::kSuccess;
}

// Hardware state: see the top of this file.

namespace {
// Locks, reads pending lines and finds the device; `fn` for HACHI_FAKE_NVML_UNSUPPORTED.
template <typename Body>
nvml::Return WithHardware(nvml::Device d, const char* fn, Body body) {
  std::lock_guard<std::mutex> lock(Mu());
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  if (Unsupported(fn)) return nvml::kErrorNotSupported;
  return body(S().hardware[i]);
}

// The driver's version, or NVML's ("12." + the driver's, as real ones are).
nvml::Return SystemString(const char* fn, bool nvml_version, char* out,
                          unsigned int size) {
  std::lock_guard<std::mutex> lock(Mu());
  if (S().init_count == 0) return nvml::kErrorUninitialized;
  if (Unsupported(fn)) return nvml::kErrorNotSupported;
  return CopyString(nvml_version ? "12." + S().driver : S().driver, out, size);
}
}  // namespace

FAKE_NVML_API nvml::Return nvmlSystemGetDriverVersion(char* out, unsigned int size) {
  return SystemString("nvmlSystemGetDriverVersion", false, out, size);
}

FAKE_NVML_API nvml::Return nvmlSystemGetNVMLVersion(char* out, unsigned int size) {
  return SystemString("nvmlSystemGetNVMLVersion", true, out, size);
}

FAKE_NVML_API nvml::Return nvmlSystemGetCudaDriverVersion_v2(int* version) {
  std::lock_guard<std::mutex> lock(Mu());
  if (S().init_count == 0) return nvml::kErrorUninitialized;
  if (!version) return nvml::kErrorInvalidArgument;
  if (Unsupported("nvmlSystemGetCudaDriverVersion_v2")) return nvml::kErrorNotSupported;
  *version = 12040;
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetPersistenceMode(nvml::Device d,
                                                        nvml::EnableState* mode) {
  return WithHardware(d, "nvmlDeviceGetPersistenceMode", [&](const Hardware& h) {
    if (!mode) return nvml::kErrorInvalidArgument;
    *mode = h.persistence ? nvml::kFeatureEnabled : nvml::kFeatureDisabled;
    return nvml::kSuccess;
  });
}

#define FAKE_NVML_UINT(name, field)                                    \
  FAKE_NVML_API nvml::Return name(nvml::Device d, unsigned int* out) { \
    return WithHardware(d, #name, [&](const Hardware& h) {             \
      if (!out) return nvml::kErrorInvalidArgument;                    \
      *out = h.field;                                                  \
      return nvml::kSuccess;                                           \
    });                                                                \
  }
FAKE_NVML_UINT(nvmlDeviceGetCurrPcieLinkGeneration, pcie_gen)
FAKE_NVML_UINT(nvmlDeviceGetCurrPcieLinkWidth, pcie_width)
FAKE_NVML_UINT(nvmlDeviceGetMaxPcieLinkGeneration, pcie_max_gen)
FAKE_NVML_UINT(nvmlDeviceGetMaxPcieLinkWidth, pcie_max_width)
FAKE_NVML_UINT(nvmlDeviceGetPcieReplayCounter, replays)
#undef FAKE_NVML_UINT

FAKE_NVML_API nvml::Return nvmlDeviceGetNvLinkVersion(nvml::Device d, unsigned int link,
                                                      unsigned int* version) {
  std::lock_guard<std::mutex> lock(Mu());
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  if (!version || link >= nvml::kNvLinkMaxLinks) return nvml::kErrorInvalidArgument;
  if (Unsupported("nvmlDeviceGetNvLinkVersion") || link >= S().links[i].size()) {
    return nvml::kErrorNotSupported;
  }
  *version = S().hardware[i].nvlink_version;
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetTotalEccErrors(nvml::Device d, int error_type,
                                                       int counter_type,
                                                       unsigned long long* count) {
  return WithHardware(d, "nvmlDeviceGetTotalEccErrors", [&](const Hardware& h) {
    if (!count ||
        (error_type != nvml::kMemoryErrorCorrected &&
         error_type != nvml::kMemoryErrorUncorrected) ||
        (counter_type != nvml::kEccCounterVolatile &&
         counter_type != nvml::kEccCounterAggregate)) {
      return nvml::kErrorInvalidArgument;
    }
    *count =
        error_type == nvml::kMemoryErrorUncorrected ? h.ecc_uncorrected : h.ecc_corrected;
    return nvml::kSuccess;
  });
}

FAKE_NVML_API nvml::Return nvmlDeviceGetEccMode(nvml::Device d, nvml::EnableState* now,
                                                nvml::EnableState* pending) {
  return WithHardware(d, "nvmlDeviceGetEccMode", [&](const Hardware&) {
    if (!now || !pending) return nvml::kErrorInvalidArgument;
    *now = *pending = nvml::kFeatureEnabled;
    return nvml::kSuccess;
  });
}

FAKE_NVML_API nvml::Return nvmlDeviceGetRetiredPages(nvml::Device d, int cause,
                                                     unsigned int* count,
                                                     unsigned long long* addresses) {
  return WithHardware(d, "nvmlDeviceGetRetiredPages", [&](const Hardware& h) {
    if (!count || (cause != nvml::kPageRetirementMultipleSbe &&
                   cause != nvml::kPageRetirementDbe)) {
      return nvml::kErrorInvalidArgument;
    }
    const unsigned have =
        cause == nvml::kPageRetirementDbe ? h.retired_dbe : h.retired_sbe;
    if (*count < have || (!addresses && have > 0)) {
      const bool asked = *count == 0;
      *count = have;
      return asked ? nvml::kSuccess : nvml::kErrorInsufficientSize;
    }
    for (unsigned k = 0; k < have; ++k) addresses[k] = 0x1000ULL * (k + 1);
    *count = have;
    return nvml::kSuccess;
  });
}

FAKE_NVML_API nvml::Return nvmlDeviceGetRetiredPagesPendingStatus(
    nvml::Device d, nvml::EnableState* pending) {
  return WithHardware(
      d, "nvmlDeviceGetRetiredPagesPendingStatus", [&](const Hardware& h) {
        if (!pending) return nvml::kErrorInvalidArgument;
        *pending = h.retired_pending ? nvml::kFeatureEnabled : nvml::kFeatureDisabled;
        return nvml::kSuccess;
      });
}

FAKE_NVML_API nvml::Return nvmlDeviceGetCurrentClocksEventReasons(
    nvml::Device d, unsigned long long* reasons) {
  return WithHardware(d, "nvmlDeviceGetCurrentClocksEventReasons",
                      [&](const Hardware& h) {
                        if (!reasons) return nvml::kErrorInvalidArgument;
                        *reasons = h.throttle;
                        return nvml::kSuccess;
                      });
}

FAKE_NVML_API nvml::Return nvmlDeviceGetMigMode(nvml::Device d, unsigned int* now,
                                                unsigned int* pending) {
  return WithHardware(d, "nvmlDeviceGetMigMode", [&](const Hardware& h) {
    if (!now || !pending) return nvml::kErrorInvalidArgument;
    *now = h.mig_now;
    *pending = h.mig_pending;
    return nvml::kSuccess;
  });
}

FAKE_NVML_API nvml::Return nvmlDeviceGetGpuFabricInfo(nvml::Device d,
                                                      nvml::GpuFabricInfo* info) {
  return WithHardware(d, "nvmlDeviceGetGpuFabricInfo", [&](const Hardware& h) {
    if (!info) return nvml::kErrorInvalidArgument;
    if (h.fabric == nvml::kGpuFabricNotSupported) return nvml::kErrorNotSupported;
    std::memset(info, 0, sizeof(*info));
    info->state = h.fabric;
    info->status = h.fabric_status;
    return nvml::kSuccess;
  });
}
