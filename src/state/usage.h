// What a job does with what it was given (docs/efficiency.md): per GPU it
// holds, SM utilisation, memory, power, SM clock and PCIe/NVLink throughput, sampled by
// its agents through NVML every few seconds, with the job's CPU time and memory from its
// cgroup; kept by the server as a compact summary per GPU (mean, p50/p95, max; peaks)
// and a bounded series for charts, stored with the run (Store's usage table), and read
// back by `hachi eff`, `hachi show job`, `hachi report`, sacct and the dashboard.
//
// Sizes are bounded whatever the run's length: a GPU's percentiles come from a
// 101-bucket histogram, its series holds at most kUsagePoints buckets (they double in
// width as the run goes on), so a job costs the same bytes after a minute as after a
// week.
//
// Plain values and pure functions; thread-compatible.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/time.h"
#include "sched/cluster.h"

namespace hachi::state {

// ---- What an agent samples ----

// One GPU's figures at one sample; -1 where NVML does not say.
struct GpuSample {
  int gpu = -1;             // node-local index
  int util = -1;            // SM utilisation, % (nvmlDeviceGetUtilizationRates.gpu)
  int mem_util = -1;        // memory bandwidth utilisation, % (.memory)
  int64_t mem_mib = -1;     // device memory used (nvmlDeviceGetMemoryInfo.used)
  int power_w = -1;         // nvmlDeviceGetPowerUsage / 1000
  int sm_clock_mhz = -1;    // nvmlDeviceGetClockInfo(NVML_CLOCK_SM)
  int64_t pcie_kbs = -1;    // nvmlDeviceGetPcieThroughput, TX + RX, KB/s
  int64_t nvlink_kbs = -1;  // NVLink data TX + RX since the last sample, KiB/s
  bool operator==(const GpuSample&) const = default;
};

// One job's sample on one node: its GPUs' figures and its cgroup's.
struct JobUsageSample {
  sched::JobId job = 0;
  Time start_time = 0;        // the run's (api::LaunchSpec::start_time)
  Time at = 0;                // when taken, seconds since the Unix epoch
  int64_t cpu_usec = -1;      // CPU time the job used on this node since its start
  int64_t mem_mib = -1;       // memory in use now (cgroup memory.current)
  int64_t mem_peak_mib = -1;  // the most so far (memory.peak), else -1
  std::vector<GpuSample> gpus;
  bool operator==(const JobUsageSample&) const = default;
};

// ---- What the server keeps ----

inline constexpr int kUsagePoints = 120;        // the most points a GPU's series holds
inline constexpr Duration kUsageFirstStep = 5;  // its first bucket width, seconds

// One bucket of a GPU's series: the samples taken in [at, at + step).
struct UsagePoint {
  Time at = 0;
  int samples = 0;
  int util = 0;         // their mean SM utilisation, %, rounded
  int64_t mem_mib = 0;  // the most memory used among them
  bool operator==(const UsagePoint&) const = default;
};

struct GpuUsage {
  std::string node;
  int gpu = -1;
  int64_t samples = 0;  // samples with a utilisation figure
  int64_t util_sum = 0;
  std::array<int64_t, 101> util_hist{};  // samples at each utilisation, 0..100 %
  int util_max = 0;
  int64_t mem_util_sum = 0, mem_util_samples = 0;
  int64_t mem_peak_mib = 0;
  int64_t power_sum_w = 0, power_samples = 0;
  int power_max_w = 0;
  int64_t sm_clock_sum = 0, sm_clock_samples = 0;
  int64_t pcie_sum_kbs = 0, pcie_samples = 0;
  int64_t nvlink_sum_kbs = 0, nvlink_samples = 0;
  Duration step = kUsageFirstStep;  // the series' bucket width
  std::vector<UsagePoint> series;   // ascending; buckets without samples are left out

