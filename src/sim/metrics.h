// What a simulation measured, and the statistics behind it (docs/sim.md, "Metrics").
// Percentiles are nearest-rank: the p-th percentile of n sorted values is the value at
// rank ceil(p/100 * n) (1-based), so it is always one of the observed values.
// Plain values and pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/time.h"

namespace hachi::sim {

// Nearest-rank percentile of `values` (any order; p in (0, 100]); 0 when empty.
double Percentile(std::vector<double> values, double p);
// The same on values already sorted ascending.
double PercentileSorted(const std::vector<double>& sorted, double p);

// Requested-GPU buckets: "1", "2", "4" (3-4), "8" (5-8), ">8".
std::string GpuBucket(int gpus);
const std::vector<std::string>& GpuBuckets();  // in that order

// One finished job, as the simulator saw it.
struct JobOutcome {
  int64_t id = 0;
  int gpus = 0;
  Time submit = 0, start = 0, end = 0;
};

// What one node pool was powered for (docs/pools.md). A burst node counts from the
// moment its resume starts (rented capacity is billed while it boots) until it is
// powered off; a fixed pool's nodes count for the whole run.
struct PoolUse {
  std::string name;
  bool burst = false;
  int nodes = 0, gpus = 0;
  double price_per_gpu_hour = 0;
  int64_t resumes = 0, suspends = 0;
  int max_powered = 0;  // most of its nodes powered at once
  double powered_gpu_seconds = 0;
  double busy_gpu_seconds = 0;  // GPU-seconds of jobs on its nodes
  double cost() const { return powered_gpu_seconds / 3600.0 * price_per_gpu_hour; }
};

struct SimMetrics {
  // What ran.
  std::string policy, cluster, time_limits;
  int cluster_gpus = 0;
  int64_t jobs = 0;      // finished jobs (the statistics below are over these)
  int64_t rejected = 0;  // refused at submit (can never run on this cluster)
  std::vector<std::string> rejections;  // the first few reasons
  int64_t backfilled = 0;               // starts the scheduler marked as backfilled
  // Preemption: applied preemptions, jobs requeued and cancelled by them, and the GPU
  // hours of work requeued jobs lost (not counted in gpu_utilization).
  int64_t preemptions = 0, requeues = 0, cancelled = 0;
  double lost_gpu_hours = 0;
  // Waits (start - submit) and job completion times (end - submit), seconds.
  double wait_mean_s = 0, wait_p50_s = 0, wait_p95_s = 0, wait_p99_s = 0;
  double jct_mean_s = 0;
  double makespan_s = 0;       // last end - first submit
  double gpu_utilization = 0;  // busy GPU-seconds / (cluster GPUs x makespan), 0-1
  std::map<std::string, double> wait_p50_s_by_gpus, wait_p95_s_by_gpus;
  std::map<std::string, int64_t> jobs_by_gpus;
  // Scheduler cycles: wall time of each Schedule() call.
  int64_t cycles = 0;
  double cycle_ms_mean = 0, cycle_ms_p50 = 0, cycle_ms_p99 = 0, cycle_ms_max = 0;
  double sched_s = 0;  // all cycles together: the scheduler's share of wall_s
  double wall_s = 0;   // the whole run, trace reading included (set by the caller)
  std::vector<PoolUse> pools;  // with pools configured
  double span_s = 0;           // first submit to the last event (the pools' billing span)
};

// Fills the job statistics of `m` from `outcomes` and the cycle statistics from
// `cycle_ms`; leaves the names, rejections, backfilled, preemption counts and wall_s
// as they are.
void ComputeMetrics(const std::vector<JobOutcome>& outcomes, int cluster_gpus,
                    const std::vector<double>& cycle_ms, SimMetrics* m);

}  // namespace hachi::sim
