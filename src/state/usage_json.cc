#include "state/usage_json.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "state/json_values.h"

namespace hachi::state {
namespace {

using json = nlohmann::json;

// One decimal: 93.7.
double Round1(double v) { return std::round(v * 10) / 10; }

// Reads fields of one object; the first error sticks. Fields not asked for are
// ignored (the derived ones).
class Reader {
 public:
  Reader(const json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j.is_object())
      status_ = InvalidArgument(path_ + ": " + JsonTypeProblem("an object", j));
  }
  template <typename T>
  void Int(const char* key, T* out) {
    if (!status_.ok()) return;
    auto it = j_.find(key);
    if (it == j_.end()) return;
    const std::string problem = ReadJsonInt(*it, out);
    if (!problem.empty()) status_ = InvalidArgument(path_ + "." + key + ": " + problem);
  }
  void String(const char* key, std::string* out) {
    if (!status_.ok()) return;
    auto it = j_.find(key);
    if (it == j_.end()) return;
    if (!it->is_string()) {
      status_ =
          InvalidArgument(path_ + "." + key + ": " + JsonTypeProblem("a string", *it));
      return;
    }
    *out = it->get<std::string>();
  }
  void Bool(const char* key, bool* out) {
    if (!status_.ok()) return;
    auto it = j_.find(key);
    if (it == j_.end()) return;
    if (!it->is_boolean()) {
      status_ =
          InvalidArgument(path_ + "." + key + ": " + JsonTypeProblem("a boolean", *it));
      return;
    }
    *out = it->get<bool>();
  }
  // An array whose elements are arrays of `n` integers.
  const json* Rows(const char* key, size_t n) {
    if (!status_.ok()) return nullptr;
    auto it = j_.find(key);
    if (it == j_.end()) return nullptr;
    const std::string p = path_ + "." + key;
    if (!it->is_array()) {
      status_ = InvalidArgument(p + ": " + JsonTypeProblem("an array", *it));
      return nullptr;
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const json& row = (*it)[i];
      bool ok = row.is_array() && row.size() == n;
      for (size_t k = 0; ok && k < n; ++k) ok = row[k].is_number_integer();
      if (!ok) {
        status_ =
            InvalidArgument(p + "[" + std::to_string(i) + "]: expected an array of " +
                            std::to_string(n) + " integers");
        return nullptr;
      }
    }
    return &*it;
  }
  const json* Array(const char* key) {
    if (!status_.ok()) return nullptr;
    auto it = j_.find(key);
    if (it == j_.end()) return nullptr;
    if (!it->is_array()) {
      status_ =
          InvalidArgument(path_ + "." + key + ": " + JsonTypeProblem("an array", *it));
      return nullptr;
    }
    return &*it;
  }
  void Fail(Status s) {
    if (status_.ok()) status_ = std::move(s);
  }
  const Status& status() const { return status_; }
  const std::string& path() const { return path_; }

