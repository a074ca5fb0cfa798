// Our own minimal declarations of the NVML C API (libnvidia-ml.so.1), for loading it
// with dlopen: only the types, constants and function signatures the topology probe
// and the agent's GPU health monitor (agent/gpu_health.h) use. Written from NVML's public
// API documentation; NVIDIA's nvml.h is not vendored. The layouts are ABI facts, so they
// are pinned by static_asserts below; the fake NVML used in tests
// (src/topo/testdata/fake_nvml/) implements these same declarations.
#pragma once

#include <cstddef>

namespace hachi::topo::nvml {

// nvmlReturn_t: an enum, passed as a C int.
using Return = int;
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorTimeout = 10;  // nvmlEventSetWait_v2: no event in time
inline constexpr Return kErrorLibraryNotFound = 12;
inline constexpr Return kErrorGpuIsLost = 15;  // fallen off the bus or otherwise gone
inline constexpr Return kErrorUnknown = 999;

// nvmlDevice_t: an opaque handle owned by the library.
struct DeviceOpaque;
using Device = DeviceOpaque*;

// nvmlPciInfo_t (the layout used by nvmlDeviceGetPciInfo_v3 and
// nvmlDeviceGetNvLinkRemotePciInfo_v2).
inline constexpr int kPciBusIdBufferSize = 32;  // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
inline constexpr int kPciBusIdLegacyBufferSize = 16;  // ..._BUFFER_V2_SIZE
struct PciInfo {
  char bus_id_legacy[kPciBusIdLegacyBufferSize];  // "0000:18:00.0"
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;  // device id << 16 | vendor id
  unsigned int pci_sub_system_id;
  char bus_id[kPciBusIdBufferSize];  // "00000000:18:00.0"
};
static_assert(sizeof(PciInfo) == 68);
static_assert(offsetof(PciInfo, domain) == 16);
static_assert(offsetof(PciInfo, bus_id) == 36);

// nvmlMemory_t (v1), bytes.
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
static_assert(sizeof(Memory) == 24);

// nvmlEnableState_t.
using EnableState = int;
inline constexpr EnableState kFeatureDisabled = 0;
inline constexpr EnableState kFeatureEnabled = 1;

// nvmlGpuTopologyLevel_t: the closest common ancestor of two GPUs.
using TopologyLevel = int;
inline constexpr TopologyLevel kTopologyInternal = 0;     // same board
inline constexpr TopologyLevel kTopologySingle = 10;      // one PCIe switch
inline constexpr TopologyLevel kTopologyMultiple = 20;    // several PCIe switches
inline constexpr TopologyLevel kTopologyHostBridge = 30;  // the CPU's host bridge
inline constexpr TopologyLevel kTopologyNode = 40;        // host bridges in one NUMA node
inline constexpr TopologyLevel kTopologySystem = 50;      // across NUMA nodes

// nvmlIntNvLinkDeviceType_t: what the far end of an NVLink is.
using NvLinkDeviceType = int;
inline constexpr NvLinkDeviceType kNvLinkDeviceGpu = 0;
inline constexpr NvLinkDeviceType kNvLinkDeviceIbmNpu = 1;
inline constexpr NvLinkDeviceType kNvLinkDeviceSwitch = 2;
inline constexpr NvLinkDeviceType kNvLinkDeviceUnknown = 0xFF;

// nvmlEventSet_t: an opaque handle owned by the library.
struct EventSetOpaque;
using EventSet = EventSetOpaque*;

// nvmlEventData_t, as filled by nvmlEventSetWait_v2. event_data is the Xid number for
// kEventXidCriticalError; the instance ids matter only under MIG.
struct EventData {
  Device device;
  unsigned long long event_type;  // one kEvent* bit
  unsigned long long event_data;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
static_assert(sizeof(EventData) == 32);
static_assert(offsetof(EventData, event_data) == 16);
static_assert(offsetof(EventData, gpu_instance_id) == 24);

// nvmlEventType* bits (unsigned long long masks).
inline constexpr unsigned long long kEventSingleBitEccError = 0x1;
inline constexpr unsigned long long kEventDoubleBitEccError = 0x2;
inline constexpr unsigned long long kEventPState = 0x4;
inline constexpr unsigned long long kEventXidCriticalError = 0x8;
inline constexpr unsigned long long kEventClock = 0x10;

// nvmlTemperatureSensors_t.
inline constexpr int kTemperatureGpu = 0;

inline constexpr unsigned kNvLinkMaxLinks = 18;        // NVML_NVLINK_MAX_LINKS
inline constexpr unsigned kDeviceNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned kDeviceUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

// nvmlNvlinkVersion_t, what nvmlDeviceGetNvLinkVersion answers (not the generation
// itself: 3 is NVLink 2.2, 6 is NVLink 4.0).
inline constexpr unsigned kNvLinkVersion1_0 = 1;
inline constexpr unsigned kNvLinkVersion2_0 = 2;
inline constexpr unsigned kNvLinkVersion2_2 = 3;
inline constexpr unsigned kNvLinkVersion3_0 = 4;
inline constexpr unsigned kNvLinkVersion3_1 = 5;
inline constexpr unsigned kNvLinkVersion4_0 = 6;
inline constexpr unsigned kNvLinkVersion5_0 = 7;

// nvmlMemoryErrorType_t and nvmlEccCounterType_t (nvmlDeviceGetTotalEccErrors).
inline constexpr int kMemoryErrorCorrected = 0;
inline constexpr int kMemoryErrorUncorrected = 1;
inline constexpr int kEccCounterVolatile = 0;   // since the last driver load
inline constexpr int kEccCounterAggregate = 1;  // over the GPU's life

// nvmlPageRetirementCause_t (nvmlDeviceGetRetiredPages; GPUs before Ampere).
inline constexpr int kPageRetirementMultipleSbe = 0;
inline constexpr int kPageRetirementDbe = 1;

// nvmlClocksThrottleReason* bits (nvmlDeviceGetCurrentClocksThrottleReasons; renamed
// "event reasons" in newer drivers, same bits).
inline constexpr unsigned long long kThrottleGpuIdle = 0x1;
inline constexpr unsigned long long kThrottleApplicationsClocks = 0x2;
inline constexpr unsigned long long kThrottleSwPowerCap = 0x4;
inline constexpr unsigned long long kThrottleHwSlowdown = 0x8;
inline constexpr unsigned long long kThrottleSyncBoost = 0x10;
inline constexpr unsigned long long kThrottleSwThermal = 0x20;
inline constexpr unsigned long long kThrottleHwThermal = 0x40;
inline constexpr unsigned long long kThrottleHwPowerBrake = 0x80;
inline constexpr unsigned long long kThrottleDisplayClocks = 0x100;

// nvmlGpuFabricInfo_t (nvmlDeviceGetGpuFabricInfo, Hopper and later on NVSwitch
// systems): the GPU's registration with the fabric manager.
inline constexpr int kGpuFabricUuidLen = 16;
using GpuFabricState = unsigned char;
inline constexpr GpuFabricState kGpuFabricNotSupported = 0;
inline constexpr GpuFabricState kGpuFabricNotStarted = 1;
inline constexpr GpuFabricState kGpuFabricInProgress = 2;
inline constexpr GpuFabricState kGpuFabricCompleted = 3;
struct GpuFabricInfo {
  unsigned char cluster_uuid[kGpuFabricUuidLen];
  Return status;  // meaningful once state is kGpuFabricCompleted
  unsigned int clique_id;
  GpuFabricState state;
};
static_assert(sizeof(GpuFabricInfo) == 28);
static_assert(offsetof(GpuFabricInfo, state) == 24);

inline constexpr unsigned kSystemDriverVersionBufferSize = 80;  // also NVML's version

// Utilisation sampling (agent/usage.h).
// nvmlUtilization_t: percent of the last sample period (1/6 s to 1 s, by product) during
// which a kernel ran on the GPU, and during which its memory was read or written.
struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};
static_assert(sizeof(Utilization) == 8);
inline constexpr int kClockSm = 1;          // nvmlClockType_t NVML_CLOCK_SM
inline constexpr int kPcieUtilTxBytes = 0;  // nvmlPcieUtilCounter_t
inline constexpr int kPcieUtilRxBytes = 1;
// nvmlFieldValue_t (nvmlDeviceGetFieldValues): the caller sets field_id and scope_id
// (for NVLink fields, the link); NVML fills the rest, with its own return per value.
inline constexpr unsigned kFieldNvLinkThroughputDataTx = 138;  // KiB, cumulative
inline constexpr unsigned kFieldNvLinkThroughputDataRx = 139;
struct FieldValue {
  unsigned int field_id;
  unsigned int scope_id;
  long long timestamp;  // microseconds
  long long latency_usec;
  int value_type;  // nvmlValueType_t
  Return nvml_return;
  unsigned long long value;  // nvmlValue_t, a union of 8 bytes: the counters' ullVal
};
static_assert(sizeof(FieldValue) == 40);
static_assert(offsetof(FieldValue, value) == 32);

// Function types, one per symbol looked up with dlsym (the symbol name is the C name).
extern "C" {
using InitFn = Return();                                         // nvmlInit_v2
using ShutdownFn = Return();                                     // nvmlShutdown
using ErrorStringFn = const char*(Return);                       // nvmlErrorString
using DeviceGetCountFn = Return(unsigned int*);                  // nvmlDeviceGetCount_v2
using DeviceGetHandleByIndexFn = Return(unsigned int, Device*);  // ..._v2
using DeviceGetNameFn = Return(Device, char*, unsigned int);     // nvmlDeviceGetName
using DeviceGetUuidFn = Return(Device, char*, unsigned int);     // nvmlDeviceGetUUID
using DeviceGetMemoryInfoFn = Return(Device, Memory*);  // nvmlDeviceGetMemoryInfo
using DeviceGetPciInfoFn = Return(Device, PciInfo*);    // nvmlDeviceGetPciInfo_v3
// cpu_set_size counts unsigned longs; bit i of the set is CPU i.
using DeviceGetCpuAffinityFn = Return(Device, unsigned int, unsigned long*);
using DeviceGetNumaNodeIdFn = Return(Device, unsigned int*);  // nvmlDeviceGetNumaNodeId
using DeviceGetTopologyCommonAncestorFn = Return(Device, Device, TopologyLevel*);
using DeviceGetNvLinkStateFn = Return(Device, unsigned int, EnableState*);
using DeviceGetNvLinkRemotePciInfoFn = Return(Device, unsigned int, PciInfo*);  // _v2
using DeviceGetNvLinkRemoteDeviceTypeFn = Return(Device, unsigned int, NvLinkDeviceType*);
// Events and health (agent/gpu_health.h).
using EventSetCreateFn = Return(EventSet*);  // nvmlEventSetCreate
// nvmlDeviceRegisterEvents: a mask of kEvent* bits.
using DeviceRegisterEventsFn = Return(Device, unsigned long long, EventSet);
// timeout in milliseconds; kErrorTimeout when no event came.
using EventSetWaitFn = Return(EventSet, EventData*, unsigned int);  // nvmlEventSetWait_v2
using EventSetFreeFn = Return(EventSet);                            // nvmlEventSetFree
using DeviceGetSupportedEventTypesFn = Return(Device, unsigned long long*);
using DeviceGetTemperatureFn = Return(Device, int, unsigned int*);  // sensor; degrees C
// nvmlProcessInfo_t (the v2 layout, which nvmlDeviceGetComputeRunningProcesses_v3 fills):
// used_gpu_memory is bytes, or kValueNotAvailable (no permission, some MIG modes).
struct ProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;      // 0xFFFFFFFF: not a MIG instance
  unsigned int compute_instance_id;  // likewise
};
inline constexpr unsigned long long kValueNotAvailable = ~0ULL;
// In/out count; kErrorInsufficientSize (count set to what is needed) when too small.
using DeviceGetComputeRunningProcessesFn = Return(Device, unsigned int*, ProcessInfo*);
// Corrected rows, uncorrected rows, is_pending, failure_occurred.
using DeviceGetRemappedRowsFn = Return(Device, unsigned int*, unsigned int*,
                                       unsigned int*, unsigned int*);
// The node's checks (hachi doctor, diag/doctor.h) and link facts (diag/link_facts.h).
using SystemGetStringFn = Return(char*,
                                 unsigned int);     // ...DriverVersion, ...NVMLVersion
using SystemGetCudaDriverVersionFn = Return(int*);  // _v2; 12040 is CUDA 12.4
using DeviceGetEnableStateFn = Return(Device, EnableState*);  // ...PersistenceMode
using DeviceGetUintFn = Return(Device, unsigned int*);  // PCIe generation/width, replays
using DeviceGetNvLinkVersionFn = Return(Device, unsigned int, unsigned int*);
// Error type, counter type, count.
using DeviceGetTotalEccErrorsFn = Return(Device, int, int, unsigned long long*);
using DeviceGetEccModeFn = Return(Device, EnableState*, EnableState*);  // now, pending
// Cause, in/out count, addresses (may be null with count 0 to ask the count).
using DeviceGetRetiredPagesFn = Return(Device, int, unsigned int*, unsigned long long*);
using DeviceGetRetiredPagesPendingStatusFn = Return(Device, EnableState*);
using DeviceGetThrottleReasonsFn = Return(Device, unsigned long long*);
using DeviceGetMigModeFn = Return(Device, unsigned int*, unsigned int*);  // now, pending
// MIG devices (topo/nvml_probe.h). A MIG device handle is one more Device: name, UUID
// and memory answer for the slice. nvmlDeviceGetMaxMigDeviceCount (0 when MIG is off),
// nvmlDeviceIsMigDeviceHandle, nvmlDeviceGetGpuInstanceId and
// nvmlDeviceGetComputeInstanceId are DeviceGetUintFn.
inline constexpr unsigned kDeviceMigEnable = 1;  // NVML_DEVICE_MIG_ENABLE
// nvmlDeviceGetMigDeviceHandleByIndex: kErrorNotFound for an index with no device.
using DeviceGetMigDeviceHandleByIndexFn = Return(Device, unsigned int, Device*);
using DeviceGetDeviceHandleFromMigDeviceHandleFn = Return(Device, Device*);
using DeviceGetGpuFabricInfoFn = Return(Device, GpuFabricInfo*);
// Utilisation sampling. nvmlDeviceGetPowerUsage (milliwatts) is a DeviceGetUintFn.
using DeviceGetUtilizationRatesFn = Return(Device, Utilization*);
using DeviceGetClockInfoFn = Return(Device, int, unsigned int*);       // type, MHz
using DeviceGetPcieThroughputFn = Return(Device, int, unsigned int*);  // counter, KB/s
using DeviceGetFieldValuesFn = Return(Device, int, FieldValue*);
}

}  // namespace hachi::topo::nvml