  double UtilMean() const;  // -1 when no sample
  // The utilisation at or below which a fraction `q` (0..1) of the samples lie; -1 when
  // no sample.
  int UtilPercentile(double q) const;
  double MemUtilMean() const;  // -1 when none
  double PowerMean() const;    // -1 when none
  double SmClockMean() const;  // -1 when none
  double PcieMean() const;     // KB/s; -1 when none
  double NvLinkMean() const;   // KiB/s; -1 when none
  bool operator==(const GpuUsage&) const = default;
};

// The job's CPU and memory on one node.
struct NodeUsage {
  std::string node;
  int cpus = 0;               // allocated
  int64_t mem_limit_mib = 0;  // allocated
  int64_t cpu_usec = -1;      // the latest figure (cumulative since the run began)
  Time cpu_at = 0;            // when it was taken
  int64_t mem_peak_mib = -1;  // the most seen (memory.peak, else memory.current)
  bool operator==(const NodeUsage&) const = default;
};

// A run's use (job, start_time): what the usage table stores, per run.
struct JobUsage {
  sched::JobId job = 0;
  Time start_time = 0;
  Time last_at = 0;              // the latest sample's time
  std::vector<NodeUsage> nodes;  // in allocation order
  std::vector<GpuUsage> gpus;    // in allocation order, ascending GPU per node
  // The idle-GPU policy: since when every GPU of the job has been below the
  // partition's threshold (0: not now), and whether it was warned about that spell.
  Time idle_since = 0;
  bool idle_warned = false;
  bool operator==(const JobUsage&) const = default;

  const GpuUsage* Gpu(const std::string& node, int gpu) const;
  // CPU seconds used over every node; -1 when no node said.
  double CpuSeconds() const;
  // CPU seconds used over CPU seconds allocated until the latest figure, 0..1 (and a
  // little above when the kernel's accounting runs ahead); -1 when unknown.
  double CpuEfficiency() const;
  // The most memory used on one node, MiB; -1 when unknown.
  int64_t MemPeakMib() const;
  // The mean SM utilisation over the job's GPUs (each GPU's mean, averaged); -1 when no
  // GPU was sampled.
  double GpuUtilMean() const;
  int64_t GpuMemPeakMib() const;  // over its GPUs; 0 when none
};

// A JobUsage for a run of `alloc` (its nodes, CPUs, memory and GPUs, nothing sampled).
JobUsage NewJobUsage(sched::JobId job, Time start_time,
                     const std::vector<std::string>& nodes,
                     const std::vector<sched::Allocation>& alloc);

// Adds an agent's sample from `node`. GPUs the job does not hold there, and samples
// for another run, are ignored (false); the job's CPU and memory figures replace the
// node's, its GPU figures are summed and bucketed.
bool AddSample(JobUsage* u, const std::string& node, const JobUsageSample& s);

// What the job record keeps of a run's use (JobRecord::usage), for lists and reports
// that must not load every run's series.
struct UsageSummary {
  int64_t samples = 0;        // GPU samples; 0: the run's GPUs were never sampled
  double gpu_util = -1;       // GpuUtilMean
  double cpu_seconds = -1;    // CpuSeconds
  int64_t mem_peak_mib = -1;  // MemPeakMib
  int idle_gpus = 0;          // GPUs sampled that never went above 0 %
  bool operator==(const UsageSummary&) const = default;
};
UsageSummary Summarize(const JobUsage& u);

// ---- Findings ----

// What `hachi eff` says in plain words, most important first.
struct UsageFinding {
  std::string kind;  // "imbalance", "idle-gpu", "over-asked-memory", "cpu-bound",
                     // "low-utilisation", "memory-near-limit"
  std::string text;  // one or two sentences with the numbers
  bool operator==(const UsageFinding&) const = default;
};

// What else the findings need of the job: its GPU memory promised per GPU (shares:
// --gpu-mem), 0 when none.
struct FindingInputs {
  int64_t gpu_memory_promised_mib = 0;
};
// Needs at least 3 samples per GPU to judge a GPU (else nothing is said of it).
std::vector<UsageFinding> Findings(const JobUsage& u, const FindingInputs& in);

}  // namespace hachi::state
