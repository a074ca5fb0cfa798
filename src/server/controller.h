// Controller: the server's logic, without HTTP (DESIGN.md §2 server/, §3). The records
// and their one write path are the Ledger's (server/ledger.h): every change is checked
// against the image, made durable through the Store, then applied (state/edits.h). The
// Controller runs the scheduling loop on its own thread; the plan applier re-checks
// each start against the current records before it commits and dispatches it.
//
// Agents talk to it through Register / Poll (a long poll that doubles as heartbeat) /
// Report; user commands through Submit, Cancel, Hold, Drain, ... The HTTP layer
// (http_api.h) only decodes and encodes.
//
// Thread-safety: every public method may be called from any thread at any time. The
// ledger's mu() guards the records and the state kept beside them here; its
// writer_mu() lets one writer at a time check, commit and apply its edits, and the
// commit's fsync runs without mu(), so reads never wait for the disk. Agents' long
// polls wait in the AgentHub, not on mu(). The lock contract is in the declarations
// below (GUARDED_BY, REQUIRES), checked by `make analyze` (clang's -Wthread-safety).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "api/launch_spec.h"
#include "api/protocol.h"
#include "config/cluster_config.h"
#include "core/clock.h"
#include "core/mutex.h"
#include "core/status.h"
#include "report/explain.h"
#include "report/gpu_report.h"
#include "report/stats_cause.h"
#include "sched/scheduler.h"
#include "server/agent_hub.h"
#include "server/authorizer.h"  // Caller, Authorizer
#include "server/burn_in_service.h"
#include "server/ledger.h"
#include "server/runs.h"
#include "server/snapshot.h"
#include "server/step_streams.h"
#include "server/submit_keys.h"
#include "server/token_service.h"
#include "server/usage_service.h"
#include "state/records.h"
#include "state/store.h"

namespace hachi::server {

class ControllerMetrics;  // controller_metrics.h
struct ClusterGauges;

using api::AgentRegistration;
using api::AgentWork;
using api::SubmitRequest;

// A pending job's reason, as the last cycle found it.
struct PendingInfo {
  std::string reason;     // Slurm-like word: "Priority", "Resources", ...
  std::string diagnosis;  // with numbers (sched::Diagnosis::Format)
};

struct ControllerOptions {
  sched::SchedConfig sched;                     // explain is forced on
  std::optional<config::ClusterConfig> config;  // partitions, QoS, limits
  Duration agent_timeout = 30;                  // seconds without a poll: node down
  Duration kill_grace = 10;                     // SIGTERM -> SIGKILL on cancel/limit
  // Fencing (docs/fencing.md). An agent that has not reached the server for `lease`
  // seconds stops its jobs itself (the server tells it the lease when it registers);
  // the server counts a silent node's runs dead, and requeues or ends them, only
  // `lease + kill_grace + fence_margin` after it last heard from the agent. Until then
  // they stay RUNNING and keep their GPUs. lease 0: agent_timeout (so 30 s by default,
  // and the runs are counted dead 45 s after the last contact).
  Duration lease = 0;
  Duration fence_margin = 5;     // clock rates and a slow SIGKILL
  int cycle_interval_ms = 1000;  // the timer; changes wake it at once
  // How often the running jobs' usage is written to the store (a crash loses
  // at most this much of it; a run's end writes its own at once). 0: only at the end.
  int usage_flush_s = 60;
  // Each node's MASTER_PORT range, [base, base + count): a job gets the lowest port of
  // it that no other running job whose rank-0 node has the same address holds
  // (cycle.cc; nodes on one host, as `hachi dev`'s, share a range).
  int master_port_base = 29500;
  int master_port_count = 1000;
  // What one user may have pending, each 0 for no bound: jobs (an array's
  // tasks each count), and bytes of script + environment (an array's once, as it is kept
  // once). A submit past either is refused (kBusy: 409), naming the user, the limit and
  // what the user has pending.
  int64_t max_pending_jobs_per_user = 10000;
  int64_t max_pending_bytes_per_user = int64_t{1} << 30;
  // The key of the job credentials (server/auth.h, JobCredential): the cluster secret.
  // "": jobs get none (their srun then needs the user's own token over TCP).
  std::string credential_key;
  // Every time the controller decides by (records' times, agent silence, the workload
  // refresh) is read here; tests give a FakeClock. Not owned; outlives the controller.
  const Clock* clock = RealClock();
};

// An active job as the dashboard's history samples it (server/history.h): no spec, so a
// sample of 100k pending jobs copies a few MB rather than their environments.
struct JobBrief {
  state::JobId id = 0;
  std::string partition;
  state::JobState state = state::JobState::kPending;
  bool held = false;
  Time submit_time = 0;
  Time start_time = 0;
  int gpus = 0;
};

struct ControllerStats {
  int64_t cycles = 0;
  double last_cycle_ms = 0;  // the scheduler's time in the last cycle
  double max_cycle_ms = 0;   // and in the slowest since the server started
  int64_t starts = 0;
  int64_t submits = 0;
  int64_t internal_errors = 0;  // Plan::errors (a scheduler bug), all cycles together
};

class Controller : private Ledger::Observer {
 public:
  // Loads the state from `store`; starts nothing (call Start).
  static Result<std::unique_ptr<Controller>> Create(ControllerOptions options,
                                                    std::unique_ptr<state::Store> store);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  void Start();  // the scheduling loop thread
  void Stop();   // idempotent; wakes every waiter
  bool stopping() const;

