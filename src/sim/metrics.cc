#include "sim/metrics.h"

#include <algorithm>
#include <cmath>

namespace hachi::sim {

double PercentileSorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double n = static_cast<double>(sorted.size());
  // ceil(p/100 * n) as a 1-based rank; the epsilon keeps 95/100*20 = 19 from becoming
  // 20 through floating-point error.
  int64_t rank = static_cast<int64_t>(std::ceil(p / 100.0 * n - 1e-9));
  rank = std::clamp<int64_t>(rank, 1, static_cast<int64_t>(sorted.size()));
  return sorted[static_cast<size_t>(rank - 1)];
}

double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return PercentileSorted(values, p);
}

std::string GpuBucket(int gpus) {
  if (gpus <= 1) return "1";
  if (gpus == 2) return "2";
  if (gpus <= 4) return "4";
  if (gpus <= 8) return "8";
  return ">8";
}

const std::vector<std::string>& GpuBuckets() {
  static const std::vector<std::string> kBuckets = {"1", "2", "4", "8", ">8"};
  return kBuckets;
}

void ComputeMetrics(const std::vector<JobOutcome>& outcomes, int cluster_gpus,
                    const std::vector<double>& cycle_ms, SimMetrics* m) {
  m->jobs = static_cast<int64_t>(outcomes.size());
  std::vector<double> waits;
  waits.reserve(outcomes.size());
  std::map<std::string, std::vector<double>> by_bucket;
  double wait_sum = 0, jct_sum = 0, busy_gpu_s = 0;
  Time first_submit = kNever, last_end = 0;
  for (const JobOutcome& o : outcomes) {
    const double wait = static_cast<double>(o.start - o.submit);
    waits.push_back(wait);
    by_bucket[GpuBucket(o.gpus)].push_back(wait);
    wait_sum += wait;
    jct_sum += static_cast<double>(o.end - o.submit);
    busy_gpu_s += static_cast<double>(o.gpus) * static_cast<double>(o.end - o.start);
    first_submit = std::min(first_submit, o.submit);
    last_end = std::max(last_end, o.end);
  }
  std::sort(waits.begin(), waits.end());
  const double n = std::max<double>(1, static_cast<double>(outcomes.size()));
  m->wait_mean_s = wait_sum / n;
  m->wait_p50_s = PercentileSorted(waits, 50);
  m->wait_p95_s = PercentileSorted(waits, 95);
  m->wait_p99_s = PercentileSorted(waits, 99);
  m->jct_mean_s = jct_sum / n;
  m->makespan_s = outcomes.empty() ? 0 : static_cast<double>(last_end - first_submit);
  m->gpu_utilization =
      (m->makespan_s > 0 && cluster_gpus > 0)
          ? busy_gpu_s / (static_cast<double>(cluster_gpus) * m->makespan_s)
          : 0;
  m->wait_p50_s_by_gpus.clear();
  m->wait_p95_s_by_gpus.clear();
  m->jobs_by_gpus.clear();
  for (auto& [bucket, w] : by_bucket) {
    std::sort(w.begin(), w.end());
    m->wait_p50_s_by_gpus[bucket] = PercentileSorted(w, 50);
    m->wait_p95_s_by_gpus[bucket] = PercentileSorted(w, 95);
    m->jobs_by_gpus[bucket] = static_cast<int64_t>(w.size());
  }
  std::vector<double> cycles = cycle_ms;
  std::sort(cycles.begin(), cycles.end());
  m->cycles = static_cast<int64_t>(cycles.size());
  m->cycle_ms_p50 = PercentileSorted(cycles, 50);
  m->cycle_ms_p99 = PercentileSorted(cycles, 99);
  m->cycle_ms_max = cycles.empty() ? 0 : cycles.back();
  double total_ms = 0;
  for (double c : cycles) total_ms += c;
  m->sched_s = total_ms / 1000;
  m->cycle_ms_mean = cycles.empty() ? 0 : total_ms / static_cast<double>(cycles.size());
}

}  // namespace hachi::sim
