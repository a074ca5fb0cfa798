// Internal to the fake NVML (fake_nvml.cc, fake_nvml_mig.cc): its state and the helpers
// both files use. Everything here is guarded by Mu(); see fake_nvml.cc's header comment
// for what the fake models and its knobs.
#pragma once

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "topo/nvml_api.h"
#include "topo/topology.h"

namespace nvml = hachi::topo::nvml;

// A GPU's handle, or (mig >= 0) the handle of the MIG device in that slot of the GPU.
struct hachi::topo::nvml::DeviceOpaque {
  int index;
  int mig = -1;
};

// An event set: the types each GPU registered, and how far into State::events it has
// read.
struct hachi::topo::nvml::EventSetOpaque {
  struct Registration {
    unsigned long long types = 0;
    size_t since = 0;  // the first event (index in State::events) it may receive
  };
  std::map<int, Registration> registered;  // by GPU index
  size_t next = 0;
};

namespace fake_nvml {

// MIG device slots per GPU: nvmlDeviceGetMaxMigDeviceCount of an A100 or H100.
inline constexpr unsigned kMigSlots = 7;
// nvmlProcessInfo_t's instance ids of a process not in a MIG instance.
inline constexpr unsigned kNoInstance = 0xFFFFFFFFu;

struct Remote {
  bool is_switch = false;
  int peer = -1;  // GPU index, or the NVSwitch number when is_switch
};

struct Injected {
  int gpu;
  unsigned long long type;
  unsigned long long data;
};

// A compute process on a GPU (the events file's `proc` lines).
struct Process {
  unsigned long long bytes = 0;
  unsigned gpu_instance = kNoInstance, compute_instance = kNoInstance;
};

// Per GPU, what the jobs on it do (utilisation sampling; the events file's
// `util`, `memused`, `power`, `smclock`, `pcietput`, `nvlinktput`, `nvlinkkib`
// lines). The scripted
// series advance one value per nvmlDeviceGetUtilizationRates call (a "sample"); the
// last value repeats. nvmlDeviceGetMemoryInfo answers the latest sample's memory.
struct Activity {
  std::vector<long long> util, mem_util, mem_used_mib;
  size_t tick = 0;            // utilisation reads so far
  unsigned power_mw = 70000;  // an idle H100's 70 W
  unsigned sm_clock_mhz = 1980;
  unsigned pcie_tx_kbs = 0, pcie_rx_kbs = 0;
  unsigned long long nvlink_kib_per_s = 0;  // TX and RX each
  double nvlink_since = 0;                  // steady seconds when the rate was set
  unsigned long long nvlink_base_kib = 0;   // counted before that
  std::vector<long long> nvlink_kib;        // scripted counter values: replace the rate

  static long long At(const std::vector<long long>& v, size_t i) {
    return v.empty() ? -1 : v[std::min(i, v.size() - 1)];
  }
};

// Per GPU, what the events file has done to it.
struct Health {
  bool lost = false;
  unsigned temperature = 40;
  bool remap_pending = false;
  bool remap_failure = false;
  std::map<unsigned, Process> processes;  // by pid
  Activity activity;
};

// Per GPU, its hardware state (set at nvmlInit_v2 from the model, then by events lines).
struct Hardware {
  bool persistence = true;
  std::set<unsigned> links_down;
  unsigned pcie_gen = 4, pcie_width = 16, pcie_max_gen = 4, pcie_max_width = 16;
  unsigned nvlink_version = nvml::kNvLinkVersion3_0;
  unsigned replays = 0;
  unsigned long long ecc_uncorrected = 0, ecc_corrected = 0;
  unsigned retired_sbe = 0, retired_dbe = 0;
  bool retired_pending = false;
  unsigned long long throttle = 0;
  unsigned mig_now = 0, mig_pending = 0;
  // The MIG layout, by slot (nvmlDeviceGetMigDeviceHandleByIndex's index); an empty
  // slot answers NOT_FOUND. Seen only while mig_now is 1.
  std::array<std::optional<hachi::topo::MigDevice>, kMigSlots> mig;
  nvml::GpuFabricState fabric = nvml::kGpuFabricNotSupported;
  nvml::Return fabric_status = nvml::kSuccess;
};

struct State {
  int init_count = 0;
  std::string error;  // why the last nvmlInit_v2 failed with kErrorUnknown
  hachi::topo::Topology topo;
  std::vector<nvml::DeviceOpaque> devices;
  // Per GPU, the handles of its MIG slots: made once at nvmlInit_v2, so that a handle
  // stays a valid pointer whatever the layout becomes.
  std::vector<std::array<nvml::DeviceOpaque, kMigSlots>> mig_handles;
  std::vector<std::string> bus_ids;
  std::vector<std::vector<Remote>> links;  // per GPU, per NVLink
  std::vector<std::string> switch_bus_ids;
  std::set<std::string> unsupported;
  // Injection (HACHI_FAKE_NVML_EVENTS).
  std::string events_path;
  long events_offset = 0;  // bytes of the file consumed
  std::vector<Health> health;
  std::vector<Hardware> hardware;
  std::string driver = "550.54.15";
  std::vector<Injected> events;
  std::vector<std::unique_ptr<nvml::EventSetOpaque>> sets;
};

State& S();
// Guards S(). Outside State, which nvmlInit_v2 replaces wholesale.
std::mutex& Mu();
bool Unsupported(const char* fn);
nvml::Return CopyString(const std::string& v, char* out, unsigned int size);
// The GPU index of a GPU handle the caller may use (-1 for a MIG handle), reading pending
// events first. kSuccess, invalid argument, or GPU_IS_LOST.
nvml::Return Use(nvml::Device d, int* index);

// fake_nvml_activity.cc. Callers hold Mu().
// The steady clock in seconds: the NVLink counters' time base.
double SteadySeconds();
// The `util`, `memused`, `power`, `smclock`, `pcietput`, `nvlinktput` lines (`f` split,
// f[1] the GPU, already checked); false when `f` is none of them or not a valid one.
bool ApplyActivityLine(Activity& a, const std::vector<std::string>& f);

// fake_nvml_mig.cc. Callers hold Mu().
// The `migdev` line (see fake_nvml.cc); false when `f` is not a valid one.
bool ApplyMigLine(State& s, const std::vector<std::string>& f, int gpu);
// At nvmlInit_v2: the MIG layouts the topology file gives.
void SeedMig(State& s);
inline bool IsMigHandle(nvml::Device d) { return d && d->mig >= 0; }
// Name, UUID, memory and processes of a MIG device handle.
nvml::Return MigName(nvml::Device d, char* out, unsigned int size);
nvml::Return MigUuid(nvml::Device d, char* out, unsigned int size);
nvml::Return MigMemory(nvml::Device d, nvml::Memory* m);
nvml::Return MigProcesses(nvml::Device d, unsigned int* count, nvml::ProcessInfo* infos);

}  // namespace fake_nvml

#define FAKE_NVML_API extern "C" __attribute__((visibility("default")))