  // Long polls parked in the HTTP layer (server/http_loop.h) wait on topics: JobTopic(id)
  // is notified when the job changes, AgentTopic(node) when the node's agent has work or
  // must register again. `notify` is called with the Controller's or the hub's lock
  // held: it must only queue, never call back. nullptr: none.
  void SetNotifier(std::function<void(const std::string&)> notify);

  // ---- Jobs ----
  // Validates (unsatisfiable requests refused with the reason), stores, then returns
  // the new ids: on return they are on disk. A request whose idempotency_key this user
  // already submitted with (SubmitKeys' window) returns that submit's ids and makes
  // nothing; kUnavailable while that first submit is still being stored.
  Result<std::vector<state::JobId>> Submit(const SubmitRequest& request,
                                           const Caller& who);
  // sbatch --test-only (server/test_submit.cc): `request` validated as
  // Submit validates it (not the pending bounds, not the idempotency key), then where
  // and when it would start given the cluster and queue now (sched/test_start.h).
  // Nothing is stored. `known` false: the scheduler reserved nothing for it.
  struct TestSubmitAnswer {
    state::JobId job_id = 0;  // the id a submit now would get
    bool known = false;
    Time start = 0;
    std::vector<std::string> nodes;
    int cpus = 0;
    std::string partition;
  };
  Result<TestSubmitAnswer> TestSubmit(const SubmitRequest& request, const Caller& who)
      EXCLUDES(ledger_->mu());
  // Pending: ended as cancelled now. Running: its agents stop it (SIGTERM, grace,
  // SIGKILL) and it ends as cancelled when they report. kNotFound / kInvalidArgument
  // (already ended).
  // Only the job's owner or an admin (Authorizer: kUnauthenticated, kPermissionDenied).
  // As Slurm's scancel: `id` an array's id (its first task's, JobSpec::array_job_id)
  // means every task of it that has not ended, in one commit; `task` >= 0 means task
  // `task` of array `id` alone ("A_T"). Any other id is that one job.
  Status Cancel(state::JobId id, const Caller& who, int task = -1);
  // Holds or releases the same way: an array's id is its pending tasks.
  Status Hold(state::JobId id, bool hold, const Caller& who, int task = -1);
  // (job_control.cc) Sends `signal` to a running job's processes (every
  // process on every node; `batch_only`: its batch shell, on its first node) through
  // its agents; an array's id means its running tasks. kBusy (409) naming the state for
  // a job that does not run. Owner or admin.
  Status Signal(state::JobId id, int signal, bool batch_only, const Caller& who,
                int task = -1);
  // scontrol requeue: a running job is stopped as by Cancel (SIGTERM, grace, SIGKILL)
  // and goes back to pending with its id when its agents report; a finished one goes
  // back to pending now, its script and environment read back from the store. Either
  // way requeues + 1 (SLURM_RESTART_COUNT). kBusy for a pending job or one being
  // cancelled. An array's id means its tasks that run or ended. Owner or admin.
  Status Requeue(state::JobId id, const Caller& who, int task = -1);
  // scontrol update (job_control.cc): a pending job's request changes as
  // `update` says (merged, then validated as a submit's: the same partitions, limits
  // and dependencies), a pending or running job's name and comment. A running job's
  // request does not change (kBusy: its agents enforce it); an ended job is kBusy.
  // Owner or admin; as Slurm's, lengthening a time limit is an admin's
  // (Action::kRaiseTimeLimit), and so are a negative nice and an account or partition
  // the caller may not submit to. A dependency that would make a cycle is refused. An
  // array's id means its pending tasks (its running ones for a name or comment).
  Status Update(state::JobId id, const api::JobUpdate& update, const Caller& who,
                int task = -1);
  Result<state::JobRecord> Job(state::JobId id) const;
  // ---- Job usage (usage.cc; docs/efficiency.md) ----
  // What job `id`'s runs did with their GPUs, CPUs and memory: the stored runs and, for
  // a running job, its current run as the server has it now; ascending by start time.
  // Empty when its runs were never sampled. kNotFound: no such job.
  Result<std::vector<state::JobUsage>> Usage(state::JobId id)
      EXCLUDES(ledger_->writer_mu(), ledger_->mu());
  // Writes the running jobs' usage that changed since the last write (the loop calls it
  // every usage_flush_s).
  void FlushUsage() EXCLUDES(ledger_->mu());
  // GPU-hours allocated and used over [q.from, q.to) per group, and the idlest jobs
  // (`hachi report`, GET /report; report.cc): every record, running jobs with their
  // usage so far, nodes grouped by their GPU model.
  report::GpuReport GpuHours(const report::ReportQuery& q) const EXCLUDES(ledger_->mu());
  // Jobs in id order, those with ids above `after`, at most `limit` (0: all): a page,
  // so that a client listing 100,000 jobs does not make the server build one reply of
  // them all (GET /jobs?after=&limit=). A running job's `usage` is its run's so far.
  std::vector<state::JobRecord> Jobs(bool include_finished, state::JobId after = 0,
                                     size_t limit = 0) const;
  std::optional<PendingInfo> Pending(state::JobId id) const;
  // The pending and running jobs, briefly (the history sampler's view).
  std::vector<JobBrief> ActiveJobBriefs() const;

