#include "diag/doctor.h"

#include <string>
#include <utility>

#include "diag/doctor_stages.h"
#include "topo/presets.h"

namespace hachi::diag {
namespace {

void Append(std::vector<CheckItem>& to, std::vector<CheckItem> items) {
  for (CheckItem& c : items) to.push_back(std::move(c));
}

}  // namespace

Result<DoctorReport> RunDoctor(const DoctorOptions& opts, const HostFacts& facts) {
  Expectation e;
  if (!opts.preset.empty()) {
    Result<topo::Topology> p = topo::LoadPreset(opts.preset);
    if (!p.ok()) return InvalidArgument("--preset: " + p.status().message());
    e.preset = opts.preset;
    e.gpus = p->gpu_count();
    e.topology = *std::move(p);
  }
  if (opts.expect_gpus > 0) e.gpus = opts.expect_gpus;
  e.mig = opts.mig;

  DoctorReport rep;
  rep.node = ReadHostname(opts.root);
  rep.preset = e.preset;
  rep.expected_gpus = e.gpus;
  rep.only_gpu = opts.gpu;
  const NvmlReadings r = ReadNvml(opts.nvml_library, UnderRoot(opts.root, "/sys"));
  if (opts.gpu >= 0 && r.error.empty() && opts.gpu >= r.device_count) {
    return InvalidArgument("--gpu " + std::to_string(opts.gpu) + ": the node has " +
                           std::to_string(r.device_count) + " GPUs");
  }
  rep.nvml = r.error.empty();
  rep.driver_version = r.driver_version;
  rep.nvml_version = r.nvml_version;
  rep.cuda_version = r.cuda_version;
  for (const GpuReadings& g : r.gpus) rep.gpus.push_back({g.index, g.name, g.bus_id});

  // In the order an operator works through a node: is the driver there and does it see
  // every GPU; the settings the driver needs (persistence); the links, NVLink first
  // because the NVSwitch fabric and the topology read depend on them; then memory
  // health, what the driver has logged, clocks and MIG; last the host around the GPUs.
  // Without NVML only the kernel log and the host can be checked.
  std::vector<CheckItem>& out = rep.checks;
  const int only = opts.gpu;
  Append(out, DriverChecks(r, e, only));
  if (rep.nvml) {
    Append(out, PersistenceChecks(r, only));
    std::vector<CheckItem> nvlink = NvLinkChecks(r, e, only);
    Append(out, nvlink);
    if (IsNvSwitchNode(r, e)) {
      Append(out, FabricChecks(r, FabricManagerRunning(opts.root), only));
    }
    Append(out, PcieChecks(r, only, opts.replay_warn));
    Append(out, AcsChecks(r, opts.root, only));
    Append(out, TopologyChecks(r, nvlink, only));
    Append(out, MemoryChecks(r, only));
  }
  // /dev/kmsg's records carry their facility; a saved log may be any text.
  const KernelLogInput log =
      opts.kernel_log.empty() ? KernelLogInput{UnderRoot(opts.root, "/dev/kmsg"),
                                               "/dev/kmsg", topo::KernelLogSource::kKmsg}
                              : KernelLogInput{opts.kernel_log, opts.kernel_log,
                                               topo::KernelLogSource::kSavedText};
  Append(out, XidChecks(r, log, only, opts.xid_since_s, facts.monotonic_usec));
  if (rep.nvml) {
    Append(out, ClockChecks(r, only));
    Append(out, MigChecks(r, e, only));
  }
  Append(out, HostChecks(opts.root, facts));
  return rep;
}

int DoctorExitCode(const DoctorReport& r) { return ChecksExitCode(r.checks); }

}  // namespace hachi::diag
