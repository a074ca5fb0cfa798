#include "state/usage.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace hachi::state {
namespace {

double Mean(int64_t sum, int64_t n) {
  return n > 0 ? static_cast<double>(sum) / static_cast<double>(n) : -1;
}

// Rounds to an integer percentage ("94").
std::string Pct(double v) { return std::to_string(static_cast<int>(std::lround(v))); }

// "11 GiB", "11.4 GiB".
std::string Gib(int64_t mib) {
  char buf[32];
  const double g = static_cast<double>(mib) / 1024.0;
  if (std::fabs(g - std::round(g)) < 0.05) {
    std::snprintf(buf, sizeof buf, "%.0f GiB", g);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f GiB", g);
  }
  return buf;
}

// Adds one sample at `at` to the series of `g`, doubling its step while the bucket
// would fall beyond kUsagePoints from the run's start.
void AddPoint(GpuUsage* g, Time start, Time at, int util, int64_t mem_mib) {
  if (at < start) at = start;
  while ((at - start) / g->step >= kUsagePoints) {
    g->step *= 2;
    std::vector<UsagePoint> merged;
    for (const UsagePoint& p : g->series) {
      const Time bucket = start + (p.at - start) / g->step * g->step;
      if (!merged.empty() && merged.back().at == bucket) {
        UsagePoint& m = merged.back();
        const int64_t n = m.samples + p.samples;
        m.util = static_cast<int>((static_cast<int64_t>(m.util) * m.samples +
                                   static_cast<int64_t>(p.util) * p.samples + n / 2) /
                                  std::max<int64_t>(n, 1));
        m.samples = static_cast<int>(n);
        m.mem_mib = std::max(m.mem_mib, p.mem_mib);
      } else {
        merged.push_back(p);
        merged.back().at = bucket;
      }
    }
    g->series = std::move(merged);
  }
  const Time bucket = start + (at - start) / g->step * g->step;
  if (g->series.empty() || g->series.back().at < bucket) {
    g->series.push_back(
        UsagePoint{bucket, 1, std::max(util, 0), std::max<int64_t>(mem_mib, 0)});
    return;
  }
  // A sample for the latest bucket (or, from a late report, an earlier one: folded
  // into the latest, the series stays ascending).
  UsagePoint& p = g->series.back();
  if (util >= 0) {
    const int64_t n = p.samples + 1;
    p.util =
        static_cast<int>((static_cast<int64_t>(p.util) * p.samples + util + n / 2) / n);
  }
  p.samples += 1;
  p.mem_mib = std::max(p.mem_mib, mem_mib);
}

// "GPU 3" on a one-node job, "n2 GPU 3" on a gang.
std::string GpuName(const JobUsage& u, const GpuUsage& g) {
  return (u.nodes.size() > 1 ? g.node + " " : std::string()) + "GPU " +
         std::to_string(g.gpu);
}

// "GPU 3", "GPUs 3 and 5", "GPUs 1, 3 and 5".
std::string GpuList(const JobUsage& u, const std::vector<const GpuUsage*>& gs) {
  std::string out = gs.size() == 1 ? "" : "GPUs ";
  for (size_t i = 0; i < gs.size(); ++i) {
    if (i > 0) out += i + 1 == gs.size() ? " and " : ", ";
    std::string name = GpuName(u, *gs[i]);
    if (gs.size() > 1 && name.rfind("GPU ", 0) == 0) name = name.substr(4);
    out += name;
  }
  return out;
}

// "9 %", "9 % and 12 %".
std::string PctList(const std::vector<const GpuUsage*>& gs) {
  std::string out;
  for (size_t i = 0; i < gs.size(); ++i) {
    if (i > 0) out += i + 1 == gs.size() ? " and " : ", ";
    out += Pct(gs[i]->UtilMean()) + " %";
  }
  return out;
}

}  // namespace

double GpuUsage::UtilMean() const { return Mean(util_sum, samples); }
double GpuUsage::MemUtilMean() const { return Mean(mem_util_sum, mem_util_samples); }
double GpuUsage::PowerMean() const { return Mean(power_sum_w, power_samples); }
double GpuUsage::SmClockMean() const { return Mean(sm_clock_sum, sm_clock_samples); }
double GpuUsage::PcieMean() const { return Mean(pcie_sum_kbs, pcie_samples); }
double GpuUsage::NvLinkMean() const { return Mean(nvlink_sum_kbs, nvlink_samples); }

int GpuUsage::UtilPercentile(double q) const {
  if (samples <= 0) return -1;
  const double want = std::max(q, 0.0) * static_cast<double>(samples);
  int64_t seen = 0;
  for (int v = 0; v <= 100; ++v) {
    seen += util_hist[static_cast<size_t>(v)];
    if (seen > 0 && static_cast<double>(seen) >= want) return v;
  }
  return 100;
}