  // ---- Job steps (steps.cc; docs/steps.md) ----
  // srun inside running job `id`: lays the step's tasks out on the job's nodes (block
  // distribution; -N, -n, --ntasks-per-node, -w, and --gpus-per-task/-c checked against
  // what the job has on each), records it (durable on return) and queues each node's
  // part for its agent. Owner or admin (Action::kRunStep); kBusy for a job not running.
  Result<state::StepRecord> CreateStep(state::JobId id, const api::StepRequest& req,
                                       const Caller& who)
      EXCLUDES(ledger_->writer_mu(), ledger_->mu());
  // Step `step` of the job's current run. Owner or admin.
  Result<state::StepRecord> StepOf(state::JobId id, int step, const Caller& who) const
      EXCLUDES(ledger_->mu());
  // The same, and kBusy (naming its state) once it ended.
  Result<state::StepRecord> RunningStepOf(state::JobId id, int step,
                                          const Caller& who) const
      EXCLUDES(ledger_->mu());
  // Its output from offset `from` (StepStreams), and once it ended and the reader has
  // everything, `done` with the tasks' exits.
  Result<api::StepOutput> ReadStepOutput(state::JobId id, int step, int64_t from,
                                         const Caller& who) EXCLUDES(ledger_->mu());
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

  // ---- Nodes, partitions ----
  std::vector<state::NodeStatus> Nodes() const;
  // Admins only (Authorizer).
  Status Drain(const std::string& node, const std::string& reason, const Caller& who);
  // A drained node goes back up, and its unhealthy GPUs back into service; `gpu` >= 0:
  // only that unhealthy GPU returns (the node's state is left alone). Admins only.
  // With burn-in checks for the node (burn_in.cc) what returns is burned in
  // first: a GPU stays out until its run passes, a node that has not passed with what
  // it is now goes to burn-in, and a node in burn-in runs its checks again.
  Status Resume(const std::string& node, int gpu, const Caller& who);
  // GPU faults an agent saw (api::GpuHealthEvent). "fatal" or "reset" on a GPU: that GPU
  // (not the node) leaves service with the event as its reason, and the job running on
  // it is requeued with the event in its reason, its processes stopped on every node.
  // "node" (NVSwitch / fabric): the node is drained and its jobs requeued likewise.
  // "info" and "job" (the application's own fault) change nothing.
  Status ReportHealth(const std::string& node, const api::AgentHealth& health);
  std::vector<sched::Partition> Partitions() const;  // node indices as in Nodes()
  std::vector<std::string> Warnings() const;

