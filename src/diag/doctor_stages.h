// The stages of `hachi doctor` (doctor.h), for doctor.cc to wire and the tests to call
// one by one. Reading and judging are apart: ReadNvml turns NVML's answers into plain
// values (NvmlReadings), the check functions judge those values and the files under the
// root. Internal to diag/; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "diag/check.h"
#include "diag/doctor.h"
#include "diag/host_facts.h"
#include "diag/link_facts.h"
#include "topo/kernel_log_line.h"
#include "topo/topology.h"

namespace hachi::diag {

// What NVML said about one GPU. nullopt (or 0 for the PCIe fields): NVML did not say.
struct GpuReadings {
  int index = 0;
  std::string name, bus_id;
  std::string error;  // no handle (a lost GPU): nothing else is known
  std::optional<bool> persistence;
  PcieLinkFacts pcie;
  std::optional<unsigned> replays;
  std::vector<unsigned> links_up, links_down;  // NVLinks NVML answered for, by number
  int nvlink_version = 0;                      // of the first link up (NVML's numbering)
  std::optional<bool> ecc_on, ecc_pending_on;
  std::optional<uint64_t> ecc_uncorrected_volatile, ecc_uncorrected_aggregate;
  std::optional<unsigned> retired_sbe, retired_dbe;
  std::optional<bool> retired_pending;
  struct Remap {
    unsigned corrected = 0, uncorrected = 0;
    bool pending = false, failure = false;
  };
  std::optional<Remap> remap;
  std::optional<uint64_t> clock_reasons;  // nvmlClocksEventReason bits
  std::optional<unsigned> mig_now, mig_pending;
  struct Fabric {
    int state = 0;   // nvml::GpuFabricState
    int status = 0;  // nvml::Return, meaningful once completed
    std::string status_text;
  };
  std::optional<Fabric>
      fabric;  // nullopt: not supported (no NVSwitch fabric, pre-Hopper)
};

struct NvmlReadings {
  std::string library;  // as loaded
  std::string error;    // why NVML cannot be used; then nothing below is known
  std::string driver_version, nvml_version, cuda_version;
  int device_count = 0;
  topo::Topology topology;     // NVML's view of the links (topo/nvml_probe.h)
  std::string topology_error;  // why there is none
  std::vector<GpuReadings> gpus;
};

// Loads and initialises NVML, reads everything, shuts it down. Never fails: what cannot
// be read is left unknown, and `error` says when NVML itself cannot be used.
NvmlReadings ReadNvml(const std::string& library, const std::string& sysfs_root);

// What the node should be: from --preset and --expect-gpus.
struct Expectation {
  std::string preset;                      // "" none
  int gpus = 0;                            // 0: no expectation
  std::optional<topo::Topology> topology;  // the preset's
  std::optional<bool> mig;
};

// The GPUs a GPU check covers: all, or only --gpu's.
inline bool Selected(int only_gpu, int gpu) { return only_gpu < 0 || only_gpu == gpu; }

// doctor_links.cc: the driver, the GPU count and reachable GPUs, NVLinks per GPU and
// pair, the NVSwitch fabric (with whether the fabric manager runs: nullopt when /proc
// could not be read), and the topology's anomalies (topo::CheckTopology).
std::vector<CheckItem> DriverChecks(const NvmlReadings& r, const Expectation& e,
                                    int only_gpu);
std::vector<CheckItem> NvLinkChecks(const NvmlReadings& r, const Expectation& e,
                                    int only_gpu);
// True when the node's GPUs meet through NVSwitches (the preset's class, else NVML's
// links, else any GPU answering for its fabric registration).
bool IsNvSwitchNode(const NvmlReadings& r, const Expectation& e);
std::vector<CheckItem> FabricChecks(const NvmlReadings& r, std::optional<bool> fm_running,
                                    int only_gpu);
std::vector<CheckItem> TopologyChecks(const NvmlReadings& r,
                                      const std::vector<CheckItem>& nvlink_items,
                                      int only_gpu);

// doctor_gpu.cc: per GPU, from NVML's answers.
std::vector<CheckItem> PersistenceChecks(const NvmlReadings& r, int only_gpu);
std::vector<CheckItem> PcieChecks(const NvmlReadings& r, int only_gpu,
                                  unsigned replay_warn);
std::vector<CheckItem> MemoryChecks(const NvmlReadings& r, int only_gpu);  // ECC, pages
std::vector<CheckItem> ClockChecks(const NvmlReadings& r, int only_gpu);
std::vector<CheckItem> MigChecks(const NvmlReadings& r, const Expectation& e,
                                 int only_gpu);

// doctor_pci.cc: ACS on the PCIe bridges above each GPU, read from
// <root>/sys/bus/pci/devices/<bus id>/.. (each bridge's `config`).
std::vector<CheckItem> AcsChecks(const NvmlReadings& r, const std::string& root,
                                 int only_gpu);

// doctor_host.cc: node-wide checks of the files under `root` and the host facts.
std::string ReadHostname(const std::string& root);
// Whether a process named nv-fabricmanager runs (<root>/proc/*/comm); nullopt when
// <root>/proc cannot be listed.
std::optional<bool> FabricManagerRunning(const std::string& root);
std::vector<CheckItem> HostChecks(const std::string& root, const HostFacts& facts);

// Where the xid check reads the kernel log: `path`, named `shown` in the report, read as
// `source` (/dev/kmsg itself, or a log an administrator saved with --kernel-log: the
// formats of topo/kernel_log_line.h).
struct KernelLogInput {
  std::string path;
  std::string shown;
  topo::KernelLogSource source = topo::KernelLogSource::kKmsg;
};
// doctor_xid.cc: the kernel log's NVRM Xid lines (read from its start: since boot for
// /dev/kmsg), one item per GPU and Xid; only lines the kernel's NVIDIA driver wrote
// count (topo/xid.h, ParseNvrmXidLine). `since_s` > 0: only records stamped (kmsg's
// microseconds since boot) at or after `now_usec` - since_s; a line without a kmsg stamp
// (a journalctl file) always counts, and without `now_usec` the window cannot apply
// (said in the evidence).
std::vector<CheckItem> XidChecks(const NvmlReadings& r, const KernelLogInput& log,
                                 int only_gpu, int64_t since_s = 0,
                                 std::optional<uint64_t> now_usec = std::nullopt);

// "/proc/mounts" under `root` ("/" leaves it as is).
std::string UnderRoot(const std::string& root, const std::string& path);

}  // namespace hachi::diag
