// The NVML library (libnvidia-ml.so.1) loaded with dlopen, once per process and path, and
// the function pointers Hachi calls (their types: nvml_api.h). One loader for both users:
// the topology probe (nvml_probe.h) and the agent's GPU health monitor
// (agent/gpu_health.h).
//
// Loaded by core/dynamic_library.h (as the CUDA driver is, diag/cuda_library.h).
// Thread safety: LoadNvml may be called from any thread at any time; the first call for a
// path opens the library and looks up its symbols under a lock, later calls return the
// same object. The NvmlApi it returns is immutable and lives until the process exits: the
// library is never closed (dlclose while another thread may still be inside NVML is not
// safe, and a closed-then-reopened driver library gains nothing). A failed load is not
// remembered, so a later call tries again. Loading does not initialise NVML: each user
// calls init() and, when done, shutdown() (the library counts them).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "topo/nvml_api.h"

namespace hachi::topo {

// The library tried when neither the caller nor the environment names one.
inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

// `library` when set, else $HACHI_NVML_LIBRARY when set, else kNvmlLibrary.
std::string ResolveNvmlLibrary(std::string_view library);

// The functions of one loaded NVML. The required ones are never null; an optional one is
// null when the library lacks it (an older driver), and its caller leaves what it reads
// unknown.
struct NvmlApi {
  std::string path;  // as given to dlopen

  // Required.
  nvml::InitFn* init = nullptr;                          // nvmlInit_v2
  nvml::ShutdownFn* shutdown = nullptr;                  // nvmlShutdown
  nvml::DeviceGetCountFn* get_count = nullptr;           // nvmlDeviceGetCount_v2
  nvml::DeviceGetHandleByIndexFn* get_handle = nullptr;  // ..._v2

  // Optional: everything else.
  nvml::ErrorStringFn* error_string = nullptr;  // nvmlErrorString
  // Device facts (the topology probe).
  nvml::DeviceGetNameFn* get_name = nullptr;
  nvml::DeviceGetUuidFn* get_uuid = nullptr;
  nvml::DeviceGetMemoryInfoFn* get_memory = nullptr;
  nvml::DeviceGetPciInfoFn* get_pci = nullptr;  // nvmlDeviceGetPciInfo_v3
  nvml::DeviceGetCpuAffinityFn* get_cpu_affinity = nullptr;
  nvml::DeviceGetNumaNodeIdFn* get_numa = nullptr;
  nvml::DeviceGetTopologyCommonAncestorFn* get_ancestor = nullptr;
  nvml::DeviceGetNvLinkStateFn* get_nvlink_state = nullptr;
  nvml::DeviceGetNvLinkRemotePciInfoFn* get_nvlink_remote_pci = nullptr;  // _v2
  nvml::DeviceGetNvLinkRemoteDeviceTypeFn* get_nvlink_remote_type = nullptr;
  // Events and polls (the GPU health monitor).
  nvml::EventSetCreateFn* set_create = nullptr;
  nvml::DeviceRegisterEventsFn* register_events = nullptr;
  nvml::EventSetWaitFn* set_wait = nullptr;  // nvmlEventSetWait_v2
  nvml::EventSetFreeFn* set_free = nullptr;
  nvml::DeviceGetSupportedEventTypesFn* supported_events = nullptr;
  nvml::DeviceGetTemperatureFn* get_temperature = nullptr;
  nvml::DeviceGetRemappedRowsFn* get_remapped_rows = nullptr;
  // nvmlDeviceGetComputeRunningProcesses_v3.
  nvml::DeviceGetComputeRunningProcessesFn* get_processes = nullptr;
  // The node's checks (diag/doctor.h) and link facts (diag/link_facts.h).
  nvml::SystemGetStringFn* driver_version = nullptr;  // nvmlSystemGetDriverVersion
  nvml::SystemGetStringFn* nvml_version = nullptr;    // nvmlSystemGetNVMLVersion
  nvml::SystemGetCudaDriverVersionFn* cuda_version = nullptr;  // ..._v2
  nvml::DeviceGetEnableStateFn* get_persistence = nullptr;
  nvml::DeviceGetUintFn* get_pcie_gen = nullptr;        // ...CurrPcieLinkGeneration
  nvml::DeviceGetUintFn* get_pcie_width = nullptr;      // ...CurrPcieLinkWidth
  nvml::DeviceGetUintFn* get_pcie_max_gen = nullptr;    // ...MaxPcieLinkGeneration
  nvml::DeviceGetUintFn* get_pcie_max_width = nullptr;  // ...MaxPcieLinkWidth
  nvml::DeviceGetUintFn* get_pcie_replays = nullptr;    // ...PcieReplayCounter
  nvml::DeviceGetNvLinkVersionFn* get_nvlink_version = nullptr;
  nvml::DeviceGetTotalEccErrorsFn* get_ecc_total = nullptr;
  nvml::DeviceGetEccModeFn* get_ecc_mode = nullptr;
  nvml::DeviceGetRetiredPagesFn* get_retired_pages = nullptr;
  nvml::DeviceGetRetiredPagesPendingStatusFn* get_retired_pending = nullptr;
  // nvmlDeviceGetCurrentClocksEventReasons, else ...ThrottleReasons (older drivers).
  nvml::DeviceGetThrottleReasonsFn* get_throttle = nullptr;
  nvml::DeviceGetMigModeFn* get_mig_mode = nullptr;
  // MIG devices (the topology probe).
  nvml::DeviceGetUintFn* get_max_mig_count = nullptr;  // ...GetMaxMigDeviceCount
  nvml::DeviceGetMigDeviceHandleByIndexFn* get_mig_handle = nullptr;
  nvml::DeviceGetUintFn* is_mig_handle = nullptr;  // nvmlDeviceIsMigDeviceHandle
  nvml::DeviceGetDeviceHandleFromMigDeviceHandleFn* get_mig_parent = nullptr;
  nvml::DeviceGetUintFn* get_gpu_instance_id = nullptr;      // ...GetGpuInstanceId
  nvml::DeviceGetUintFn* get_compute_instance_id = nullptr;  // ...GetComputeInstanceId
  nvml::DeviceGetGpuFabricInfoFn* get_fabric = nullptr;
  // Utilisation sampling (agent/usage.h).
  nvml::DeviceGetUtilizationRatesFn* get_utilization = nullptr;
  nvml::DeviceGetUintFn* get_power = nullptr;  // nvmlDeviceGetPowerUsage, milliwatts
  nvml::DeviceGetClockInfoFn* get_clock = nullptr;
  nvml::DeviceGetPcieThroughputFn* get_pcie_throughput = nullptr;
  nvml::DeviceGetFieldValuesFn* get_field_values = nullptr;

  // What listing MIG devices needs; without it a MIG GPU's devices are unknown.
  bool has_mig() const { return get_mig_mode && get_max_mig_count && get_mig_handle; }
  // The four event functions, without which there are no events to wait for.
  bool has_events() const {
    return set_create && register_events && set_wait && set_free;
  }
  // "Driver Not Loaded (NVML error 9)".
  std::string ErrorText(nvml::Return rc) const;
};

// The NVML at `path` (a file name the dynamic loader searches, or a path; see
// ResolveNvmlLibrary). kUnavailable when it cannot be loaded (the message names the path
// and dlerror()) or lacks a required symbol.
Result<const NvmlApi*> LoadNvml(const std::string& path);

}  // namespace hachi::topo