  // ---- Who is asking, and the API tokens (server/token_service.h) ----
  TokenService& tokens() { return tokens_; }
  const TokenService& tokens() const { return tokens_; }
  // Who may do what, for the HTTP layer's decisions too (its gate, the redaction of a
  // job's details): built from the config at Create, constant after.
  const Authorizer& authorizer() const { return authorizer_; }

  // ---- Agents ----
  // `peer` is the address the registration came from as the connection layer saw it
  // ("" for a Unix-socket peer or an in-process caller): the node's address when the
  // agent gave none; a given one is checked against it (server/agent_address.h).
  Status Register(const AgentRegistration& reg, const std::string& peer = "");
  AgentWork Poll(const std::string& node, int wait_ms);
  Status ReportExits(const std::string& node, const std::vector<api::JobExit>& exits);
  // The burn-in gate: an agent's results (POST /agents/NODE/burn-in).
  BurnInService& burn_in() { return burn_in_; }
  // The lease agents are told at registration (ControllerOptions::lease, resolved).
  Duration lease() const { return options_.lease; }

  ControllerStats stats() const;
  // The clock it reads (ControllerOptions::clock): the HTTP layer and the history
  // sampler read the same one.
  const Clock& clock() const { return *options_.clock; }

  // ---- What it tells about itself (observe.cc) ----
  // GET /metrics: the registry's families, then the gauges of Gauges() (docs/metrics.md).
  std::string MetricsText() const;
  // The cluster now, for the scrape: copied under the lock, computed without it.
  ClusterGauges Gauges() const;
  // Each partition's nodes and pending jobs (with the last cycle's reasons), for the
  // likely cause of a slow partition (report/stats_cause.h).
  std::vector<report::PartitionLoad> PartitionLoads() const;
  // Why a job waits, with numbers, or its history (report/explain.h). kNotFound.
  Result<report::JobExplain> Explain(state::JobId id) const;
  // Runs one scheduling cycle now, on the caller's thread (tests).
  void RunCycle();

 private:
  Controller(ControllerOptions options, std::unique_ptr<Ledger> ledger);

