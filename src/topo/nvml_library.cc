#include "topo/nvml_library.h"

#include "core/dynamic_library.h"
#include "core/mutex.h"

namespace hachi::topo {
namespace {

// Every symbol, looked up once. Returns the first required one that is missing.
const char* LookUpAll(const DynamicLibrary& h, NvmlApi& a) {
  h.Find("nvmlInit_v2", a.init);
  h.Find("nvmlShutdown", a.shutdown);
  h.Find("nvmlDeviceGetCount_v2", a.get_count);
  h.Find("nvmlDeviceGetHandleByIndex_v2", a.get_handle);
  h.Find("nvmlErrorString", a.error_string);
  h.Find("nvmlDeviceGetName", a.get_name);
  h.Find("nvmlDeviceGetUUID", a.get_uuid);
  h.Find("nvmlDeviceGetMemoryInfo", a.get_memory);
  h.Find("nvmlDeviceGetPciInfo_v3", a.get_pci);
  h.Find("nvmlDeviceGetCpuAffinity", a.get_cpu_affinity);
  h.Find("nvmlDeviceGetNumaNodeId", a.get_numa);
  h.Find("nvmlDeviceGetTopologyCommonAncestor", a.get_ancestor);
  h.Find("nvmlDeviceGetNvLinkState", a.get_nvlink_state);
  h.Find("nvmlDeviceGetNvLinkRemotePciInfo_v2", a.get_nvlink_remote_pci);
  h.Find("nvmlDeviceGetNvLinkRemoteDeviceType", a.get_nvlink_remote_type);
  h.Find("nvmlEventSetCreate", a.set_create);
  h.Find("nvmlDeviceRegisterEvents", a.register_events);
  h.Find("nvmlEventSetWait_v2", a.set_wait);
  h.Find("nvmlEventSetFree", a.set_free);
  h.Find("nvmlDeviceGetSupportedEventTypes", a.supported_events);
  h.Find("nvmlDeviceGetTemperature", a.get_temperature);
  h.Find("nvmlDeviceGetRemappedRows", a.get_remapped_rows);
  h.Find("nvmlDeviceGetComputeRunningProcesses_v3", a.get_processes);
  h.Find("nvmlSystemGetDriverVersion", a.driver_version);
  h.Find("nvmlSystemGetNVMLVersion", a.nvml_version);
  h.Find("nvmlSystemGetCudaDriverVersion_v2", a.cuda_version);
  h.Find("nvmlDeviceGetPersistenceMode", a.get_persistence);
  h.Find("nvmlDeviceGetCurrPcieLinkGeneration", a.get_pcie_gen);
  h.Find("nvmlDeviceGetCurrPcieLinkWidth", a.get_pcie_width);
  h.Find("nvmlDeviceGetMaxPcieLinkGeneration", a.get_pcie_max_gen);
  h.Find("nvmlDeviceGetMaxPcieLinkWidth", a.get_pcie_max_width);
  h.Find("nvmlDeviceGetPcieReplayCounter", a.get_pcie_replays);
  h.Find("nvmlDeviceGetNvLinkVersion", a.get_nvlink_version);
  h.Find("nvmlDeviceGetTotalEccErrors", a.get_ecc_total);
  h.Find("nvmlDeviceGetEccMode", a.get_ecc_mode);
  h.Find("nvmlDeviceGetRetiredPages", a.get_retired_pages);
  h.Find("nvmlDeviceGetRetiredPagesPendingStatus", a.get_retired_pending);
  h.Find("nvmlDeviceGetCurrentClocksEventReasons", a.get_throttle);
  if (!a.get_throttle)
    h.Find("nvmlDeviceGetCurrentClocksThrottleReasons", a.get_throttle);
  h.Find("nvmlDeviceGetMigMode", a.get_mig_mode);
  h.Find("nvmlDeviceGetGpuFabricInfo", a.get_fabric);
  h.Find("nvmlDeviceGetMaxMigDeviceCount", a.get_max_mig_count);
  h.Find("nvmlDeviceGetMigDeviceHandleByIndex", a.get_mig_handle);
  h.Find("nvmlDeviceIsMigDeviceHandle", a.is_mig_handle);
  h.Find("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", a.get_mig_parent);
  h.Find("nvmlDeviceGetGpuInstanceId", a.get_gpu_instance_id);
  h.Find("nvmlDeviceGetComputeInstanceId", a.get_compute_instance_id);
  h.Find("nvmlDeviceGetUtilizationRates", a.get_utilization);
  h.Find("nvmlDeviceGetPowerUsage", a.get_power);
  h.Find("nvmlDeviceGetClockInfo", a.get_clock);
  h.Find("nvmlDeviceGetPcieThroughput", a.get_pcie_throughput);
  h.Find("nvmlDeviceGetFieldValues", a.get_field_values);
  if (!a.init) return "nvmlInit_v2";
  if (!a.shutdown) return "nvmlShutdown";
  if (!a.get_count) return "nvmlDeviceGetCount_v2";
  if (!a.get_handle) return "nvmlDeviceGetHandleByIndex_v2";
  return nullptr;
}

std::string CannotOpen(const std::string& path, const std::string& why) {
  return "cannot load NVML (" + path + "): " + why +
         "; is the NVIDIA driver installed? HACHI_NVML_LIBRARY may name the library's "
         "path";
}

}  // namespace

std::string ResolveNvmlLibrary(std::string_view library) {
  return ResolveLibraryPath(library, "HACHI_NVML_LIBRARY", kNvmlLibrary);
}

std::string NvmlApi::ErrorText(nvml::Return rc) const {
  const char* s = error_string ? error_string(rc) : nullptr;
  return std::string(s ? s : "unknown error") + " (NVML error " + std::to_string(rc) +
         ")";
}

Result<const NvmlApi*> LoadNvml(const std::string& path) {
  static auto* loaded = new LoadedLibraries<NvmlApi>(
      LookUpAll, {CannotOpen, "the NVIDIA driver is too old or this is not NVML"});
  return loaded->Get(path);
}

}  // namespace hachi::topo