const GpuUsage* JobUsage::Gpu(const std::string& node, int gpu) const {
  for (const GpuUsage& g : gpus) {
    if (g.node == node && g.gpu == gpu) return &g;
  }
  return nullptr;
}

double JobUsage::CpuSeconds() const {
  double s = -1;
  for (const NodeUsage& n : nodes) {
    if (n.cpu_usec < 0) continue;
    s = std::max(s, 0.0) + static_cast<double>(n.cpu_usec) / 1e6;
  }
  return s;
}

double JobUsage::CpuEfficiency() const {
  double used = 0, given = 0;
  for (const NodeUsage& n : nodes) {
    if (n.cpu_usec < 0 || n.cpus <= 0 || n.cpu_at <= start_time) continue;
    used += static_cast<double>(n.cpu_usec) / 1e6;
    given += static_cast<double>(n.cpu_at - start_time) * n.cpus;
  }
  return given > 0 ? used / given : -1;
}

int64_t JobUsage::MemPeakMib() const {
  int64_t peak = -1;
  for (const NodeUsage& n : nodes) peak = std::max(peak, n.mem_peak_mib);
  return peak;
}

double JobUsage::GpuUtilMean() const {
  double sum = 0;
  int n = 0;
  for (const GpuUsage& g : gpus) {
    if (g.samples <= 0) continue;
    sum += g.UtilMean();
    ++n;
  }
  return n > 0 ? sum / n : -1;
}

int64_t JobUsage::GpuMemPeakMib() const {
  int64_t peak = 0;
  for (const GpuUsage& g : gpus) peak = std::max(peak, g.mem_peak_mib);
  return peak;
}

JobUsage NewJobUsage(sched::JobId job, Time start_time,
                     const std::vector<std::string>& nodes,
                     const std::vector<sched::Allocation>& alloc) {
  JobUsage u;
  u.job = job;
  u.start_time = start_time;
  for (size_t i = 0; i < alloc.size() && i < nodes.size(); ++i) {
    const sched::Allocation& a = alloc[i];
    u.nodes.push_back(NodeUsage{nodes[i], a.cpus, a.memory_mib, -1, 0, -1});
    for (int gpu : a.gpus.Indices()) {
      GpuUsage g;
      g.node = nodes[i];
      g.gpu = gpu;
      u.gpus.push_back(std::move(g));
    }
  }
  return u;
}

bool AddSample(JobUsage* u, const std::string& node, const JobUsageSample& s) {
  if (s.job != u->job || s.start_time != u->start_time) return false;
  auto n = std::find_if(u->nodes.begin(), u->nodes.end(),
                        [&](const NodeUsage& x) { return x.node == node; });
  if (n == u->nodes.end()) return false;
  if (s.cpu_usec >= 0 && s.at >= n->cpu_at) {
    n->cpu_usec = s.cpu_usec;
    n->cpu_at = s.at;
  }
  n->mem_peak_mib = std::max({n->mem_peak_mib, s.mem_mib, s.mem_peak_mib});
  u->last_at = std::max(u->last_at, s.at);
  for (const GpuSample& x : s.gpus) {
    auto g = std::find_if(u->gpus.begin(), u->gpus.end(), [&](const GpuUsage& y) {
      return y.node == node && y.gpu == x.gpu;
    });
    if (g == u->gpus.end()) continue;
    if (x.util >= 0) {
      const int util = std::min(x.util, 100);
      ++g->samples;
      g->util_sum += util;
      ++g->util_hist[static_cast<size_t>(util)];
      g->util_max = std::max(g->util_max, util);
    }
    if (x.mem_util >= 0) {
      g->mem_util_sum += std::min(x.mem_util, 100);
      ++g->mem_util_samples;
    }
    g->mem_peak_mib = std::max(g->mem_peak_mib, x.mem_mib);
    if (x.power_w >= 0) {
      g->power_sum_w += x.power_w;
      ++g->power_samples;
      g->power_max_w = std::max(g->power_max_w, x.power_w);
    }
    if (x.sm_clock_mhz >= 0) {
      g->sm_clock_sum += x.sm_clock_mhz;
      ++g->sm_clock_samples;
    }
    if (x.pcie_kbs >= 0) {
      g->pcie_sum_kbs += x.pcie_kbs;
      ++g->pcie_samples;
    }
    if (x.nvlink_kbs >= 0) {
      g->nvlink_sum_kbs += x.nvlink_kbs;
      ++g->nvlink_samples;
    }
    if (x.util >= 0 || x.mem_mib >= 0) {
      AddPoint(&*g, u->start_time, s.at, std::min(x.util, 100), x.mem_mib);
    }
  }
  return true;
}

UsageSummary Summarize(const JobUsage& u) {
  UsageSummary s;
  for (const GpuUsage& g : u.gpus) {
    s.samples += g.samples;
    if (g.samples > 0 && g.util_max == 0) ++s.idle_gpus;
  }
  s.gpu_util = u.GpuUtilMean();
  s.cpu_seconds = u.CpuSeconds();
  s.mem_peak_mib = u.MemPeakMib();
  return s;
}