  // Ledger::Observer: the write path's hooks. A run's steps end with it (Extend), and
  // what follows the records here follows each apply (Applied).
  void Extend(std::vector<state::Edit>* edits) override;
  void Applied(const std::vector<state::Edit>& edits) override;
  // The jobs a cancel/hold/release of `id` (and `task`, Cancel's) means, in id order;
  // `whole_array` says whether `id` named an array. kNotFound.
  Result<std::vector<state::JobId>> TargetsLocked(state::JobId id, int task,
                                                  bool* whole_array) const
      REQUIRES(ledger_->mu());
  // Stops a running job's parts: a launch its agent has not taken yet is taken back
  // (that part ended, counted in `info`), the others are cancelled through their agents.
  void StopPartsLocked(const state::JobRecord& job, RunInfo* info)
      REQUIRES(ledger_->mu());
  // One job's part of Cancel: its JobEnded appended to `edits`, or its agents told.
  void CancelOneLocked(state::JobId id, const std::string& reason,
                       std::vector<state::Edit>* edits)
      REQUIRES(ledger_->writer_mu(), ledger_->mu());
  Status RebuildBaseLocked() REQUIRES(ledger_->mu());
  // Submit's checks, shared with TestSubmit (sbatch --test-only) so that the two never
  // disagree. Before the lock: who may submit there, the spec, a negative --nice, the
  // array's size.
  Status CheckSubmit(const SubmitRequest& request, const Caller& who) const;
  // The request as the server completes it: the caller's name and default account, a
  // --time=UNLIMITED as the partition's maximum.
  Result<sched::JobRequest> CompleteRequestLocked(const SubmitRequest& request,
                                                  const Caller& who) const
      REQUIRES(ledger_->mu());
  // --time=UNLIMITED: the maximum of `partition` ("" the first), 0 when it has none.
  Duration MaxTimeLocked(const std::string& partition) const REQUIRES(ledger_->mu());
  // Validated against the cluster (with the default memory), its dependencies checked
  // for jobs numbered from `first_id` on.
  Result<sched::Job> ValidateJobLocked(const sched::JobRequest& req,
                                       state::JobId first_id) const
      REQUIRES(ledger_->mu());
  void Loop() EXCLUDES(ledger_->mu(), ledger_->writer_mu());
  // One cycle: snapshot (the ledger's locks), schedule (neither), apply (both again).
  void Cycle() REQUIRES(cycle_mu_) EXCLUDES(ledger_->mu(), ledger_->writer_mu());
  // Pending jobs whose --deadline can no longer be met (now + time limit
  // past it) end as DEADLINE, never started.
  void EndPastDeadlineLocked(Time now) REQUIRES(ledger_->writer_mu(), ledger_->mu());
  void ApplyPlanLocked(const sched::Plan& plan,
                       std::shared_ptr<const sched::ClusterState> snap, Time now)
      REQUIRES(ledger_->writer_mu(), ledger_->mu());
  // A job as it is shown: a running job's usage so far, the reason a pending job waits
  // or a note on a running one (its node's fence, the idle policy).
  void ShownLocked(state::JobRecord* r) const REQUIRES(ledger_->mu());
  // The plan's preemptions: each victim is told to stop, and requeued or cancelled when
  // it reports its exit.
  void ApplyPreemptionsLocked(const sched::Plan& plan, Time now)
      REQUIRES(ledger_->writer_mu(), ledger_->mu());
  // A pending job's reason word from the last cycle ("" if none).
  std::string ReasonLocked(state::JobId id) const REQUIRES(ledger_->mu());
  // Queues the launch of `job`'s parts for their agents; only `node`'s when not empty.
  // Called after the job's start is durable (commit, then dispatch).
  void DispatchLocked(const state::JobRecord& job, const std::string& node = "")
      REQUIRES(ledger_->mu());
  void CheckAgentsLocked(Time now) REQUIRES(ledger_->writer_mu(), ledger_->mu());
  // The node goes down (no new jobs) and its agent must register again; its running
  // jobs stay RUNNING, with their GPUs, until FenceLocked counts them dead.
  void NodeLostLocked(const std::string& node, const std::string& why, Time now)
      REQUIRES(ledger_->writer_mu(), ledger_->mu());
  // The runs on down nodes whose fence (last contact + lease + kill grace + margin) has
  // passed: that part counts as lost, the gang's other parts are stopped, and the job is
  // requeued (--requeue) or ends NODE_FAIL once no part runs.
  void FenceLocked(Time now) REQUIRES(ledger_->writer_mu(), ledger_->mu());
  // Milliseconds until the fence of `node` passes (0: passed); -1 when it is not down.
  int64_t FenceLeftMsLocked(const std::string& node) const REQUIRES(ledger_->mu());
  // A running job's note while a part of it waits for its node's fence ("waiting for
  // node n2's lease to expire before requeue, 47 s"); "" when none does.
  std::string FenceNoteLocked(const state::JobRecord& job) const REQUIRES(ledger_->mu());
  // The edit that ends a run no part of which runs any more: requeued (preempted with
  // requeue; lost with its node, --requeue) or ended (EndOf).
  state::Edit RunEndLocked(const state::JobRecord& job, const RunInfo& info,
                           Time end_time) const REQUIRES(ledger_->mu());
  // Nodes whose agent still runs a run the records no longer have there (it came back
  // after the fence): they take no new jobs until those runs' exits are in. Applied to
  // every snapshot the scheduler and the applier see.
  void HoldStaleNodesLocked(sched::ClusterState* s) const REQUIRES(ledger_->mu());
  // "stopping job 12's earlier run" for such a node; "" for another.
  std::string StaleNoteLocked(const std::string& node) const REQUIRES(ledger_->mu());
  // Job steps (steps.cc). The running steps of a run that `edits` end or requeue end
  // with it (prepended, as StepEnded).
  void EndStepsOfJobsLocked(std::vector<state::Edit>* edits) const
      REQUIRES(ledger_->mu());
  // After an apply: the streams of the steps `edits` ended, and their readers.
  void StepsEndedLocked(const std::vector<state::Edit>& edits) REQUIRES(ledger_->mu());
  // The running steps on `reg.node` its agent does not run (it restarted), ended FAILED.
  std::vector<state::Edit> LostStepsLocked(const AgentRegistration& reg) const
      REQUIRES(ledger_->mu());
  // Burn-in runs whose agent has not reported past their timeout fail.
  void CheckBurnInLocked(Time now) REQUIRES(ledger_->writer_mu(), ledger_->mu());
  // Runs whose GPUs have stayed idle past their partition's policy: warned once per
  // idle spell, and requeued or cancelled when the policy says so (usage.cc).
  void CheckIdleLocked(Time now) REQUIRES(ledger_->writer_mu(), ledger_->mu());
  // pending_use_ for job `id` as it is now in the records (absent: gone).
  void TrackPendingLocked(state::JobId id) REQUIRES(ledger_->mu());
  state::NodeStatus NodeStatusLocked(const state::NodeRecord& rec,
                                     const sched::ClusterState& snap) const
      REQUIRES(ledger_->mu());
  // The processes the node's agent reported on GPUs no running job of theirs was given.
  std::vector<state::StrayGpuProcess> StrayProcessesLocked(const std::string& node) const
      REQUIRES(ledger_->mu());

