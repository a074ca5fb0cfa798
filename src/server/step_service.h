// StepService: job steps (docs/steps.md), srun inside an allocation, and salloc's end.
// It lays a step's tasks out on the job's nodes (step_layout.h), records it
// (StepStarted, StepEnded), hands each node's part to its agent through the hub, and
// relays the tasks' output from the agents to srun through StepStreams. A run's
// running steps end with it in the same commit (its Extend hook).
//
// Thread-safety: every public method may be called from any thread; its state is
// guarded by the ledger's mu() but the streams, which lock themselves.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "core/status.h"
#include "server/authorizer.h"
#include "server/controller_options.h"
#include "server/fleet.h"
#include "server/ledger.h"
#include "server/step_streams.h"

namespace hachi::server {

class StepService : public OnLedger, public Ledger::Observer {
 public:
  // Not owned; all outlive it.
  StepService(Ledger* ledger, Fleet* fleet, AgentHub* hub, const Authorizer* authorizer,
              const ControllerOptions* options);

  // Long polls for a step's output wait on StepTopic(job, step) (step_streams.h).
  void SetNotifier(std::function<void(const std::string&)> notify)
      EXCLUDES(ledger_->mu());

  // srun inside running job `id`: lays the step's tasks out on the job's nodes (block
  // distribution; -N, -n, --ntasks-per-node, -w, and --gpus-per-task/-c checked against
  // what the job has on each), records it (durable on return) and queues each node's
  // part for its agent. Owner or admin (Action::kRunStep); kBusy for a job not running,
  // or whose steps hold as much unread output as the server keeps for one job
  // (StepStreams::RoomForStep).
  Result<state::StepRecord> CreateStep(state::JobId id, const api::StepRequest& req,
                                       const Caller& who)
      EXCLUDES(ledger_->writer_mu(), ledger_->mu());
  // Step `step` of the job's current run (or of its run that started at `run`). Owner
  // or admin.
  Result<state::StepRecord> StepOf(state::JobId id, int step, const Caller& who,
                                   Time run = 0) const EXCLUDES(ledger_->mu());
  // Its output from offset `from` (StepStreams), and once it ended and the reader has
  // everything, `done` with the tasks' exits. An `observe`r (sattach) takes nothing from
  // the step's srun. `run`: the start time of the run the step belongs to (srun's own,
  // which may have been requeued since; its srun still reads until done); 0: the job's
  // current run.
  Result<api::StepOutput> ReadStepOutput(state::JobId id, int step, int64_t from,
                                         const Caller& who, bool observe = false,
                                         Time run = 0) EXCLUDES(ledger_->mu());
  // A signal to a running step's tasks, or (`cancel`) their stop: SIGTERM, the kill
  // grace, SIGKILL. Owner or admin; kBusy once it ended.
  Status SignalStep(state::JobId id, int step, int signal, bool cancel, const Caller& who)
      EXCLUDES(ledger_->mu());
  // A --pty step's keystrokes and window size, to its node. Owner or admin; kBusy once
  // it ended, kInvalidArgument for a step without a terminal.
  Status StepInput(state::JobId id, int step, api::StepInput input, const Caller& who)
      EXCLUDES(ledger_->mu());
  // The steps of job `id`, every run's, in key order; id 0: every job's (sacct).
  std::vector<state::StepRecord> Steps(state::JobId id) const EXCLUDES(ledger_->mu());
  // salloc's end (POST /jobs/ID/complete): an interactive allocation's holders are
  // stopped and the job ends COMPLETED (exit 0) or FAILED with `exit_code`. Owner or
  // admin; kInvalidArgument for a job that is not an interactive allocation.
  Status CompleteAllocation(state::JobId id, int exit_code, const Caller& who)
      EXCLUDES(ledger_->writer_mu(), ledger_->mu());
  // An agent's reports (POST /agents/NODE/steps): output, task exits, parts done. A step
  // whose every node is done ends (StepEnded) with its tasks' worst exit; -K stops a step
  // at its first failing task. Acks say how much of each it holds, and `gone` for a step
  // that ended or is not the node's.
  Result<std::vector<api::StepAck>> ReportSteps(const std::string& node,
                                                const api::StepReports& reports)
      EXCLUDES(ledger_->writer_mu(), ledger_->mu());
  // The running steps on `reg.node` its agent does not run (it restarted), ended FAILED.
  std::vector<state::Edit> LostStepsLocked(const api::AgentRegistration& reg) const
      REQUIRES(ledger_->mu());

  // Ledger::Observer: the running steps of a run that `edits` end or requeue end with
  // it (prepended, as StepEnded); after an apply, the streams of the steps that ended,
  // and their readers.
  void Extend(std::vector<state::Edit>* edits) override;
  void Applied(const std::vector<state::Edit>& edits) override;

 private:
  // StepOf, and kBusy (naming its state) once it ended.
  Result<state::StepRecord> RunningStepOf(state::JobId id, int step,
                                          const Caller& who) const
      EXCLUDES(ledger_->mu());
  void EndStepsOfJobsLocked(std::vector<state::Edit>* edits) const
      REQUIRES(ledger_->mu());
  void StepsEndedLocked(const std::vector<state::Edit>& edits) REQUIRES(ledger_->mu());

  // Constant after construction.
  Fleet* const fleet_;
  AgentHub* const hub_;
  const Authorizer* const authorizer_;
  const ControllerOptions* const options_;
  // Job steps' output on its way to srun; thread-safe (step_streams.h).
  StepStreams streams_;
  std::function<void(const std::string&)> notify_ GUARDED_BY(ledger_->mu());
};

}  // namespace hachi::server
