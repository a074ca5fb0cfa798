// The GPU topology of one node: its GPUs, NICs and the link between every GPU pair.
//
// A Topology is a plain value (copyable, thread-compatible). Readers build one from
// `nvidia-smi` text, NVML, a topology file or a preset; problems met while reading are
// kept as `findings` rather than thrown, so a half-broken node can still be shown and
// checked (DESIGN.md §2, topo/).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/gpu_set.h"
#include "core/status.h"

namespace hachi::topo {

// The PCIe relation of two devices, as `nvidia-smi topo -m` names it, best first.
enum class PciePath : uint8_t {
  kUnknown = 0,
  kSys,   // across the SMP interconnect between NUMA nodes (QPI/UPI/xGMI); old name SOC
  kNode,  // across host bridges within one NUMA node
  kPhb,   // through one PCIe host bridge (the CPU)
  kPxb,   // through several PCIe bridges, not the host bridge
  kPix,   // through at most one PCIe bridge (same switch)
};

std::string_view PciePathName(PciePath p);  // "SYS", "NODE", ... or "?"

// The link of one GPU pair: bonded NVLinks (0 if none) and the PCIe relation.
// `nvidia-smi topo -m` shows NV<n> when n > 0 and hides the PCIe relation then;
// NVML and presets give both.
struct Link {
  int nvlinks = 0;
  PciePath pcie = PciePath::kUnknown;

  bool known() const { return nvlinks > 0 || pcie != PciePath::kUnknown; }
  // What `nvidia-smi topo -m` would print: "NV12", "PIX", ..., "?" when unknown.
  std::string Label() const;
  friend bool operator==(const Link&, const Link&) = default;
};

// Parses one cell of the matrix: "X" (self), "NV<n>", "PIX", "PXB", "PHB", "NODE", "SYS"
// or "SOC". Case-sensitive, as nvidia-smi prints them. `is_self` is set for "X".
Result<Link> ParseLinkCell(std::string_view cell, bool* is_self);

enum class Severity : uint8_t { kInfo = 0, kWarning = 1, kError = 2 };
std::string_view SeverityName(Severity s);  // "info", "warning", "error"

// Something worth telling an operator about a node: a reading problem or an anomaly.
struct Finding {
  Severity severity = Severity::kInfo;
  std::string code;     // stable kebab-case id, e.g. "malformed-cell", "pcie-gpu"
  GpuSet gpus;          // the GPUs involved (may be empty)
  std::string message;  // a plain explanation with what to do about it
};

// One MIG device: a compute instance inside a GPU instance, what CUDA sees as a device
// when CUDA_VISIBLE_DEVICES names its UUID. Read as found (Hachi never changes the
// layout); a job on it also needs its /dev/nvidia-caps devices (topo/mig_caps.h).
struct MigDevice {
  // As NVIDIA and Slurm's gres spell it: "1g.10gb", "3g.40gb"; "1c.3g.40gb" for a
  // compute instance smaller than its GPU instance. Empty when unknown.
  std::string profile;
  std::string uuid;           // "MIG-…"; empty when unknown
  int gpu_instance = -1;      // GI id on its GPU (nvidia-caps' gpuN/giG); -1 unknown
  int compute_instance = -1;  // CI id within the GI (giG/ciC); -1 unknown
  int64_t memory_mib = 0;     // its share of the GPU's memory; 0 when unknown

  // The compute slices it has (the "1" of 1g.10gb, of 1c.3g.40gb), from the profile's
  // name; 0 when the name does not say.
  int slices() const;
  friend bool operator==(const MigDevice&, const MigDevice&) = default;
};

// "1g.10gb x7", "3g.40gb, 2g.20gb, 1g.10gb x2": the profiles in the order first met,
// each with its count when more than one; "no instances" for none.
std::string MigLayoutText(const std::vector<MigDevice>& devices);

struct Gpu {
  int index = 0;
  std::string uuid;          // "GPU-…"; empty when unknown
  std::string model;         // "NVIDIA H100 80GB HBM3"; empty when unknown
  int64_t memory_mib = 0;    // 0 when unknown
  std::string pci_bus_id;    // "00000000:18:00.0"; empty when unknown
  int numa_node = -1;        // -1 when unknown
  std::string cpu_affinity;  // Linux cpulist, e.g. "0-55,112-167"; empty when unknown
  // MIG mode as it is now (not pending a reset). On, the GPU runs jobs only on its MIG
  // devices: none at all until instances are created.
  bool mig_enabled = false;
  std::vector<MigDevice> mig_devices;  // in NVML's MIG device order; empty when off
};

struct Nic {
  std::string name;    // column name as shown: "NIC0" or "mlx5_0"
  std::string device;  // device name from the NIC Legend ("mlx5_0"), else = name
  std::vector<PciePath> gpu_paths;  // PCIe relation to each GPU, by GPU index
};

class Topology {
 public:
  Topology() = default;
  // n GPUs with indices 0..n-1 and every link unknown.
  explicit Topology(int gpu_count);

  int gpu_count() const { return static_cast<int>(gpus_.size()); }
  const std::vector<Gpu>& gpus() const { return gpus_; }
  std::vector<Gpu>& mutable_gpus() { return gpus_; }
  const Gpu& gpu(int i) const { return gpus_[i]; }
  Gpu& mutable_gpu(int i) { return gpus_[i]; }

  // The link from GPU a to GPU b (row a, column b), a != b. The matrix may be
  // asymmetric when read from a broken source; CheckTopology() reports that.
  const Link& link(int a, int b) const { return links_[a * gpu_count() + b]; }
  void SetLink(int a, int b, Link l) { links_[a * gpu_count() + b] = l; }
  void SetSymmetricLink(int a, int b, Link l) {
    SetLink(a, b, l);
    SetLink(b, a, l);
  }

  const std::vector<Nic>& nics() const { return nics_; }
  std::vector<Nic>& mutable_nics() { return nics_; }

  // Where this topology came from: "preset hgx-h100", "nvidia-smi topo -m (FILE)",
  // "NVML".
  const std::string& source() const { return source_; }
  void set_source(std::string s) { source_ = std::move(s); }
  // Findings met while reading (malformed rows, cut legends, merge conflicts).
  const std::vector<Finding>& read_findings() const { return read_findings_; }
  void AddReadFinding(Finding f) { read_findings_.push_back(std::move(f)); }

  GpuSet AllGpus() const { return GpuSet::FirstN(gpu_count()); }

 private:
  std::vector<Gpu> gpus_;
  std::vector<Link> links_;  // gpu_count x gpu_count, row-major; diagonal unused
  std::vector<Nic> nics_;
  std::string source_;
  std::vector<Finding> read_findings_;
};

}  // namespace hachi::topo
