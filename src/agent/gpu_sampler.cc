#include "agent/gpu_sampler.h"

namespace hachi::agent {
namespace nvml = topo::nvml;

Result<std::unique_ptr<GpuSampler>> GpuSampler::Open(const std::string& library,
                                                     const Clock* clock) {
  const std::string path = topo::ResolveNvmlLibrary(library);
  Result<const topo::NvmlApi*> loaded = topo::LoadNvml(path);
  if (!loaded.ok()) return loaded.status();
  std::unique_ptr<GpuSampler> s(new GpuSampler(clock != nullptr ? clock : RealClock()));
  s->api_ = **loaded;
  nvml::Return rc = s->api_.init();
  if (rc != nvml::kSuccess) {
    return Unavailable("NVML (" + path +
                       ") failed to initialise: " + s->api_.ErrorText(rc));
  }
  unsigned int count = 0;
  rc = s->api_.get_count(&count);
  if (rc != nvml::kSuccess || count == 0) {
    s->api_.shutdown();
    s->api_.shutdown = nullptr;  // not again in the destructor
    return Unavailable("NVML (" + path + ") sees no GPUs");
  }
  s->devices_.assign(count, nullptr);
  s->nvlink_kib_.assign(count, -1);
  for (unsigned i = 0; i < count; ++i) {
    if (s->api_.get_handle(i, &s->devices_[i]) != nvml::kSuccess)
      s->devices_[i] = nullptr;
  }
  return s;
}

GpuSampler::~GpuSampler() {
  if (api_.shutdown) api_.shutdown();
}

std::string GpuSampler::summary() const {
  std::string out;
  auto add = [&](bool has, const char* what) {
    if (!has) return;
    if (!out.empty()) out += ", ";
    out += what;
  };
  add(api_.get_utilization != nullptr, "utilisation");
  add(api_.get_memory != nullptr, "memory");
  add(api_.get_power != nullptr, "power");
  add(api_.get_clock != nullptr, "SM clock");
  add(api_.get_pcie_throughput != nullptr, "PCIe");
  add(api_.get_field_values != nullptr, "NVLink");
  return out.empty() ? "nothing" : out;
}

std::vector<state::GpuSample> GpuSampler::Sample() {
  const int64_t now = clock_->MonotonicMicros();
  const double elapsed = static_cast<double>(now - nvlink_at_us_) / 1e6;
  std::vector<state::GpuSample> out;
  out.reserve(devices_.size());
  for (size_t i = 0; i < devices_.size(); ++i) {
    state::GpuSample g;
    g.gpu = static_cast<int>(i);
    nvml::Device d = devices_[i];
    if (d == nullptr) {
      out.push_back(g);
      continue;
    }
    if (api_.get_utilization) {
      nvml::Utilization u{};
      if (api_.get_utilization(d, &u) == nvml::kSuccess) {
        g.util = static_cast<int>(std::min(u.gpu, 100u));
        g.mem_util = static_cast<int>(std::min(u.memory, 100u));
      }
    }
    if (api_.get_memory) {
      nvml::Memory m{};
      if (api_.get_memory(d, &m) == nvml::kSuccess) {
        g.mem_mib = static_cast<int64_t>(m.used >> 20);
      }
    }
    unsigned int v = 0;
    if (api_.get_power && api_.get_power(d, &v) == nvml::kSuccess) {
      g.power_w = static_cast<int>(v / 1000);
    }
    if (api_.get_clock && api_.get_clock(d, nvml::kClockSm, &v) == nvml::kSuccess) {
      g.sm_clock_mhz = static_cast<int>(v);
    }
    if (api_.get_pcie_throughput) {
      unsigned int tx = 0, rx = 0;
      if (api_.get_pcie_throughput(d, nvml::kPcieUtilTxBytes, &tx) == nvml::kSuccess &&
          api_.get_pcie_throughput(d, nvml::kPcieUtilRxBytes, &rx) == nvml::kSuccess) {
        g.pcie_kbs = static_cast<int64_t>(tx) + rx;
      }
    }
    if (api_.get_field_values) {
      // TX and RX data of every link, summed over those that answer.
      nvml::FieldValue f[2 * nvml::kNvLinkMaxLinks] = {};
      for (unsigned l = 0; l < nvml::kNvLinkMaxLinks; ++l) {
        f[2 * l] = {nvml::kFieldNvLinkThroughputDataTx, l, 0, 0, 0, 0, 0};
        f[2 * l + 1] = {nvml::kFieldNvLinkThroughputDataRx, l, 0, 0, 0, 0, 0};
      }
      long long kib = -1;
      if (api_.get_field_values(d, 2 * nvml::kNvLinkMaxLinks, f) == nvml::kSuccess) {
        for (const nvml::FieldValue& x : f) {
          if (x.nvml_return != nvml::kSuccess) continue;
          kib = std::max(kib, 0LL) + static_cast<long long>(x.value);
        }
      }
      if (kib >= 0 && nvlink_kib_[i] >= 0 && elapsed > 0 && kib >= nvlink_kib_[i]) {
        g.nvlink_kbs =
            static_cast<int64_t>(static_cast<double>(kib - nvlink_kib_[i]) / elapsed);
      }
      nvlink_kib_[i] = kib;
    }
    out.push_back(g);
  }
  nvlink_at_us_ = now;
  return out;
}

}  // namespace hachi::agent