std::vector<UsageFinding> Findings(const JobUsage& u, const FindingInputs& in) {
  constexpr int64_t kMinSamples = 3;
  std::vector<UsageFinding> out;
  std::vector<const GpuUsage*> judged;
  for (const GpuUsage& g : u.gpus) {
    if (g.samples >= kMinSamples) judged.push_back(&g);
  }
  // Idle GPUs: never above 0 %.
  std::vector<const GpuUsage*> idle, used;
  for (const GpuUsage* g : judged) (g->util_max == 0 ? idle : used).push_back(g);
  if (!idle.empty()) {
    if (used.empty()) {
      out.push_back(
          {"idle-gpu", judged.size() == 1
                           ? "its GPU was never used (0 % in every sample): check that "
                             "the job runs on the GPU at all (CUDA available, the "
                             "device it picks)"
                           : "none of its " + std::to_string(judged.size()) +
                                 " GPUs was ever used (0 % in every sample): check that "
                                 "the job runs on the GPUs at all"});
    } else {
      out.push_back(
          {"idle-gpu", GpuList(u, idle) + (idle.size() == 1 ? " was" : " were") +
                           " never used (0 % in every sample) while the other " +
                           std::to_string(used.size()) + " worked: ask for " +
                           std::to_string(used.size()) +
                           (used.size() == 1 ? " GPU" : " GPUs") +
                           ", or check that every rank gets a GPU of its own"});
    }
  }
  // Imbalance: some used GPUs far below the others.
  if (used.size() >= 2) {
    std::vector<const GpuUsage*> low, high;
    double best = 0;
    for (const GpuUsage* g : used) best = std::max(best, g->UtilMean());
    for (const GpuUsage* g : used) {
      (g->UtilMean() < 30 && best - g->UtilMean() >= 40 ? low : high).push_back(g);
    }
    double high_mean = 0;
    for (const GpuUsage* g : high) high_mean += g->UtilMean();
    if (!high.empty()) high_mean /= static_cast<double>(high.size());
    if (!low.empty() && !high.empty() && high_mean >= 60) {
      out.push_back({"imbalance",
                     GpuList(u, low) + " averaged " + PctList(low) + " while the other " +
                         std::to_string(high.size()) + " averaged " + Pct(high_mean) +
                         " %: look at data loading or an uneven split of the work"});
    }
  }
  // CPU-bound: the GPUs wait while the CPUs are saturated.
  const double gpu_mean = u.GpuUtilMean();
  const double cpu_eff = u.CpuEfficiency();
  int cpus = 0;
  for (const NodeUsage& n : u.nodes) cpus += n.cpus;
  if (!used.empty() && gpu_mean >= 0 && gpu_mean < 40 && cpu_eff >= 0.85) {
    out.push_back({"cpu-bound", "its GPUs averaged " + Pct(gpu_mean) + " % while its " +
                                    std::to_string(cpus) + " CPUs were " +
                                    Pct(cpu_eff * 100) +
                                    " % busy: the job is CPU-bound (data loading, "
                                    "preprocessing); ask for more CPUs or move that "
                                    "work to the GPU"});
  } else if (!used.empty() && gpu_mean >= 0 && gpu_mean < 20 &&
             std::none_of(out.begin(), out.end(),
                          [](const UsageFinding& f) { return f.kind == "imbalance"; })) {
    out.push_back({"low-utilisation",
                   "its GPUs averaged " + Pct(gpu_mean) +
                       " %: most of the time they waited (input, communication, the "
                       "CPU); a smaller share or fewer GPUs may serve as well"});
  }
  // GPU memory asked for and never used (shares: --gpu-mem).
  if (in.gpu_memory_promised_mib > 0 && !judged.empty()) {
    const int64_t peak = u.GpuMemPeakMib();
    if (peak * 2 < in.gpu_memory_promised_mib) {
      const int64_t suggest = (peak * 12 / 10 + 1023) / 1024;  // +20 %, whole GiB
      out.push_back({"over-asked-memory",
                     "promised " + Gib(in.gpu_memory_promised_mib) +
                         " of GPU memory (--gpu-mem), peak " + Gib(peak) +
                         ": --gpu-mem=" + std::to_string(std::max<int64_t>(suggest, 1)) +
                         "G would leave room for other shares"});
    }
  }
  // Host memory near its limit.
  int64_t limit = 0;
  for (const NodeUsage& n : u.nodes) limit = std::max(limit, n.mem_limit_mib);
  const int64_t mem_peak = u.MemPeakMib();
  if (limit > 0 && mem_peak >= 0 && mem_peak * 10 >= limit * 9) {
    out.push_back({"memory-near-limit", "memory peaked at " + Gib(mem_peak) + " of " +
                                            Gib(limit) +
                                            " allowed: near the limit, where the job "
                                            "is killed (OUT_OF_MEMORY)"});
  }
  return out;
}

}  // namespace hachi::state