  // Lock order: cycle_mu_, the ledger's writer_mu() and mu(), then the AgentHub's own.
  // Reads take mu() only; agents' polls take only the hub's.

  // Constant after construction.
  const ControllerOptions options_;
  // The records, the store and their locks; every durable write passes through it.
  const std::unique_ptr<Ledger> ledger_;
  // Set by Create before any thread runs; its series are thread-safe (metrics.h).
  std::unique_ptr<ControllerMetrics> metrics_;
  // Set by Create before any thread runs, from options_.config; constant after.
  Authorizer authorizer_;
  // The agents' work queues and long polls; thread-safe (agent_hub.h).
  AgentHub agents_;
  // Job steps' output on its way to srun; thread-safe (step_streams.h).
  StepStreams streams_;
  // The burn-in gate; its state is guarded by the ledger's mu() (burn_in_service.h).
  BurnInService burn_in_;
  // Who is asking; thread-safe (token_service.h).
  TokenService tokens_;
  // What running jobs do with their GPUs; its state is guarded by the ledger's mu()
  // (usage_service.h).
  UsageService usage_;

  // One cycle at a time (the loop and RunCycle).
  Mutex cycle_mu_ ACQUIRED_BEFORE(ledger_->writer_mu());
  std::unique_ptr<sched::Scheduler> scheduler_ GUARDED_BY(cycle_mu_);
  std::vector<std::string> last_plan_errors_ GUARDED_BY(cycle_mu_);

