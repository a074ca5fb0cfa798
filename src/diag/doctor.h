// `hachi doctor`: the checks of the field's runbooks for one GPU node, each an OK / WARN
// / FAIL item with its evidence and the fix (diag/check.h): the driver and NVML, the GPU
// count, persistence mode, every NVLink and the NVSwitch fabric, PCIe links (width,
// generation, replays) and ACS on the bridges above each GPU, the topology's anomalies
// (topo/analysis.h), ECC, retired pages and row remapping, the kernel log's Xid lines,
// clock throttling, MIG mode, and the host's /dev/shm, memlock limit, cgroups and time
// synchronisation. What each check reads and its thresholds: docs/nvml.md.
//
// The OS is read through a seam so that tests are deterministic: every /proc, /sys and
// /dev path under DoctorOptions::root, and the facts that only syscalls give (statvfs of
// /dev/shm, RLIMIT_MEMLOCK, ntp_adjtime) as a HostFacts value (host_facts.h). NVML is
// the library named by nvml_library (the fake one in tests).
//
// RunDoctor is single-threaded (NVML is initialised and shut down inside it); the
// renderers are pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "diag/check.h"
#include "diag/host_facts.h"

namespace hachi::diag {

struct DoctorOptions {
  std::string root = "/";      // where /proc, /sys and /dev are read
  std::string nvml_library;    // "" = $HACHI_NVML_LIBRARY, else libnvidia-ml.so.1
  std::string kernel_log;      // "" = <root>/dev/kmsg, read from its start
  int gpu = -1;                // >= 0: only this GPU's checks (node-wide ones still run)
  int expect_gpus = 0;         // 0: the preset's count, else no expectation
  std::string preset;          // the node this should be (topo/presets.h); "" none
  std::optional<bool> mig;     // the MIG mode every GPU should be in; nullopt: report it
  unsigned replay_warn = 100;  // PCIe replays since the driver loaded above which: WARN
  // > 0: only Xid lines /dev/kmsg stamped in the last this many seconds count (a GPU
  // back from repair: the Xid that took it out is history). 0: since boot.
  int64_t xid_since_s = 0;
};

struct DoctorGpu {
  int index = 0;
  std::string name;    // "NVIDIA H100 80GB HBM3"
  std::string bus_id;  // "00000000:18:00.0"
};

struct DoctorReport {
  std::string node;            // <root>/proc/sys/kernel/hostname; "" unknown
  bool nvml = false;           // NVML loaded and initialised
  std::string driver_version;  // "550.54.15"; "" unknown
  std::string nvml_version;    // "12.550.54.15"
  std::string cuda_version;    // the CUDA driver API the driver supports: "12.4"
  std::vector<DoctorGpu> gpus;
  std::string preset;     // as given
  int expected_gpus = 0;  // 0: none
  int only_gpu = -1;      // --gpu
  std::vector<CheckItem> checks;
};

// Runs every check. kInvalidArgument for options that cannot be met (an unknown preset,
// a --gpu the node does not have); anything the node lacks, NVML included, is a check
// item, not an error.
Result<DoctorReport> RunDoctor(const DoctorOptions& opts, const HostFacts& facts);

// 0 all OK, 1 the worst is a WARN, 2 a FAIL.
int DoctorExitCode(const DoctorReport& r);

// A table for people (OK items of one check with the same evidence folded into one row;
// every WARN and FAIL with its fix), and one JSON object:
// {"node", "driver": {"version", "nvml_version", "cuda_version"} | null, "gpus": [...],
//  "expected": {"preset", "gpus"} (when given), "gpu" (with --gpu), "checks": [...],
//  "status": "OK" | "WARN" | "FAIL"}.
std::string RenderDoctorText(const DoctorReport& r);
std::string RenderDoctorJson(const DoctorReport& r);

}  // namespace hachi::diag
