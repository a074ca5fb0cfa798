// HistorySampler: the dashboard's recent past (GET /api/v1/history, docs/dashboard.md).
// Every `interval` seconds it samples the queue per partition (pending count, median wait
// of the jobs pending now and of the jobs that started since the previous sample) and the
// cluster's utilisation (allocated GPUs / healthy GPUs), into a fixed ring (default 15 s
// x 5760 = the last 24 hours, about 1 MB). Samples are taken on the sampler's own thread
// from the Controller's public reads (ActiveJobBriefs, Nodes): nothing on the scheduling
// path, and nothing kept on disk — a restarted server starts an empty history.
//
// Thread-safety: Start/Stop from one thread; Sample and Samples from any thread (one
// mutex guards the ring).
#pragma once

#include <deque>
#include <map>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/mutex.h"
#include "core/time.h"
#include "server/controller.h"

namespace hachi::server {

struct PartitionSample {
  int pending = 0;  // not held
  int running = 0;
  int started = 0;  // since the previous sample
  // Seconds; -1 when there is no such job.
  double median_wait_pending = -1;  // now - submit, over the jobs pending now
  double median_wait_started = -1;  // start - submit, over the jobs started since
};

struct HistorySample {
  Time at = 0;
  int gpus_healthy = 0;    // on nodes that are up or drained, less unhealthy GPUs
  int gpus_allocated = 0;  // of those, held by a job (whole or shared)
  std::map<std::string, PartitionSample> partitions;  // every partition, busy or not
};

// Runs already counted as started by an earlier sample: job -> that run's start_time.
// By run, not by time: a job that starts in the very second of a sample, after it, must
// count at the next one (times are whole seconds).
using CountedStarts = std::unordered_map<state::JobId, Time>;

// One sample from what the controller reports: `active` (pending and running jobs),
// `ended` (jobs that were pending at the previous sample and have ended since, with
// their start_time: 0 if they never ran), the runs `counted` before, the nodes, and the
// partition names. Pure.
HistorySample Summarize(Time now, const std::vector<JobBrief>& active,
                        const std::vector<JobBrief>& ended, const CountedStarts& counted,
                        const std::vector<state::NodeStatus>& nodes,
                        const std::vector<std::string>& partitions);

// {"interval_s", "samples": [{"at", "gpus_healthy", "gpus_allocated", "utilisation",
//   "partitions": {NAME: {"pending", "running", "started", "median_wait_pending_s",
//   "median_wait_started_s"}}}]}; medians are null when no job had one.
std::string HistoryToJson(const std::vector<HistorySample>& samples, int interval_s);

class HistorySampler {
 public:
  struct Options {
    int interval_s = 15;
    size_t capacity = 5760;  // samples kept: 24 h at 15 s
  };
  HistorySampler(Controller* controller, Options options);
  ~HistorySampler();  // Stop()
  HistorySampler(const HistorySampler&) = delete;
  HistorySampler& operator=(const HistorySampler&) = delete;

  // Samples at once, then every interval_s on its own thread.
  void Start() EXCLUDES(mu_, sample_mu_);
  void Stop() EXCLUDES(mu_);  // idempotent

  // Takes one sample at `now` (the thread's step; tests call it directly).
  void Sample(Time now) EXCLUDES(mu_, sample_mu_);
  // The samples taken after `since` (0: all), oldest first.
  std::vector<HistorySample> Samples(Time since = 0) const EXCLUDES(mu_);
  int interval_s() const { return options_.interval_s; }

 private:
  void Loop() EXCLUDES(mu_);

  // Constant after construction.
  Controller* const controller_;
  const Options options_;

  mutable Mutex mu_;
  std::deque<HistorySample> ring_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  CondVar cv_{&mu_};

  // Used by Sample only, which runs on one thread at a time (sample_mu_). Taken
  // before mu_.
  Mutex sample_mu_ ACQUIRED_BEFORE(mu_);
  std::unordered_set<state::JobId> pending_before_ GUARDED_BY(sample_mu_);
  // The running jobs of the last sample.
  CountedStarts counted_ GUARDED_BY(sample_mu_);
  bool first_ GUARDED_BY(sample_mu_) = true;

  std::thread thread_;  // started by Start, joined by Stop
};

}  // namespace hachi::server