  // Beside the records, guarded by the ledger's mu(); the ledger's writer_mu() is held
  // from an edit's check to its apply (never while scheduling, so a cycle's sched/ run
  // blocks no one).
  // What each user has pending, for the bound at submit (ControllerOptions::
  // max_pending_*): jobs, and the payloads they hold, each counted once.
  struct PendingUse {
    int64_t jobs = 0;
    int64_t bytes = 0;
    std::map<const state::JobPayload*, int64_t> payloads;  // -> pending jobs holding it
    int64_t reserved_jobs = 0;  // submits checked, not yet committed
    int64_t reserved_bytes = 0;
  };
  std::unordered_map<std::string, PendingUse> pending_use_ GUARDED_BY(ledger_->mu());
  std::set<state::JobId> pending_counted_ GUARDED_BY(ledger_->mu());  // in pending_use_
  // Jobs the applier did not start for want of a free MASTER_PORT on their rank-0 node
  // (cycle.cc), so that the log says it once per job.
  std::set<state::JobId> port_starved_ GUARDED_BY(ledger_->mu());
  SubmitKeys submit_keys_ GUARDED_BY(ledger_->mu());  // recent submits' idempotency keys
  std::unordered_map<std::string, NodeHardware> hardware_ GUARDED_BY(ledger_->mu());
  BaseCluster base_ GUARDED_BY(ledger_->mu());
  bool base_dirty_ GUARDED_BY(ledger_->mu()) = true;
  // +1 per rebuild: a plan made on an older base is dropped.
  uint64_t base_generation_ GUARDED_BY(ledger_->mu()) = 0;
  std::unordered_map<state::JobId, RunInfo> runs_ GUARDED_BY(ledger_->mu());
  // Per node, the jobs whose earlier run its agent still runs though the records ended
  // or requeued it (HoldStaleNodesLocked): kept until the agent reports their exit or
  // registers without them.
  std::unordered_map<std::string, std::set<state::JobId>> stale_runs_
      GUARDED_BY(ledger_->mu());
  // Per node, when the agent instance registered now started (AgentRegistration::
  // agent_started): a registration from an older instance is refused. Not stored: a
  // restarted server takes the first registration.
  std::unordered_map<std::string, Time> agent_started_ GUARDED_BY(ledger_->mu());
  // The compute processes on each node's GPUs, as its agent last reported them, and
  // when each (GPU, pid) was first reported.
  struct NodeProcesses {
    std::deque<std::string> mps_events;  // NodeStatus::gpu_sharing_events
    std::vector<api::GpuProcessReport> processes;
    std::map<std::pair<int, uint32_t>, Time> since;
  };
  std::unordered_map<std::string, NodeProcesses> gpu_processes_ GUARDED_BY(ledger_->mu());
  // When a pending job last became eligible again (released from hold, requeued) since
  // this server started: its queue wait counts from then. Dropped when the job ends.
  struct Eligible {
    Time at = 0;
    bool requeued = false;  // else released
  };
  std::unordered_map<state::JobId, Eligible> eligible_since_ GUARDED_BY(ledger_->mu());
  // The last cycle's diagnoses, formatted only when asked for (a cycle with 100k
  // pending jobs must not build 100k strings); `diagnosed_` is the snapshot they refer
  // to (node and partition names), kept alive until the next cycle.
  std::unordered_map<state::JobId, sched::Diagnosis> diagnoses_ GUARDED_BY(ledger_->mu());
  std::shared_ptr<const sched::ClusterState> diagnosed_ GUARDED_BY(ledger_->mu());
  Time diagnosed_at_ GUARDED_BY(ledger_->mu()) = 0;
  // RecentWorkload, refreshed by the cycle.
  std::vector<sched::WorkloadClass> workload_ GUARDED_BY(ledger_->mu());
  Time workload_at_ GUARDED_BY(ledger_->mu()) = 0;
  bool dirty_ GUARDED_BY(ledger_->mu()) = true;
  bool stopping_ GUARDED_BY(ledger_->mu()) = false;
  ControllerStats stats_ GUARDED_BY(ledger_->mu());
  CondVar loop_cv_{&ledger_->mu()};  // dirty_ or stopping_
  std::function<void(const std::string&)> notify_
      GUARDED_BY(ledger_->mu());  // SetNotifier
  std::thread loop_;              // started under mu() (Start), joined by Stop without it
};

}  // namespace hachi::server
