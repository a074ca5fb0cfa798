// The trace-driven simulator behind `hachi sim` (DESIGN.md §2 sim/): an event loop on a
// virtual clock that feeds a job trace to the very same sched::Scheduler the server
// runs, applies each plan as the server's plan applier would, and records when every
// job started and ended.
//
// Events are arrivals (a job's submit time), completions (start + true run time: jobs
// are never killed by their time limits, which only inform backfill), preemption kills
// (a plan's Preemption::kill_at: the job is requeued or cancelled) and wake-ups
// (Plan::wake_at: a time window opens or closes). At each distinct event time the loop
// applies every event of that time — completions first (a job that finishes on its
// own before its kill is not killed), then kills, then arrivals — and then runs one
// scheduling cycle if jobs are pending. Work per event is proportional to what
// changed (swap-and-pop removal, a heap of completions, lazily decayed fair share).
//
// Deterministic: the same trace, cluster and scheduler config give the same outcomes;
// only the measured cycle times differ. Not thread-safe; a run owns its state.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "sched/cluster.h"
#include "sched/power.h"
#include "sched/scheduler.h"
#include "sim/cluster_spec.h"
#include "sim/metrics.h"
#include "sim/time_limits.h"
#include "sim/trace.h"

namespace hachi::sim {

struct SimProgress {
  int64_t finished = 0;  // jobs ended or rejected
  int64_t total = 0;
  Time now = 0;  // virtual time
};

struct SimOptions {
  TimeLimitModel time_limits = TimeLimitModel::kRounded;
  // Fair share: usage is GPU-seconds decayed with this half-life; shares are 1 per
  // account unless listed here or in the cluster's FairShare::shares.
  Duration fairshare_half_life = 7 * kDay;
  std::unordered_map<std::string, double> shares;
  // Time windows: UTC seconds since the Unix epoch at trace time 0 (ClusterState::
  // clock_offset). 0: the trace starts at midnight UTC.
  Duration clock_offset = 0;
  // Called about every 0.1 % of the jobs and once at the end; may be empty.
  std::function<void(const SimProgress&)> progress;
  // Node pools (docs/pools.md): the nodes of burst pools start powered off; after each
  // cycle sched::PlanPower, the server's rule, decides which to power up (each is up
  // `resume_delay` later) and which idle ones to power down. Empty: all nodes always on.
  std::vector<sched::PowerPool> pools;
  Duration resume_delay = 5 * kMinute;
};

struct SimResult {
  std::vector<JobOutcome> outcomes;     // finished jobs, by job id
  std::vector<double> cycle_ms;         // wall time of each Schedule() call
  int64_t rejected = 0;                 // refused at submit by sched::ValidateRequest
  std::vector<std::string> rejections;  // the first few reasons, "job 12: ..."
  int64_t backfilled = 0;               // starts the plans marked as backfilled
  // Preemption (sched::Plan::preemptions): applied, and how they ended. A requeued job
  // loses its run so far (lost_gpu_seconds) and waits again with its submit time; a
  // cancelled one leaves `outcomes` out.
  int64_t preemptions = 0;
  int64_t requeues = 0;
  int64_t cancelled = 0;
  double lost_gpu_seconds = 0;
  std::vector<PoolUse> pools;  // one per SimOptions::pools, in its order
  Time end = 0;                // the last event's time (trace time 0 is the first submit)
};

// Replays `trace` (sorted by submit, ids 1..n as the readers return it) on `cluster`
// (idle nodes; its pending/running lists are ignored). Errors: kInternal when a plan
// is inconsistent (starts a job that is not pending, gives a GPU twice, a gang of the
// wrong size, preempts a job that is not running or already being preempted);
// kUnsatisfiable when the run is stuck — jobs pending, none running, none arriving,
// and no wake-up or 8 days of wake-ups without progress — naming the jobs and their
// diagnoses.
Result<SimResult> Simulate(const std::vector<TraceJob>& trace,
                           sched::ClusterState cluster, sched::Scheduler& scheduler,
                           const SimOptions& options);

// One `hachi sim` run from names: builds the cluster and the scheduler (with lean
// cycles: SchedConfig::explain = false, whatever config.sched says), simulates and
// computes the metrics (wall_s covers this call; trace reading is the caller's).
struct RunConfig {
  std::string cluster = "96x8:hgx-h100";  // cluster_spec.h
  ClusterOptions cluster_options;
  // Applied to the built cluster before the run when set, e.g. a cluster config file
  // (`hachi sim --config`: config::ApplyClusterConfig); its error ends the run.
  std::function<Status(sched::ClusterState*)> configure;
  // The node pools over the built (and configured) cluster, when set (`hachi sim
  // --config` with [[pool]] tables: config::PowerPools); they go to SimOptions::pools.
  std::function<Result<std::vector<sched::PowerPool>>(const sched::ClusterState&)> pools;
  sched::SchedConfig sched;
  SimOptions sim;
};
Result<SimMetrics> RunSimulation(const std::vector<TraceJob>& trace,
                                 const RunConfig& config);

}  // namespace hachi::sim
