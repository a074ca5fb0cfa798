#include "topo/nvml_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "core/mutex.h"

namespace hachi::topo {
namespace {

template <typename Fn>
void LookUp(void* handle, const char* name, Fn*& slot) {
  void* p = dlsym(handle, name);
  // dlsym returns functions as void*; POSIX guarantees the round trip.
  static_assert(sizeof(p) == sizeof(slot));
  std::memcpy(&slot, &p, sizeof(slot));
}

// Every symbol, looked up once. Returns the first required one that is missing.
const char* LookUpAll(void* h, NvmlApi& a) {
  LookUp(h, "nvmlInit_v2", a.init);
  LookUp(h, "nvmlShutdown", a.shutdown);
  LookUp(h, "nvmlDeviceGetCount_v2", a.get_count);
  LookUp(h, "nvmlDeviceGetHandleByIndex_v2", a.get_handle);
  LookUp(h, "nvmlErrorString", a.error_string);
  LookUp(h, "nvmlDeviceGetName", a.get_name);
  LookUp(h, "nvmlDeviceGetUUID", a.get_uuid);
  LookUp(h, "nvmlDeviceGetMemoryInfo", a.get_memory);
  LookUp(h, "nvmlDeviceGetPciInfo_v3", a.get_pci);
  LookUp(h, "nvmlDeviceGetCpuAffinity", a.get_cpu_affinity);
  LookUp(h, "nvmlDeviceGetNumaNodeId", a.get_numa);
  LookUp(h, "nvmlDeviceGetTopologyCommonAncestor", a.get_ancestor);
  LookUp(h, "nvmlDeviceGetNvLinkState", a.get_nvlink_state);
  LookUp(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2", a.get_nvlink_remote_pci);
  LookUp(h, "nvmlDeviceGetNvLinkRemoteDeviceType", a.get_nvlink_remote_type);
  LookUp(h, "nvmlEventSetCreate", a.set_create);
  LookUp(h, "nvmlDeviceRegisterEvents", a.register_events);
  LookUp(h, "nvmlEventSetWait_v2", a.set_wait);
  LookUp(h, "nvmlEventSetFree", a.set_free);
  LookUp(h, "nvmlDeviceGetSupportedEventTypes", a.supported_events);
  LookUp(h, "nvmlDeviceGetTemperature", a.get_temperature);
  LookUp(h, "nvmlDeviceGetRemappedRows", a.get_remapped_rows);
  LookUp(h, "nvmlDeviceGetComputeRunningProcesses_v3", a.get_processes);
  LookUp(h, "nvmlSystemGetDriverVersion", a.driver_version);
  LookUp(h, "nvmlSystemGetNVMLVersion", a.nvml_version);
  LookUp(h, "nvmlSystemGetCudaDriverVersion_v2", a.cuda_version);
  LookUp(h, "nvmlDeviceGetPersistenceMode", a.get_persistence);
  LookUp(h, "nvmlDeviceGetCurrPcieLinkGeneration", a.get_pcie_gen);
  LookUp(h, "nvmlDeviceGetCurrPcieLinkWidth", a.get_pcie_width);
  LookUp(h, "nvmlDeviceGetMaxPcieLinkGeneration", a.get_pcie_max_gen);
  LookUp(h, "nvmlDeviceGetMaxPcieLinkWidth", a.get_pcie_max_width);
  LookUp(h, "nvmlDeviceGetPcieReplayCounter", a.get_pcie_replays);
  LookUp(h, "nvmlDeviceGetNvLinkVersion", a.get_nvlink_version);
  LookUp(h, "nvmlDeviceGetTotalEccErrors", a.get_ecc_total);
  LookUp(h, "nvmlDeviceGetEccMode", a.get_ecc_mode);
  LookUp(h, "nvmlDeviceGetRetiredPages", a.get_retired_pages);
  LookUp(h, "nvmlDeviceGetRetiredPagesPendingStatus", a.get_retired_pending);
  LookUp(h, "nvmlDeviceGetCurrentClocksEventReasons", a.get_throttle);
  if (!a.get_throttle)
    LookUp(h, "nvmlDeviceGetCurrentClocksThrottleReasons", a.get_throttle);
  LookUp(h, "nvmlDeviceGetMigMode", a.get_mig_mode);
  LookUp(h, "nvmlDeviceGetGpuFabricInfo", a.get_fabric);
  LookUp(h, "nvmlDeviceGetMaxMigDeviceCount", a.get_max_mig_count);
  LookUp(h, "nvmlDeviceGetMigDeviceHandleByIndex", a.get_mig_handle);
  LookUp(h, "nvmlDeviceIsMigDeviceHandle", a.is_mig_handle);
  LookUp(h, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", a.get_mig_parent);
  LookUp(h, "nvmlDeviceGetGpuInstanceId", a.get_gpu_instance_id);
  LookUp(h, "nvmlDeviceGetComputeInstanceId", a.get_compute_instance_id);
  LookUp(h, "nvmlDeviceGetUtilizationRates", a.get_utilization);
  LookUp(h, "nvmlDeviceGetPowerUsage", a.get_power);
  LookUp(h, "nvmlDeviceGetClockInfo", a.get_clock);
  LookUp(h, "nvmlDeviceGetPcieThroughput", a.get_pcie_throughput);
  LookUp(h, "nvmlDeviceGetFieldValues", a.get_field_values);
  if (!a.init) return "nvmlInit_v2";
  if (!a.shutdown) return "nvmlShutdown";
  if (!a.get_count) return "nvmlDeviceGetCount_v2";
  if (!a.get_handle) return "nvmlDeviceGetHandleByIndex_v2";
  return nullptr;
}

}  // namespace

std::string ResolveNvmlLibrary(std::string_view library) {
  if (!library.empty()) return std::string(library);
  const char* env = std::getenv("HACHI_NVML_LIBRARY");
  if (env && *env) return env;
  return kNvmlLibrary;
}

std::string NvmlApi::ErrorText(nvml::Return rc) const {
  const char* s = error_string ? error_string(rc) : nullptr;
  return std::string(s ? s : "unknown error") + " (NVML error " + std::to_string(rc) +
         ")";
}

Result<const NvmlApi*> LoadNvml(const std::string& path) {
  // Loaded libraries by path. Entries are never removed, so the pointers handed out
  // stay valid until exit.
  struct Loaded {
    Mutex mu;
    std::map<std::string, std::unique_ptr<const NvmlApi>> by_path GUARDED_BY(mu);
  };
  static auto* loaded = new Loaded();
  MutexLock lock(&loaded->mu);
  if (auto it = loaded->by_path.find(path); it != loaded->by_path.end()) {
    return it->second.get();
  }

  dlerror();  // dlerror() reports the last error: clear an older one
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return Unavailable("cannot load NVML (" + path +
                       "): " + (why ? why : "unknown error") +
                       "; is the NVIDIA driver installed? HACHI_NVML_LIBRARY may name "
                       "the library's path");
  }
  auto api = std::make_unique<NvmlApi>();
  api->path = path;
  if (const char* missing = LookUpAll(handle, *api)) {
    dlclose(handle);  // nothing of it was called
    return Unavailable(path + " has no " + missing +
                       "; the NVIDIA driver is too old or this is not NVML");
  }
  const NvmlApi* out = api.get();
  loaded->by_path.emplace(path, std::move(api));
  return out;
}

}  // namespace hachi::topo
