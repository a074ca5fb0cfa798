// Controller: the server's logic, without HTTP (DESIGN.md §2 server/, §3), as a ledger
// and the services that stand on it. The Ledger (ledger.h) owns the records and their
// one write path: every change is checked against the image, made durable through the
// Store, then applied (state/edits.h), and the services that keep state beside the
// records follow each apply as its observers. Each service has one concern:
//
//   JobService      submit, cancel, hold, signal, requeue, update   job_service.h
//   StepService     job steps (srun), salloc's end, their output    step_service.h
//   NodeService     agents (register, poll, exits, health), nodes   node_service.h
//   BurnInService   the burn-in gate                                burn_in_service.h
//   PowerService    burst pools powered up and down                 power_service.h
//   UsageService    what running jobs do with their GPUs            usage_service.h
//   FairShareService accounts' decayed usage; sshare, sprio         fair_share_service.h
//   TokenService    who is asking: API tokens                       token_service.h
//   JobViews        jobs as shown, why one waits, its usage         views.h
//   ClusterViews    nodes, partitions, gauges, GPU-hours            views.h
//   SchedulingLoop  the cycle and the plan applier                  scheduling_loop.h
//
// and share, beside the records, the Fleet (fleet.h): the nodes' hardware, the runs
// under way, the last cycle's diagnoses, and the run control. The Controller only
// builds and wires them; the HTTP layer (http_api.h) calls the services directly.
//
// Thread-safety: every method may be called from any thread at any time. The
// ledger's mu() guards the records and the state the services keep beside them; its
// writer_mu() lets one writer at a time check, commit and apply its edits, and the
// commit's fsync runs without mu(), so reads never wait for the disk. Agents' long
// polls wait in the AgentHub, not on mu(). The lock contract is in the services'
// declarations (GUARDED_BY, REQUIRES), checked by `make analyze`.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/clock.h"
#include "core/status.h"
#include "server/agent_hub.h"
#include "server/authorizer.h"  // Caller, Authorizer
#include "server/burn_in_service.h"
#include "server/controller_options.h"
#include "server/fair_share_service.h"
#include "server/fleet.h"
#include "server/job_service.h"
#include "server/ledger.h"
#include "server/node_service.h"
#include "server/power_service.h"
#include "server/scheduling_loop.h"
#include "server/step_service.h"
#include "server/token_service.h"
#include "server/usage_service.h"
#include "server/views.h"
#include "state/store.h"

namespace hachi::server {

class ControllerMetrics;  // controller_metrics.h

class Controller {
 public:
  // Loads the state from `store`; starts nothing (call Start).
  static Result<std::unique_ptr<Controller>> Create(ControllerOptions options,
                                                    std::unique_ptr<state::Store> store);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  void Start();  // the scheduling loop thread
  // Idempotent; wakes every waiter, then writes the running jobs' usage so far.
  void Stop();
  // Long polls parked in the HTTP layer (server/http_loop.h) wait on topics: JobTopic(id)
  // is notified when the job changes, AgentTopic(node) when the node's agent has work or
  // must register again, StepTopic(job, step) when a step has output. `notify` is called
  // with a service's or the hub's lock held: it must only queue, never call back.
  // nullptr: none.
  void SetNotifier(std::function<void(const std::string&)> notify);
  bool stopping() const;
  // Runs one scheduling cycle now, on the caller's thread (tests).
  void RunCycle() { loop_->RunCycle(); }

  // ---- The services ----
  JobService& jobs() { return *jobs_; }
  StepService& steps() { return *steps_; }
  NodeService& nodes() { return *nodes_; }
  const JobViews& job_views() const { return *job_views_; }
  FairShareService& fair_share() { return *fair_share_; }
  const ClusterViews& cluster_views() const { return *cluster_views_; }
  BurnInService& burn_in() { return *burn_in_; }
  PowerService& power() { return *power_; }
  TokenService& tokens() { return *tokens_; }
  const TokenService& tokens() const { return *tokens_; }
  // Who may do what, for the HTTP layer's decisions too (its gate, the redaction of a
  // job's details): built from the config at Create, constant after.
  const Authorizer& authorizer() const { return authorizer_; }
  // The clock every service reads (ControllerOptions::clock): the HTTP layer and the
  // history sampler read the same one.
  const Clock& clock() const { return *options_.clock; }

 private:
  Controller(ControllerOptions options, std::unique_ptr<Ledger> ledger,
             Authorizer authorizer);

  // Constant after construction, in the order they are built (each service points at
  // those above it) and destroyed in reverse.
  const ControllerOptions options_;
  const Authorizer authorizer_;
  const std::unique_ptr<Ledger> ledger_;
  // Its series are thread-safe (metrics.h).
  const std::unique_ptr<ControllerMetrics> metrics_;
  // The agents' work queues and long polls; thread-safe (agent_hub.h).
  AgentHub hub_;
  // Each agent's clock against the server's, from their polls; thread-safe.
  ClockOffsets clocks_;
  std::unique_ptr<Fleet> fleet_;
  std::unique_ptr<UsageService> usage_;
  std::unique_ptr<FairShareService> fair_share_;
  std::unique_ptr<BurnInService> burn_in_;
  std::unique_ptr<PowerService> power_;
  std::unique_ptr<TokenService> tokens_;
  std::unique_ptr<StepService> steps_;
  std::unique_ptr<JobService> jobs_;
  std::unique_ptr<NodeService> nodes_;
  std::unique_ptr<JobViews> job_views_;
  std::unique_ptr<ClusterViews> cluster_views_;
  std::unique_ptr<SchedulingLoop> loop_;
};

}  // namespace hachi::server
