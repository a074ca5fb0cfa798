// doctor's reading stage: NVML's answers as plain values (doctor_stages.h), so that the
// checks judge values and never call NVML themselves.
#include <string>

#include "diag/doctor_stages.h"
#include "topo/nvml_api.h"
#include "topo/nvml_library.h"
#include "topo/nvml_probe.h"

namespace hachi::diag {
namespace {

namespace nv = topo::nvml;

// `value` once `call` (which fills it) has answered kSuccess. A function, not an
// expression: the call must run before the value is read.
template <typename T, typename Call>
std::optional<T> Answer(T& value, Call call) {
  return call() == nv::kSuccess ? std::optional<T>(value) : std::nullopt;
}

std::optional<bool> EnableState(nv::DeviceGetEnableStateFn* fn, nv::Device dev) {
  nv::EnableState s = nv::kFeatureDisabled;
  if (!fn || fn(dev, &s) != nv::kSuccess) return std::nullopt;
  return s == nv::kFeatureEnabled;
}

std::optional<unsigned> Uint(nv::DeviceGetUintFn* fn, nv::Device dev) {
  unsigned v = 0;
  if (!fn) return std::nullopt;
  return Answer(v, [&] { return fn(dev, &v); });
}

std::string SystemString(nv::SystemGetStringFn* fn) {
  char buf[nv::kSystemDriverVersionBufferSize] = {};
  if (!fn || fn(buf, sizeof(buf)) != nv::kSuccess) return "";
  return buf;
}

void ReadMemory(const topo::NvmlApi& api, nv::Device dev, GpuReadings& g) {
  if (api.get_ecc_mode) {
    nv::EnableState now = 0, pending = 0;
    if (api.get_ecc_mode(dev, &now, &pending) == nv::kSuccess) {
      g.ecc_on = now == nv::kFeatureEnabled;
      g.ecc_pending_on = pending == nv::kFeatureEnabled;
    }
  }
  if (api.get_ecc_total) {
    auto total = [&](int counter) -> std::optional<uint64_t> {
      unsigned long long n = 0;
      return Answer(n, [&] {
        return api.get_ecc_total(dev, nv::kMemoryErrorUncorrected, counter, &n);
      });
    };
    g.ecc_uncorrected_volatile = total(nv::kEccCounterVolatile);
    g.ecc_uncorrected_aggregate = total(nv::kEccCounterAggregate);
  }
  if (api.get_retired_pages) {
    // A count of 0 with no buffer asks how many there are.
    unsigned sbe = 0, dbe = 0;
    nv::Return a =
        api.get_retired_pages(dev, nv::kPageRetirementMultipleSbe, &sbe, nullptr);
    nv::Return b = api.get_retired_pages(dev, nv::kPageRetirementDbe, &dbe, nullptr);
    if ((a == nv::kSuccess || a == nv::kErrorInsufficientSize) &&
        (b == nv::kSuccess || b == nv::kErrorInsufficientSize)) {
      g.retired_sbe = sbe;
      g.retired_dbe = dbe;
    }
  }
  if (api.get_retired_pending) {
    nv::EnableState p = 0;
    if (api.get_retired_pending(dev, &p) == nv::kSuccess) {
      g.retired_pending = p == nv::kFeatureEnabled;
    }
  }
  if (api.get_remapped_rows) {
    unsigned corr = 0, unc = 0, pending = 0, failure = 0;
    if (api.get_remapped_rows(dev, &corr, &unc, &pending, &failure) == nv::kSuccess) {
      g.remap = GpuReadings::Remap{corr, unc, pending != 0, failure != 0};
    }
  }
}

GpuReadings ReadGpu(const topo::NvmlApi& api, const topo::Topology& t, int i) {
  GpuReadings g;
  g.index = i;
  if (i < t.gpu_count()) {
    g.name = t.gpu(i).model;
    g.bus_id = t.gpu(i).pci_bus_id;
  }
  nv::Device dev = nullptr;
  if (nv::Return rc = api.get_handle(static_cast<unsigned>(i), &dev);
      rc != nv::kSuccess) {
    g.error = "nvmlDeviceGetHandleByIndex_v2: " + api.ErrorText(rc);
    return g;
  }
  // Without the topology probe's answer, NVML's own (the names Xid lines are matched by).
  if (char name[nv::kDeviceNameBufferSize] = {};
      g.name.empty() && api.get_name && api.get_name(dev, name, sizeof(name)) == 0) {
    g.name = name;
  }
  if (nv::PciInfo pci{}; g.bus_id.empty() && api.get_pci && api.get_pci(dev, &pci) == 0) {
    g.bus_id = pci.bus_id;
  }
  g.persistence = EnableState(api.get_persistence, dev);
  auto lanes = [](std::optional<unsigned> v) { return v && *v <= 64 ? int(*v) : 0; };
  g.pcie.gen = lanes(Uint(api.get_pcie_gen, dev));
  g.pcie.width = lanes(Uint(api.get_pcie_width, dev));
  g.pcie.max_gen = lanes(Uint(api.get_pcie_max_gen, dev));
  g.pcie.max_width = lanes(Uint(api.get_pcie_max_width, dev));
  g.replays = Uint(api.get_pcie_replays, dev);
  for (unsigned link = 0; api.get_nvlink_state && link < nv::kNvLinkMaxLinks; ++link) {
    nv::EnableState active = nv::kFeatureDisabled;
    // Links a GPU does not have answer "not supported" (or invalid argument).
    if (api.get_nvlink_state(dev, link, &active) != nv::kSuccess) continue;
    (active == nv::kFeatureEnabled ? g.links_up : g.links_down).push_back(link);
    unsigned v = 0;
    if (active == nv::kFeatureEnabled && g.nvlink_version == 0 &&
        api.get_nvlink_version && api.get_nvlink_version(dev, link, &v) == nv::kSuccess) {
      g.nvlink_version = static_cast<int>(v);
    }
  }
  ReadMemory(api, dev, g);
  if (api.get_throttle) {
    unsigned long long reasons = 0;
    if (std::optional<unsigned long long> v =
            Answer(reasons, [&] { return api.get_throttle(dev, &reasons); })) {
      g.clock_reasons = *v;
    }
  }
  if (api.get_mig_mode) {
    unsigned now = 0, pending = 0;
    if (api.get_mig_mode(dev, &now, &pending) == nv::kSuccess) {
      g.mig_now = now;
      g.mig_pending = pending;
    }
  }
  if (api.get_fabric) {
    nv::GpuFabricInfo info{};
    if (api.get_fabric(dev, &info) == nv::kSuccess &&
        info.state != nv::kGpuFabricNotSupported) {
      g.fabric = GpuReadings::Fabric{
          info.state, info.status,
          info.status == nv::kSuccess ? std::string() : api.ErrorText(info.status)};
    }
  }
  return g;
}

}  // namespace

NvmlReadings ReadNvml(const std::string& library, const std::string& sysfs_root) {
  NvmlReadings r;
  topo::NvmlProbeOptions probe;
  probe.library = library;
  probe.sysfs_root = sysfs_root;
  r.library = topo::NvmlLibraryPath(probe);
  Result<const topo::NvmlApi*> loaded = topo::LoadNvml(r.library);
  if (!loaded.ok()) {
    r.error = loaded.status().message();
    return r;
  }
  const topo::NvmlApi& api = **loaded;
  if (nv::Return rc = api.init(); rc != nv::kSuccess) {
    r.error = "nvmlInit_v2: " + api.ErrorText(rc);
    return r;
  }
  r.driver_version = SystemString(api.driver_version);
  r.nvml_version = SystemString(api.nvml_version);
  if (int v = 0; api.cuda_version && api.cuda_version(&v) == nv::kSuccess && v > 0) {
    r.cuda_version = std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  }
  unsigned count = 0;
  if (nv::Return rc = api.get_count(&count); rc != nv::kSuccess) {
    r.error = "nvmlDeviceGetCount_v2: " + api.ErrorText(rc);
    api.shutdown();
    return r;
  }
  r.device_count = static_cast<int>(count);
  // The topology probe initialises NVML again (NVML counts), and reads names, bus ids
  // and the NVLink count of every pair the way `hachi topo` does.
  if (count > 0) {
    if (Result<topo::Topology> t = topo::ProbeNvml(probe); t.ok()) {
      r.topology = *std::move(t);
    } else {
      r.topology_error = t.status().message();
    }
  }
  for (int i = 0; i < r.device_count; ++i) r.gpus.push_back(ReadGpu(api, r.topology, i));
  api.shutdown();
  return r;
}

}  // namespace hachi::diag