 private:
  const json& j_;
  std::string path_;
  Status status_;
};

json GpuJson(const GpuUsage& g) {
  json hist = json::array();
  for (size_t v = 0; v < g.util_hist.size(); ++v) {
    if (g.util_hist[v] > 0) hist.push_back(json::array({v, g.util_hist[v]}));
  }
  json series = json::array();
  for (const UsagePoint& p : g.series) {
    series.push_back(json::array({p.at, p.samples, p.util, p.mem_mib}));
  }
  json j{{"node", g.node},
         {"gpu", g.gpu},
         {"samples", g.samples},
         // Derived (readers that display).
         {"util_mean", Round1(g.UtilMean())},
         {"util_p50", g.UtilPercentile(0.5)},
         {"util_p95", g.UtilPercentile(0.95)},
         {"util_max", g.util_max},
         {"mem_peak_mib", g.mem_peak_mib},
         {"mem_util_mean", Round1(g.MemUtilMean())},
         {"power_mean_w", Round1(g.PowerMean())},
         {"power_max_w", g.power_max_w},
         {"sm_clock_mean_mhz", Round1(g.SmClockMean())},
         {"pcie_mean_kbs", Round1(g.PcieMean())},
         {"nvlink_mean_kbs", Round1(g.NvLinkMean())},
         // Raw (what a restart resumes from).
         {"util_sum", g.util_sum},
         {"util_hist", std::move(hist)},
         {"mem_util_sum", g.mem_util_sum},
         {"mem_util_samples", g.mem_util_samples},
         {"power_sum_w", g.power_sum_w},
         {"power_samples", g.power_samples},
         {"sm_clock_sum", g.sm_clock_sum},
         {"sm_clock_samples", g.sm_clock_samples},
         {"pcie_sum_kbs", g.pcie_sum_kbs},
         {"pcie_samples", g.pcie_samples},
         {"nvlink_sum_kbs", g.nvlink_sum_kbs},
         {"nvlink_samples", g.nvlink_samples},
         {"step", g.step},
         {"series", std::move(series)}};
  return j;
}

Status ReadGpu(const json& j, const std::string& path, GpuUsage* g) {
  Reader r(j, path);
  r.String("node", &g->node);
  r.Int("gpu", &g->gpu);
  r.Int("samples", &g->samples);
  r.Int("util_max", &g->util_max);
  r.Int("mem_peak_mib", &g->mem_peak_mib);
  r.Int("power_max_w", &g->power_max_w);
  r.Int("util_sum", &g->util_sum);
  r.Int("mem_util_sum", &g->mem_util_sum);
  r.Int("mem_util_samples", &g->mem_util_samples);
  r.Int("power_sum_w", &g->power_sum_w);
  r.Int("power_samples", &g->power_samples);
  r.Int("sm_clock_sum", &g->sm_clock_sum);
  r.Int("sm_clock_samples", &g->sm_clock_samples);
  r.Int("pcie_sum_kbs", &g->pcie_sum_kbs);
  r.Int("pcie_samples", &g->pcie_samples);
  r.Int("nvlink_sum_kbs", &g->nvlink_sum_kbs);
  r.Int("nvlink_samples", &g->nvlink_samples);
  r.Int("step", &g->step);
  if (const json* hist = r.Rows("util_hist", 2)) {
    for (const json& row : *hist) {
      const int64_t v = row[0].get<int64_t>(), n = row[1].get<int64_t>();
      if (v < 0 || v > 100 || n < 0) {
        r.Fail(InvalidArgument(path + ".util_hist: [" + std::to_string(v) + ", " +
                               std::to_string(n) + "] is not a utilisation and a count"));
        break;
      }
      g->util_hist[static_cast<size_t>(v)] = n;
    }
  }
  if (const json* series = r.Rows("series", 4)) {
    for (const json& row : *series) {
      g->series.push_back(UsagePoint{row[0].get<int64_t>(), row[1].get<int>(),
                                     row[2].get<int>(), row[3].get<int64_t>()});
    }
  }
  if (r.status().ok() && (g->step <= 0 || g->gpu < 0)) {
    return InvalidArgument(path + ": step and gpu must be positive");
  }
  return r.status();
}

}  // namespace

std::string UsageToJson(const JobUsage& u) {
  json nodes = json::array();
  for (const NodeUsage& n : u.nodes) {
    nodes.push_back(json{{"node", n.node},
                         {"cpus", n.cpus},
                         {"mem_limit_mib", n.mem_limit_mib},
                         {"cpu_usec", n.cpu_usec},
                         {"cpu_at", n.cpu_at},
                         {"mem_peak_mib", n.mem_peak_mib}});
  }
  json gpus = json::array();
  for (const GpuUsage& g : u.gpus) gpus.push_back(GpuJson(g));
  json j{{"job", u.job},
         {"start_time", u.start_time},
         {"last_at", u.last_at},
         {"idle_since", u.idle_since},
         {"idle_warned", u.idle_warned},
         // Derived.
         {"cpu_seconds", Round1(u.CpuSeconds())},
         {"cpu_efficiency", std::round(u.CpuEfficiency() * 1000) / 1000},
         {"mem_peak_mib", u.MemPeakMib()},
         {"gpu_util_mean", Round1(u.GpuUtilMean())},
         {"nodes", std::move(nodes)},
         {"gpus", std::move(gpus)}};
  return j.dump();
}

Result<JobUsage> UsageFromJson(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("usage: not valid JSON");
  JobUsage u;
  Reader r(j, "usage");
  r.Int("job", &u.job);
  r.Int("start_time", &u.start_time);
  r.Int("last_at", &u.last_at);
  r.Int("idle_since", &u.idle_since);
  r.Bool("idle_warned", &u.idle_warned);
  if (const json* nodes = r.Array("nodes")) {
    for (size_t i = 0; i < nodes->size() && r.status().ok(); ++i) {
      Reader n((*nodes)[i], "usage.nodes[" + std::to_string(i) + "]");
      NodeUsage x;
      n.String("node", &x.node);
      n.Int("cpus", &x.cpus);
      n.Int("mem_limit_mib", &x.mem_limit_mib);
      n.Int("cpu_usec", &x.cpu_usec);
      n.Int("cpu_at", &x.cpu_at);
      n.Int("mem_peak_mib", &x.mem_peak_mib);
      r.Fail(n.status());
      u.nodes.push_back(std::move(x));
    }
  }
  if (const json* gpus = r.Array("gpus")) {
    for (size_t i = 0; i < gpus->size() && r.status().ok(); ++i) {
      GpuUsage g;
      r.Fail(ReadGpu((*gpus)[i], "usage.gpus[" + std::to_string(i) + "]", &g));
      u.gpus.push_back(std::move(g));
    }
  }
  if (!r.status().ok()) return r.status();
  return u;
}

}  // namespace hachi::state
