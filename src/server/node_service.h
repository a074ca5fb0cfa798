// NodeService: the nodes and their agents. Agents register (their hardware compiled,
// their jobs reconciled with the records), long-poll for work (the poll is also the
// heartbeat; it waits in the AgentHub, not on the ledger's locks), report exits and
// health; admins drain and resume nodes. A node whose agent falls silent goes down,
// and its runs are counted dead only once its fence has passed (docs/fencing.md).
//
// Thread-safety: every public method may be called from any thread; its state is the
// Fleet's, guarded by the ledger's mu().
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "core/status.h"
#include "server/authorizer.h"
#include "server/burn_in_service.h"
#include "server/clock_offsets.h"
#include "server/controller_options.h"
#include "server/fleet.h"
#include "server/ledger.h"
#include "server/step_service.h"
#include "server/usage_service.h"

namespace hachi::server {

class NodeService : public OnLedger {
 public:
  // Not owned; all outlive it.
  NodeService(Ledger* ledger, Fleet* fleet, AgentHub* hub, StepService* steps,
              BurnInService* burn_in, UsageService* usage, ClockOffsets* clocks,
              const Authorizer* authorizer, const ControllerOptions* options);

  // ---- Agents ----
  // `peer` is the address the registration came from as the connection layer saw it
  // ("" for a Unix-socket peer or an in-process caller): the node's address when the
  // agent gave none; a given one is checked against it (server/agent_address.h).
  Status Register(const AgentRegistration& reg, const std::string& peer = "")
      EXCLUDES(ledger_->writer_mu(), ledger_->mu());
  // `ack`: the last batch the agent acted on (AgentHub::Wait); `agent_clock_ms`: the
  // agent's wall clock as it sent the poll, which arrives now (ClockOffsets).
  AgentWork Poll(const std::string& node, int wait_ms, int64_t ack = AgentHub::kNoAck,
                 std::optional<int64_t> agent_clock_ms = std::nullopt);
  Status ReportExits(const std::string& node, const std::vector<api::JobExit>& exits)
      EXCLUDES(ledger_->writer_mu(), ledger_->mu());
  // GPU faults an agent saw (api::GpuHealthEvent). "fatal" or "reset" on a GPU: that GPU
  // (not the node) leaves service with the event as its reason, and the job running on
  // it is requeued with the event in its reason, its processes stopped on every node.
  // "node" (NVSwitch / fabric): the node is drained and its jobs requeued likewise.
  // "info" and "job" (the application's own fault) change nothing.
  Status ReportHealth(const std::string& node, const api::AgentHealth& health)
      EXCLUDES(ledger_->writer_mu(), ledger_->mu());
  // The lease agents are told at registration (ControllerOptions::lease, resolved).
  Duration lease() const { return options_->lease; }

  // ---- Admins (Authorizer) ----
  Status Drain(const std::string& node, const std::string& reason, const Caller& who)
      EXCLUDES(ledger_->writer_mu(), ledger_->mu());
  // A drained node goes back up, and its unhealthy GPUs back into service; `gpu` >= 0:
  // only that unhealthy GPU returns (the node's state is left alone). With burn-in
  // checks for the node (burn_in_service.h) what returns is burned in first: a GPU
  // stays out until its run passes, a node that has not passed with what it is now
  // goes to burn-in, and a node in burn-in runs its checks again.
  Status Resume(const std::string& node, int gpu, const Caller& who)
      EXCLUDES(ledger_->writer_mu(), ledger_->mu());

  // ---- The loop's check ----
  // Nodes whose agent was silent past the agent timeout go down (no new jobs; the agent
  // must register again; their runs stay RUNNING, with their GPUs); then the runs on
  // down nodes whose fence (last contact + lease + kill grace + margin) has passed
  // count as lost, the gang's other parts are stopped, and the job is requeued
  // (--requeue) or ends NODE_FAIL once no part runs.
  void CheckAgentsLocked(Time now) REQUIRES(ledger_->writer_mu(), ledger_->mu());

 private:
  // When the run `e` reports ended, by this server's clock.
  Time EndTimeOf(const api::JobExit& e, const state::JobRecord& job) const;
  void NodeLostLocked(const std::string& node, const std::string& why, Time now)
      REQUIRES(ledger_->writer_mu(), ledger_->mu());
  void FenceLocked(Time now) REQUIRES(ledger_->writer_mu(), ledger_->mu());
  // The runs past their time limit that their agents did not end (RunOverdue) are
  // stopped, to end TIMEOUT.
  void StopOverdueLocked(Time now) REQUIRES(ledger_->writer_mu(), ledger_->mu());
  // The jobs RUNNING in the records (valid until the next commit).
  std::vector<const state::JobRecord*> RunningJobsLocked() const REQUIRES(ledger_->mu());
  // Register's second half: the jobs the records run on `reg.node` reconciled with what
  // its agent says it runs (re-sent, requeued or ended), and what it runs without the
  // records' leave stopped.
  Status ReconcileLocked(const AgentRegistration& reg, bool same_agent, Time now)
      REQUIRES(ledger_->writer_mu(), ledger_->mu());
  // ReportHealth's processes: who runs on the node's GPUs, and each running job's peak
  // GPU memory there.
  Status NoteProcessesLocked(const std::string& node, const api::AgentHealth& health,
                             int gpus, Time now) REQUIRES(ledger_->mu());

  // Constant after construction.
  Fleet* const fleet_;
  AgentHub* const hub_;
  StepService* const steps_;
  BurnInService* const burn_in_;
  UsageService* const usage_;
  ClockOffsets* const clocks_;
  const Authorizer* const authorizer_;
  const ControllerOptions* const options_;

  // When CheckAgentsLocked last ran (the Clock's monotonic ms; -1: never).
  int64_t last_check_ms_ GUARDED_BY(ledger_->mu()) = -1;
  // Since when the checks have run without a stall (the same clock; -1: never).
  int64_t checking_since_ms_ GUARDED_BY(ledger_->mu()) = -1;
};

}  // namespace hachi::server
