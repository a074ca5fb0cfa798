// Queue-wait and usage statistics over a time window, for `hachi stats` (docs/cli.md):
// per partition and per GPU count, how many jobs started, how long jobs waited
// (p50/p95), how many wait now, the GPU-seconds used, and an alert for a partition
// whose median wait passes a threshold.
//
// A pure function of the job records and `now`; no store, no clock. Thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "report/stats_cause.h"
#include "state/records.h"

namespace hachi::report {

struct WaitStats {
  std::string partition;  // "" for a job with no partition
  int gpus = -1;          // -1: every GPU count of the partition; 0: GPU shares (< 1 GPU)
  int started = 0;        // jobs whose (last) start lies in (now - window, now]
  int pending = 0;        // pending now, not held
  int held = 0;           // pending and held: counted, but their waits are the user's
  // Waits, nearest-rank percentiles over: start - submit of the jobs started in the
  // window, and now - submit of the jobs pending now (not held).
  int samples = 0;
  Duration wait_p50 = 0;
  Duration wait_p95 = 0;
  double gpu_seconds =
      0;  // GPU time used inside the window (shares count their fraction)
};

struct PartitionStats {
  WaitStats all;                   // gpus == -1
  std::vector<WaitStats> by_gpus;  // ascending GPU count
  bool alert = false;              // all.wait_p50 > the alert threshold
  // The partition now (the server fills it: AttachLoads); absent for a partition that
  // no longer exists, or when computed from records alone.
  bool has_load = false;
  PartitionLoad load;
  std::vector<AlertCause>
      causes;  // when alert and has_load: ClassifyAlert's, likeliest first
};

struct JobStats {
  Time now = 0;
  Duration window = 0;
  Duration alert_threshold = 0;
  std::vector<PartitionStats> partitions;  // by name
  double gpu_seconds = 0;                  // all partitions
  int total_gpus = 0;                      // capacity given to ComputeStats; 0 = unknown
  double utilisation = -1;  // gpu_seconds / (total_gpus * window); -1 when unknown
};

// `total_gpus`: the cluster's GPUs, for utilisation (0: not computed). A requeued job's
// wait runs from its submit time to its last start.
JobStats ComputeStats(const std::vector<state::JobRecord>& jobs, Time now,
                      Duration window, Duration alert_threshold = 20 * kMinute,
                      int total_gpus = 0);

// Gives each partition of `stats` its load (by name) and, when flagged, its causes.
void AttachLoads(JobStats* stats, const std::vector<PartitionLoad>& loads);

// As JSON (`hachi stats --json`, GET /api/v1/stats): {"now", "window_s",
// "alert_threshold_s", "partitions": [{"all": W, "by_gpus": [W...], "alert"}],
// "gpu_seconds", "total_gpus", "utilisation"}, W = {"partition", "gpus", "started",
// "pending", "held", "samples", "wait_p50_s", "wait_p95_s", "gpu_seconds"}; with a load
// also "load": {PartitionLoad's fields by name} and "causes": [{"kind", "text"}, ...]
// (docs/api.md). The reader takes "load" and "causes" as optional (older servers).
std::string JobStatsToJson(const JobStats& stats);
// The same JSON back (GET /api/v1/stats's reply; other keys, such as its "scheduler", are
// ignored). kInvalidArgument naming the first missing or mistyped field.
Result<JobStats> JobStatsFromJson(std::string_view text);

// The nearest-rank percentile (p in 1..100) of `values`; 0 for none.
Duration Percentile(std::vector<Duration> values, int p);

}  // namespace hachi::report
