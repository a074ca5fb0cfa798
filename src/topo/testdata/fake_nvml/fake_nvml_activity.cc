// The fake NVML's utilisation sampling calls (agent/gpu_sampler.h): each
// GPU's Activity (fake_nvml_state.h) as the events file's `util`, `memused`, `power`,
// `smclock`, `pcietput`, `nvlinktput` and `nvlinkkib` lines set it (fake_nvml.cc's
// header comment).
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/strings.h"
#include "topo/testdata/fake_nvml/fake_nvml_state.h"

namespace fake_nvml {
namespace {

// "5,95,95": into *out when every value is a number in 0..max.
bool ParseList(const std::string& text, long long max, std::vector<long long>* out) {
  std::vector<long long> v;
  for (std::string_view w : hachi::Split(text, ',')) {
    std::optional<long long> x = hachi::ParseInt(w);
    if (!x || *x < 0 || *x > max) return false;
    v.push_back(*x);
  }
  if (v.empty()) return false;
  *out = std::move(v);
  return true;
}

// A non-negative number, else -1.
long long Number(const std::vector<std::string>& f, size_t k) {
  std::optional<long long> v = k < f.size() ? hachi::ParseInt(f[k]) : std::nullopt;
  return v && *v >= 0 ? *v : -1;
}

}  // namespace

double SteadySeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool ApplyActivityLine(Activity& a, const std::vector<std::string>& f) {
  const std::string& what = f[0];
  const long long arg = Number(f, 2);
  if (what == "util" && (f.size() == 3 || f.size() == 4) &&
      ParseList(f[2], 100, &a.util) &&
      (f.size() == 3 || ParseList(f[3], 100, &a.mem_util))) {
    a.tick = 0;
  } else if (what == "memused" && f.size() == 3 &&
             ParseList(f[2], 1LL << 40, &a.mem_used_mib)) {
  } else if (what == "power" && f.size() == 3 && arg >= 0) {
    a.power_mw = static_cast<unsigned>(arg * 1000);
  } else if (what == "smclock" && f.size() == 3 && arg >= 0) {
    a.sm_clock_mhz = static_cast<unsigned>(arg);
  } else if (what == "pcietput" && f.size() == 4 && arg >= 0 && Number(f, 3) >= 0) {
    a.pcie_tx_kbs = static_cast<unsigned>(arg);
    a.pcie_rx_kbs = static_cast<unsigned>(Number(f, 3));
  } else if (what == "nvlinkkib" && f.size() == 3 &&
             ParseList(f[2], 1LL << 60, &a.nvlink_kib)) {
  } else if (what == "nvlinktput" && f.size() == 3 && arg >= 0) {
    const double now = SteadySeconds();
    a.nvlink_base_kib += static_cast<unsigned long long>(
        static_cast<double>(a.nvlink_kib_per_s) * (now - a.nvlink_since));
    a.nvlink_since = now;
    a.nvlink_kib_per_s = static_cast<unsigned long long>(arg);
  } else {
    return false;
  }
  return true;
}

}  // namespace fake_nvml

using namespace fake_nvml;  // NOLINT: the exported functions below are its users

FAKE_NVML_API nvml::Return nvmlDeviceGetUtilizationRates(nvml::Device d,
                                                         nvml::Utilization* u) {
  std::lock_guard<std::mutex> lock(Mu());
  if (Unsupported("nvmlDeviceGetUtilizationRates")) return nvml::kErrorNotSupported;
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  if (!u) return nvml::kErrorInvalidArgument;
  Activity& a = S().health[i].activity;
  u->gpu = static_cast<unsigned>(std::max(0LL, Activity::At(a.util, a.tick)));
  u->memory = static_cast<unsigned>(std::max(0LL, Activity::At(a.mem_util, a.tick)));
  ++a.tick;
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetPowerUsage(nvml::Device d, unsigned int* mw) {
  std::lock_guard<std::mutex> lock(Mu());
  if (Unsupported("nvmlDeviceGetPowerUsage")) return nvml::kErrorNotSupported;
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  if (!mw) return nvml::kErrorInvalidArgument;
  *mw = S().health[i].activity.power_mw;
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetClockInfo(nvml::Device d, int type,
                                                  unsigned int* mhz) {
  std::lock_guard<std::mutex> lock(Mu());
  if (Unsupported("nvmlDeviceGetClockInfo")) return nvml::kErrorNotSupported;
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  if (!mhz || type != nvml::kClockSm) return nvml::kErrorInvalidArgument;
  *mhz = S().health[i].activity.sm_clock_mhz;
  return nvml::kSuccess;
}

FAKE_NVML_API nvml::Return nvmlDeviceGetPcieThroughput(nvml::Device d, int counter,
                                                       unsigned int* kbs) {
  std::lock_guard<std::mutex> lock(Mu());
  if (Unsupported("nvmlDeviceGetPcieThroughput")) return nvml::kErrorNotSupported;
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  if (!kbs) return nvml::kErrorInvalidArgument;
  const Activity& a = S().health[i].activity;
  if (counter == nvml::kPcieUtilTxBytes) {
    *kbs = a.pcie_tx_kbs;
  } else if (counter == nvml::kPcieUtilRxBytes) {
    *kbs = a.pcie_rx_kbs;
  } else {
    return nvml::kErrorInvalidArgument;
  }
  return nvml::kSuccess;
}

// The NVLink data counters (138, 139) of link 0 grow at the `nvlinktput` rate; other
// links and other fields answer NOT_SUPPORTED in their value's return.
FAKE_NVML_API nvml::Return nvmlDeviceGetFieldValues(nvml::Device d, int count,
                                                    nvml::FieldValue* values) {
  std::lock_guard<std::mutex> lock(Mu());
  if (Unsupported("nvmlDeviceGetFieldValues")) return nvml::kErrorNotSupported;
  int i = -1;
  if (nvml::Return rc = Use(d, &i); rc != nvml::kSuccess) return rc;
  if (count < 0 || (count > 0 && !values)) return nvml::kErrorInvalidArgument;
  const Activity& a = S().health[i].activity;
  const double now = SteadySeconds();
  // Scripted values follow the samples, as memory does (the latest utilisation read).
  const unsigned long long kib =
      !a.nvlink_kib.empty()
          ? static_cast<unsigned long long>(
                Activity::At(a.nvlink_kib, a.tick > 0 ? a.tick - 1 : 0))
          : a.nvlink_base_kib +
                static_cast<unsigned long long>(static_cast<double>(a.nvlink_kib_per_s) *
                                                (now - a.nvlink_since));
  for (int k = 0; k < count; ++k) {
    nvml::FieldValue& v = values[k];
    v.timestamp = static_cast<long long>(now * 1e6);
    v.latency_usec = 0;
    v.value_type = 3;  // NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
    const bool nvlink = v.field_id == nvml::kFieldNvLinkThroughputDataTx ||
                        v.field_id == nvml::kFieldNvLinkThroughputDataRx;
    if (nvlink && v.scope_id == 0 && !S().links[i].empty()) {
      v.nvml_return = nvml::kSuccess;
      v.value = kib;
    } else {
      v.nvml_return = nvml::kErrorNotSupported;
      v.value = 0;
    }
  }
  return nvml::kSuccess;
}
