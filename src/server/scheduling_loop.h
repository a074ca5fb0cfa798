// SchedulingLoop: the scheduling loop and the plan applier (DESIGN.md §4.5: one
// writer). A cycle first does the loop's checks (silent agents and fences, late
// burn-in runs, the idle-GPU policy), takes a snapshot under the ledger's locks, runs
// sched/ without them (submits, reports, cancels go on meanwhile), then re-checks every
// start against the records as they are now (sched::PlanApplier, the checks `hachi sim`
// applies too), commits the starts in one transaction and hands the launches to the
// agents (the Fleet's Dispatch). Between cycles it also writes the running jobs' usage
// and gives freed memory back to the system.
//
// Thread-safety: Start, Stop and RunCycle may be called from any thread; one cycle
// runs at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "sched/scheduler.h"
#include "server/burn_in_service.h"
#include "server/controller_options.h"
#include "server/fair_share_service.h"
#include "server/fleet.h"
#include "server/ledger.h"
#include "server/node_service.h"
#include "server/power_service.h"
#include "server/usage_service.h"

namespace hachi::server {

class ControllerMetrics;

class SchedulingLoop : public OnLedger, public Ledger::Observer {
 public:
  // Not owned; all outlive it.
  SchedulingLoop(Ledger* ledger, Fleet* fleet, AgentHub* hub, NodeService* nodes,
                 BurnInService* burn_in, UsageService* usage,
                 FairShareService* fair_share, PowerService* power,
                 ControllerMetrics* metrics, const ControllerOptions* options,
                 std::unique_ptr<sched::Scheduler> scheduler);
  ~SchedulingLoop() override;

  // The loop's thread: a cycle whenever something changed (the Fleet's WakeLocked, an
  // apply that may start a job) or the cycle interval passed.
  void Start() EXCLUDES(ledger_->mu());
  // Idempotent; the Fleet's `stopping` must be set (and the loop woken) first.
  void Join();
  // Runs one scheduling cycle now, on the caller's thread (tests).
  void RunCycle() EXCLUDES(cycle_mu_, ledger_->mu(), ledger_->writer_mu());

  // Ledger::Observer: a job released or requeued is eligible again from now (its queue
  // wait counts from then), and an apply that may start a job wakes the loop.
  void Applied(const std::vector<state::Edit>& edits) override;

 private:
  void Loop() EXCLUDES(ledger_->mu(), ledger_->writer_mu());
  // One cycle: snapshot (the ledger's locks), schedule (neither), apply (both again).
  void Cycle() REQUIRES(cycle_mu_) EXCLUDES(ledger_->mu(), ledger_->writer_mu());
  // The checks, then the snapshot the scheduler plans on and the base generation it
  // was built from (a plan made on an older one is dropped).
  std::shared_ptr<sched::ClusterState> SnapshotLocked(Time now, uint64_t* generation)
      REQUIRES(ledger_->writer_mu(), ledger_->mu());
  // The checks before a snapshot: agents and fences, burn-in runs, the idle policy.
  void CheckLocked(Time now) REQUIRES(ledger_->writer_mu(), ledger_->mu());
  // Runs whose GPUs have stayed idle past their partition's policy: warned once per
  // idle spell, and requeued or cancelled when the policy says so.
  void CheckIdleLocked(Time now) REQUIRES(ledger_->writer_mu(), ledger_->mu());
  // The burst pools' resumes and suspends after the cycle's starts (PowerService).
  void PowerLocked(const sched::Plan& plan, const sched::ClusterState& snap, Time now)
      REQUIRES(ledger_->writer_mu(), ledger_->mu());
  // Pending jobs whose --deadline can no longer be met (now + time limit past it) end
  // as DEADLINE, never started.
  void EndPastDeadlineLocked(Time now) REQUIRES(ledger_->writer_mu(), ledger_->mu());
  void ApplyPlanLocked(const sched::Plan& plan,
                       std::shared_ptr<const sched::ClusterState> snap, Time now)
      REQUIRES(ledger_->writer_mu(), ledger_->mu());
  // The plan's preemptions: each victim is told to stop, and requeued or cancelled when
  // it reports its exit.
  void ApplyPreemptionsLocked(const sched::Plan& plan, Time now)
      REQUIRES(ledger_->writer_mu(), ledger_->mu());

  // Lock order: cycle_mu_, the ledger's writer_mu() and mu(), then the AgentHub's own.

  // Constant after construction.
  Fleet* const fleet_;
  AgentHub* const hub_;
  NodeService* const nodes_;
  BurnInService* const burn_in_;
  UsageService* const usage_;
  FairShareService* const fair_share_;
  PowerService* const power_;
  ControllerMetrics* const metrics_;
  const ControllerOptions* const options_;

  // One cycle at a time (the loop and RunCycle).
  Mutex cycle_mu_ ACQUIRED_BEFORE(ledger_->writer_mu());
  const std::unique_ptr<sched::Scheduler> scheduler_ GUARDED_BY(cycle_mu_);
  std::vector<std::string> last_plan_errors_ GUARDED_BY(cycle_mu_);
  // RecentWorkload, refreshed by the cycle.
  std::vector<sched::WorkloadClass> workload_ GUARDED_BY(ledger_->mu());
  Time workload_at_ GUARDED_BY(ledger_->mu()) = 0;
  // Jobs the applier did not start for want of a free MASTER_PORT on their rank-0 node,
  // so that the log says it once per job.
  std::set<state::JobId> port_starved_ GUARDED_BY(ledger_->mu());
  std::thread loop_;  // started under mu() (Start), joined by Join without it
};

}  // namespace hachi::server
