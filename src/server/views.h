// The read views: what users, the dashboard and the scrape see of the records, with
// what the services keep beside them (a running job's usage so far, a pending job's
// reason from the last cycle, a node's fence). JobViews shows jobs (a job, a page of
// them, why one waits, its usage); ClusterViews the nodes, partitions and the gauges.
// Each copies what it needs under the ledger's mu() and formats the rest without it;
// none writes.
//
// Thread-safety: every public method may be called from any thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "report/explain.h"
#include "report/gpu_report.h"
#include "report/stats_cause.h"
#include "server/agent_hub.h"
#include "server/burn_in_service.h"
#include "server/clock_offsets.h"
#include "server/controller_options.h"
#include "server/fleet.h"
#include "server/ledger.h"
#include "server/power_service.h"
#include "server/usage_service.h"

namespace hachi::server {

class ControllerMetrics;  // controller_metrics.h
struct ClusterGauges;

class JobViews : public OnLedger {
 public:
  // Not owned; all outlive it.
  JobViews(Ledger* ledger, Fleet* fleet, UsageService* usage, const PowerService* power,
           const ControllerOptions* options);

  Result<state::JobRecord> Job(state::JobId id) const EXCLUDES(ledger_->mu());
  // Jobs in id order, those with ids above `after`, at most `limit` (0: all): a page,
  // so that a client listing 100,000 jobs does not make the server build one reply of
  // them all (GET /jobs?after=&limit=). A running job's `usage` is its run's so far.
  std::vector<state::JobRecord> Jobs(bool include_finished, state::JobId after = 0,
                                     size_t limit = 0) const EXCLUDES(ledger_->mu());
  std::optional<PendingInfo> Pending(state::JobId id) const EXCLUDES(ledger_->mu());
  // The pending and running jobs, briefly (the history sampler's view).
  std::vector<JobBrief> ActiveJobBriefs() const EXCLUDES(ledger_->mu());
  // Why a job waits, with numbers, or its history (report/explain.h). kNotFound.
  Result<report::JobExplain> Explain(state::JobId id) const EXCLUDES(ledger_->mu());
  // What job `id`'s runs did with their GPUs, CPUs and memory (docs/efficiency.md): the
  // stored runs and, for a running job, its current run as the server has it now;
  // ascending by start time. Empty when its runs were never sampled. kNotFound.
  Result<std::vector<state::JobUsage>> Usage(state::JobId id) const
      EXCLUDES(ledger_->writer_mu(), ledger_->mu());

 private:
  // A job as it is shown: a running job's usage so far, the reason a pending job waits
  // or a note on a running one (its node's fence, the idle policy).
  void ShownLocked(state::JobRecord* r) const REQUIRES(ledger_->mu());
  // Explain's history of job `rec` (submitted, eligible again, started, ended) and the
  // note on a running one; `e` gets them.
  void HistoryLocked(const state::JobRecord& rec, report::JobExplain* e) const
      REQUIRES(ledger_->mu());

  // Constant after construction.
  Fleet* const fleet_;
  UsageService* const usage_;
  const PowerService* const power_;
  const ControllerOptions* const options_;
};

class ClusterViews : public OnLedger {
 public:
  // Not owned; all outlive it.
  ClusterViews(Ledger* ledger, Fleet* fleet, const AgentHub* hub, UsageService* usage,
               const PowerService* power, const ClockOffsets* clocks,
               ControllerMetrics* metrics, const ControllerOptions* options);

  // The cluster's nodes in the base's order (a burst node that has not registered
  // included, powered off), then registered nodes the base left out.
  std::vector<state::NodeStatus> Nodes() const EXCLUDES(ledger_->mu());
  std::vector<sched::Partition> Partitions() const  // node indices as in Nodes()
      EXCLUDES(ledger_->mu());
  std::vector<std::string> Warnings() const EXCLUDES(ledger_->mu());
  // The config's pools, with what their burst nodes are powered (docs/pools.md).
  std::vector<sched::PoolPower> Pools() const EXCLUDES(ledger_->mu());
  ControllerStats stats() const EXCLUDES(ledger_->mu());
  // GET /metrics: the registry's families, then the gauges of Gauges() (docs/metrics.md).
  std::string MetricsText() const;
  // The cluster now, for the scrape: copied under the lock, computed without it.
  ClusterGauges Gauges() const EXCLUDES(ledger_->mu());
  // Each partition's nodes and pending jobs (with the last cycle's reasons), for the
  // likely cause of a slow partition (report/stats_cause.h).
  std::vector<report::PartitionLoad> PartitionLoads() const EXCLUDES(ledger_->mu());
  // GPU-hours allocated and used over [q.from, q.to) per group, and the idlest jobs
  // (`hachi report`, GET /report): every record, running jobs with their usage so far,
  // nodes grouped by their GPU model.
  report::GpuReport GpuHours(const report::ReportQuery& q) const EXCLUDES(ledger_->mu());

 private:
  state::NodeStatus NodeStatusLocked(const state::NodeRecord& rec,
                                     const sched::ClusterState& snap) const
      REQUIRES(ledger_->mu());
  // The processes the node's agent reported on GPUs no running job of theirs was given.
  std::vector<state::StrayGpuProcess> StrayProcessesLocked(const std::string& node) const
      REQUIRES(ledger_->mu());

  // Constant after construction.
  Fleet* const fleet_;
  const AgentHub* const hub_;
  UsageService* const usage_;
  const PowerService* const power_;
  const ClockOffsets* const clocks_;
  ControllerMetrics* const metrics_;
  const ControllerOptions* const options_;
};

}  // namespace hachi::server
