// The controller's metrics (docs/metrics.md): the histograms the scheduling loop, the
// plan applier and the store observe as things happen, and the gauges computed from
// the controller's state when /metrics is scraped (ClusterGauges), so nothing is
// counted on the scheduling path that a scrape can compute.
//
// Thread-safety: as metrics.h — observing is lock-free; ObserveWait takes a small
// mutex of its own for the series cache (one map lookup per started job).
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "core/time.h"
#include "sched/power.h"
#include "server/metrics.h"
#include "state/records.h"

namespace hachi::server {

// What /metrics reports of the cluster now, gathered by Controller::Gauges.
struct ClusterGauges {
  struct NodeRow {
    std::string node;
    int total = 0;  // GPUs
    int allocated = 0;
    int unhealthy = 0;
    std::string state;            // "up", "drained", "down"
    std::string pool, power;      // a burst pool's node: its pool, its power state
    double heartbeat_age_s = -1;  // since its agent's last poll began or ended; -1: none
  };
  struct PartitionRow {
    std::string partition;
    int total = 0;  // GPUs of its nodes (a node in two partitions counts in both)
    int allocated = 0;
    int unhealthy = 0;
    int fragmented = 0;  // sched::FragmentedGpus
  };
  // Each running job's GPUs as last sampled (running jobs only, so the series
  // come and go with the jobs: bounded by the GPUs in use).
  struct JobGpuRow {
    int64_t job = 0;
    std::string user, account, node;
    int gpu = -1;
    int util = -1;         // %; -1: not measured
    int64_t mem_mib = -1;  // -1: not measured
  };
  std::vector<JobGpuRow> job_gpus;
  int64_t idle_jobs =
      0;  // running jobs whose GPUs are idle past their partition's policy
  std::vector<NodeRow> nodes;            // by name
  std::vector<sched::PoolPower> pools;   // the config's (PowerService)
  std::vector<PartitionRow> partitions;  // in config order
  std::array<int64_t, 8> jobs{};         // per state::JobState, in the image
  int64_t held = 0;                      // pending jobs that are held
  int64_t cycles = 0, submits = 0, starts = 0;
};

// Writes the scrape-time families of `g` (hachi_node_gpus, hachi_partition_gpus,
// hachi_jobs, hachi_jobs_held, hachi_fragmented_gpus, hachi_agent_heartbeat_age_seconds,
// hachi_node_state, hachi_cycles_total, hachi_submits_total, hachi_starts_total).
void WriteClusterGauges(const ClusterGauges& g, metrics::Writer& w);

class ControllerMetrics {
 public:
  ControllerMetrics();

  metrics::Registry& registry() { return registry_; }
  metrics::Histogram& cycle() { return cycle_; }
  metrics::Histogram& plan_apply() { return plan_apply_; }
  metrics::Histogram& store_commit() { return store_commit_; }
  // A job started after waiting `seconds` (start - max(submit, last release/requeue)).
  void ObserveWait(const std::string& partition, int gpus, bool share, double seconds)
      EXCLUDES(wait_mu_);
  // The idle-GPU policy acted on a job of `partition` ("warn", "requeue",
  // "cancel"): hachi_idle_gpu_actions_total.
  void IdleAction(const std::string& partition, std::string_view action) {
    idle_actions_.With({partition, std::string(action)}).Inc();
  }

 private:
  metrics::Registry registry_;  // first: the references below point into it
  metrics::Family<metrics::Histogram>& queue_wait_;
  metrics::Family<metrics::Counter>& idle_actions_;
  metrics::Histogram& cycle_;
  metrics::Histogram& plan_apply_;
  metrics::Histogram& store_commit_;
  Mutex wait_mu_;
  // (partition, gpus; -1 = share) -> series: label strings made once per series.
  std::map<std::string, std::map<int, metrics::Histogram*>, std::less<>> wait_series_
      GUARDED_BY(wait_mu_);
};

}  // namespace hachi::server
