// Fleet: what the controller's services share beside the records, and the run control
// they all need. The records say what runs where; the fleet keeps what they do not:
// each node's compiled hardware and the cluster base built from it, how each running
// job's run is ending (runs.h), what agents still run that the records ended, the
// processes agents see on their GPUs, the queue as the last cycle diagnosed it, and the
// scheduling loop's wake-up. Its run control starts a run's parts on their agents
// (Dispatch), stops them (StopParts, Cancel), writes the edit that ends a run (RunEnd),
// and answers for a silent node's fence.
//
// Thread-safety: every field is guarded by the ledger's mu(); a service reaches them
// after its own lock with Held(ledger) (ledger.h's bridge). Only the services of one
// Controller use it.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "api/protocol.h"
#include "core/mutex.h"
#include "sched/scheduler.h"
#include "server/agent_hub.h"
#include "server/controller_options.h"
#include "server/ledger.h"
#include "server/runs.h"
#include "server/snapshot.h"

namespace hachi::server {

class Fleet : public OnLedger {
 public:
  // Not owned; all outlive it.
  Fleet(Ledger* ledger, AgentHub* hub, const ControllerOptions* options);

  // The nodes, runs and ledger as a restarted server finds them (before any thread).
  Status LoadLocked() REQUIRES(ledger_->mu());
  // The cluster base again from the records and the hardware (nodes or config changed).
  Status RebuildBaseLocked() REQUIRES(ledger_->mu());

  // ---- Run control ----
  // Queues the launch of `job`'s parts for their agents; only `node`'s when not empty.
  // Called after the job's start is durable (commit, then dispatch).
  void DispatchLocked(const state::JobRecord& job, const std::string& node = "")
      REQUIRES(ledger_->mu());
  // Stops a running job's parts: a launch its agent has not taken yet is taken back
  // (that part ended, counted in `info`), the others are cancelled through their agents.
  void StopPartsLocked(const state::JobRecord& job, RunInfo* info)
      REQUIRES(ledger_->mu());
  // Cancels job `id` with `reason`: a pending job's JobEnded appended to `edits`, a
  // running job's agents told (and its JobEnded appended when no part was delivered).
  void CancelLocked(state::JobId id, const std::string& reason,
                    std::vector<state::Edit>* edits) REQUIRES(ledger_->mu());
  // The edit that ends a run no part of which runs any more: requeued (preempted with
  // requeue; lost with its node, --requeue) or ended (EndOf).
  state::Edit RunEndLocked(const state::JobRecord& job, const RunInfo& info,
                           Time end_time) const REQUIRES(ledger_->mu());
  // The scheduling loop runs a cycle soon (something changed that may start a job).
  void WakeLocked() REQUIRES(ledger_->mu());

  // ---- Nodes that cannot be trusted yet ----
  // Milliseconds until the fence of `node` passes (0: passed); -1 when it is not down.
  int64_t FenceLeftMsLocked(const std::string& node) const REQUIRES(ledger_->mu());
  // A running job's note while a part of it waits for its node's fence ("waiting for
  // node n2's lease to expire before requeue, 47 s"); "" when none does.
  std::string FenceNoteLocked(const state::JobRecord& job) const REQUIRES(ledger_->mu());
  // Nodes whose agent still runs a run the records no longer have there (it came back
  // after the fence): they take no new jobs until those runs' exits are in. Applied to
  // every snapshot the scheduler and the applier see.
  void HoldStaleNodesLocked(sched::ClusterState* s) const REQUIRES(ledger_->mu());
  // "stopping job 12's earlier run" for such a node; "" for another.
  std::string StaleNoteLocked(const std::string& node) const REQUIRES(ledger_->mu());
  // A pending job's reason word from the last cycle ("" if none).
  std::string ReasonLocked(state::JobId id) const REQUIRES(ledger_->mu());

  // ---- Guarded by the ledger's mu() ----
  std::unordered_map<std::string, NodeHardware> hardware GUARDED_BY(ledger_->mu());
  BaseCluster base GUARDED_BY(ledger_->mu());
  bool base_dirty GUARDED_BY(ledger_->mu()) = true;
  // +1 per rebuild: a plan made on an older base is dropped.
  uint64_t base_generation GUARDED_BY(ledger_->mu()) = 0;
  // The running jobs' runs: how each is ending.
  std::unordered_map<state::JobId, RunInfo> runs GUARDED_BY(ledger_->mu());
  // Per node, the jobs whose earlier run its agent still runs though the records ended
  // or requeued it (HoldStaleNodesLocked): kept until the agent reports their exit or
  // registers without them.
  std::unordered_map<std::string, std::set<state::JobId>> stale_runs
      GUARDED_BY(ledger_->mu());
  // Per rank-0 address (PortKey), the MASTER_PORTs an agent found held by a process
  // outside Hachi, and when: skipped when a job's port is chosen there, for an hour
  // (the process may go away). Not stored.
  std::unordered_map<std::string, std::map<int, Time>> foreign_ports
      GUARDED_BY(ledger_->mu());
  // Per node, when the agent instance registered now started (AgentRegistration::
  // agent_started): a registration from an older instance is refused. Not stored: a
  // restarted server takes the first registration.
  std::unordered_map<std::string, Time> agent_started GUARDED_BY(ledger_->mu());
  // The compute processes on each node's GPUs, as its agent last reported them, and
  // when each (GPU, pid) was first reported.
  struct NodeProcesses {
    std::deque<std::string> mps_events;  // NodeStatus::gpu_sharing_events
    std::vector<api::GpuProcessReport> processes;
    std::map<std::pair<int, uint32_t>, Time> since;
  };
  std::unordered_map<std::string, NodeProcesses> gpu_processes GUARDED_BY(ledger_->mu());
  // When a pending job last became eligible again (released from hold, requeued) since
  // this server started: its queue wait counts from then. Dropped when the job ends.
  struct Eligible {
    Time at = 0;
    bool requeued = false;  // else released
  };
  std::unordered_map<state::JobId, Eligible> eligible_since GUARDED_BY(ledger_->mu());
  // The last cycle's diagnoses, formatted only when asked for (a cycle with 100k
  // pending jobs must not build 100k strings); `diagnosed` is the snapshot they refer
  // to (node and partition names), kept alive until the next cycle.
  std::unordered_map<state::JobId, sched::Diagnosis> diagnoses GUARDED_BY(ledger_->mu());
  std::shared_ptr<const sched::ClusterState> diagnosed GUARDED_BY(ledger_->mu());
  Time diagnosed_at GUARDED_BY(ledger_->mu()) = 0;
  ControllerStats stats GUARDED_BY(ledger_->mu());
  // The scheduling loop's signals: something changed (dirty), the server stops.
  bool dirty GUARDED_BY(ledger_->mu()) = true;
  bool stopping GUARDED_BY(ledger_->mu()) = false;
  CondVar loop_cv{&ledger_->mu()};  // dirty or stopping

 private:
  // Constant after construction.
  AgentHub* const hub_;
  const ControllerOptions* const options_;
};

}  // namespace hachi::server
