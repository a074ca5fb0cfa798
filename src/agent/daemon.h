// AgentDaemon: `hachi agent` (DESIGN.md §1, §3). Registers its node with the server
// (topology, CPUs, memory, the jobs it runs), then long-polls the server for work — the
// poll is also its heartbeat — launching and cancelling jobs through a Launcher, and
// reports every exit until the server has acknowledged it.
//
// A run — a job id with its start time — is launched at most once per agent process: a
// repeated launch (the server re-sends after a restart) is answered by reporting the
// job's exit again, or ignored while it still runs. A launch of the same job with
// another start time is a new run (the job was requeued) and is launched. The runs an
// earlier agent process left and the launcher adopted (Launcher::AdoptedRuns) count as
// this process's own: they are registered as running and their exits reported.
//
// Fencing (docs/fencing.md): the agent holds a lease on its jobs, renewed by every call
// the server answered (registration, work poll, exit report), counted from when the call
// was sent, on the Clock's monotonic time. When no call has succeeded for the lease (the
// server's register reply says how long; 30 s from an older server), the agent stops
// every job it runs (Launcher::Cancel: SIGTERM, the job's kill grace, SIGKILL) and
// reports them, once the server answers again, as lost (api::ExitKind::kLost), so that
// the server requeues or fails them as after a node failure. The server gives their
// GPUs to no one until their lease and kill grace have passed.
//
// A server outage is not a cut: when a call fails, the agent probes the server's address
// (agent/server_probe.h), and a refused connection -- nothing listens there, so no
// server counts this node silent, and a restarted one counts from its own start -- holds
// the lease as an answered call would, from when the probe was sent. So a server that
// is down, restarting or being upgraded stops no job, for as long as it is down, while
// a node cut off from a running server still stops its jobs within the lease.
//
// Time: every decision (the lease, the GPU-process report's refresh, the times in
// records) reads the Clock of AgentOptions; the loops wait on real time between looks.
//
// Thread-safety: Start/Stop from one thread; the other public methods from any thread.
// Internally a poll thread, a report thread, a lease thread (which never calls the
// server, so a hung call cannot delay it) and a usage thread; the launcher's callback
// only queues. One mutex, mu_, guards the queues and the run bookkeeping; it is never
// held across a call to the server, the launcher or the MPS daemons. The loops live in
// daemon.cc (registration, the work poll, launches), daemon_report.cc (the report
// thread), daemon_lease.cc (the lease, backoff) and daemon_usage.cc (usage samples).
#pragma once

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agent/burn_in.h"
#include "agent/launcher.h"
#include "agent/mps.h"
#include "agent/steps.h"
#include "api/epoch_floor.h"
#include "api/protocol.h"
#include "core/clock.h"
#include "core/mutex.h"
#include "core/status.h"
#include "state/usage.h"

namespace hachi::agent {

struct AgentOptions {
  // "http://127.0.0.1:8686" or "unix:/path"; several controllers: a comma-separated
  // list (api/http_client.h).
  std::string server;
  std::string
      cluster_secret;  // sent on every request; the server refuses agents without it
  // The highest leader epoch seen (docs/ha.md): replies of a deposed leader are refused.
  // `hachi agent` keeps it in <spool>/epoch; null: none.
  std::shared_ptr<api::EpochFloor> epoch_floor;
  std::string node;           // this node's name
  std::string address;        // MASTER_ADDR others use to reach it ("127.0.0.1")
  std::string topology_json;  // topo::TopologyToJson
  int cpus = 0;
  int64_t memory_mib = 0;
  int poll_wait_ms = 10000;  // long poll; the server's agent timeout must be longer
  // The lease until the server says otherwise (its register reply's lease_s).
  Duration lease = 30;
  std::string cgroup;  // its job isolation for the node record: "v1", "v2", "none"
  // Burn-in: the GPU driver NVML reports ("" without NVML), whether the GPUs
  // are simulated (--preset, --topology-file; `hachi agent` and `hachi dev` set false on
  // real GPUs, so that an embedding that does not say runs no checks), and the binary
  // whose `doctor` and `commtest` the checks run ("": /proc/self/exe).
  std::string gpu_driver;
  bool simulated = true;
  std::string self_exe;
  // GPU shares (docs/isolation.md "GPU shares"): the MPS control daemons that
  // serve them (agent/mps.h), acquired before a share launches and released at its
  // exit; null when MPS cannot serve them here, and `gpu_sharing` says so for the node
  // record: "mps", or "soft-limit: <why not MPS>". A share with promised GPU memory that
  // no MPS serves is watched instead: when its processes on its GPU use more than it
  // was promised (NVML's per-process figures, ReportProcesses), it is stopped and ends
  // as kOutOfMemory, its neighbours untouched.
  std::shared_ptr<MpsDaemons> mps;
  std::string gpu_sharing;
  // (state/usage.h, docs/efficiency.md): every `usage_interval_ms` the agent
  // samples each running job (its GPUs through `sample_gpus`, its CPU time and memory
  // from its cgroup) and sends the samples with its next health report. 0: no samples.
  // `sample_gpus` gives every GPU's figures (agent::GpuSampler::Sample); null: none, the
  // samples carry the cgroup's figures only.
  int usage_interval_ms = 0;
  std::function<std::vector<state::GpuSample>()> sample_gpus;
  std::shared_ptr<LeaseFile> lease_file;  // null: none
  // What it reads the time from (its start, exit and GPU-process report times); tests
  // give a FakeClock. Not owned; outlives the daemon.
  const Clock* clock = RealClock();
};

using LauncherFactory = std::function<std::unique_ptr<Launcher>(LauncherEvents)>;

class HttpClientHolder;  // agent_http.h

class AgentDaemon {
 public:
  AgentDaemon(AgentOptions options, LauncherFactory make_launcher);
  ~AgentDaemon();
  AgentDaemon(const AgentDaemon&) = delete;
  AgentDaemon& operator=(const AgentDaemon&) = delete;

  Status Start() EXCLUDES(mu_);
  // Cancels every running job and waits up to `wait_ms` for their exits to be reported
  // to the server (hachi dev shutting down). True when all were.
  bool CancelAll(int wait_ms) EXCLUDES(mu_);
  // Stops polling and reporting. Running jobs are cancelled when `cancel_jobs`
  // (hachi dev shutting down); otherwise they keep running (their own sessions).
  void Stop(bool cancel_jobs = true) EXCLUDES(mu_);
  bool registered() const EXCLUDES(mu_);
  // Queues a GPU fault for the server (POST /agents/NODE/health), re-sent until the
  // server has it. Thread-safe: the GPU health monitor's thread calls it
  // (agent/gpu_health.h).
  void ReportHealth(const api::GpuHealthEvent& e) EXCLUDES(mu_);
  // The compute processes on the node's GPUs now (agent/gpu_processes.h). Sent with the
  // next health report when the set (GPU, pid, job) changed, and at least every minute
  // while it is not empty (memory figures). Shares over their soft limit (AgentOptions::
  // mps) are stopped. Thread-safe.
  void ReportProcesses(std::vector<api::GpuProcessReport> processes) EXCLUDES(mu_);
  // Has the lease checker read the clock, and stopped the runs if the lease has passed,
  // before it returns: for tests that move a FakeClock (AgentOptions::clock). By
  // itself it checks when the lease can next lapse, in real time.
  void TickLease() EXCLUDES(mu_);
  // When the server's address last refused a connection (the Clock's monotonic ms, as
  // sent), -1 never: what holds the lease through a server outage.
  int64_t last_refusal_ms() const EXCLUDES(mu_);

 private:
  // Acknowledged exits kept for a launch sent again.
  static constexpr size_t kFinishedKept = 20000;
  // SIGTERM -> SIGKILL for a stopping job's steps' tasks (the job's own grace is the
  // launcher's; the steps go no later than this).
  static constexpr Duration kStepGrace = 10;
  static constexpr size_t kHealthQueued = 256;

  void PollLoop() EXCLUDES(mu_);
  void ReportLoop() EXCLUDES(mu_);
  // A round's reports beside the exits, GPU faults first (the server takes the GPU out
  // before it hears of the exits the fault caused): the health report (faults,
  // processes, usage samples), then the burn-in results. A report the server refuses
  // (400) is dropped; false when it could not take one (the caller backs off).
  bool SendHealth(HttpClientHolder& http, const std::string& base,
                  const std::vector<api::GpuHealthEvent>& health, bool send_processes,
                  const std::vector<api::GpuProcessReport>& processes,
                  const std::vector<state::JobUsageSample>& usage) EXCLUDES(mu_);
  bool SendBurnIn(HttpClientHolder& http, const std::string& base,
                  const std::vector<api::BurnInReport>& burn_in) EXCLUDES(mu_);
  void OnExit(const api::JobExit& e) EXCLUDES(mu_);
  // A stop from the server (api::RunStop): the run is cancelled if it runs here, ended
  // as cancelled if it never started here (and never started later), and its exit
  // reported again if it ended.
  void StopRun(const api::RunStop& stop) EXCLUDES(mu_);
  void StopUnstartedLocked(const api::RunStop& stop) REQUIRES(mu_);
  // A refusal is reported as an exit.
  void LaunchNow(const api::LaunchSpec& l) EXCLUDES(mu_);
  // Records a run about to be launched; false when this process launched it already.
  bool AcceptRunLocked(const api::LaunchSpec& l) REQUIRES(mu_);
  // The runs an earlier agent process left (the launcher's): this process's now; the
  // live ones' jobs into `adopted`.
  void AdoptRunsLocked(std::vector<state::JobId>* adopted) REQUIRES(mu_);
  Status RegisterOnce(HttpClientHolder& http) EXCLUDES(mu_);
  // Stops every run when the lease has expired; a thread of its own.
  void LeaseLoop() EXCLUDES(mu_);
  // Samples the running jobs every usage_interval_ms; a thread of its own.
  void UsageLoop() EXCLUDES(mu_);
  // One round of it: queues a sample of every running job for the report thread.
  void SampleUsage() EXCLUDES(mu_);
  // Whether the report thread has something to send (once registered).
  bool ReportDueLocked() const REQUIRES(mu_) {
    return !unreported_.empty() || !health_.empty() || processes_due_ ||
           !usage_.empty() || !burn_in_reports_.empty();
  }
  // A call sent at `sent_ms` (the Clock's monotonic time) was answered.
  void RenewLeaseLocked(int64_t sent_ms) REQUIRES(mu_);
  // Writes the lease's end to the node's lease file, for the job waiters.
  void PublishLeaseLocked() REQUIRES(mu_);
  // A call failed with `s`: when the server could not be reached, probes its address,
  // and a refusal holds the lease (from when the probe was sent).
  void NoteCallFailed(const Status& s) EXCLUDES(mu_);
  // When the lease runs out: the later of the last renewal and the last refusal, plus
  // the lease.
  int64_t LeaseEndLocked() const REQUIRES(mu_) {
    return std::max(renewed_ms_, refused_ms_) + lease_ms_;
  }
  // Waits (real time) up to `timeout` or until Stop; true when stopping.
  bool WaitStoppingLocked(std::chrono::milliseconds timeout) REQUIRES(mu_);
  // Waits up to a random part of `*backoff_ms` (full jitter, so that a fleet whose
  // server restarted does not come back at once), then doubles it up to 2 s.
  void BackoffLocked(int* backoff_ms) REQUIRES(mu_);

  // Constant after construction.
  const AgentOptions options_;
  const Time started_;
  std::string instance_;  // random per process: the server tells restarts apart
  const std::unique_ptr<HttpClientHolder> poll_http_;
  const std::unique_ptr<HttpClientHolder> steps_http_;  // the steps' reports

  // Made by the constructor, reset by Stop once the threads are joined; thread-safe
  // themselves.
  std::unique_ptr<Launcher> launcher_;
  // Job steps: their tasks.
  std::unique_ptr<StepRunner> steps_;
  // Burn-in: the server's runs, on a thread of their own; their results wait
  // in burn_in_reports_ for the report thread.
  std::unique_ptr<BurnInRunner> burn_in_;

  mutable Mutex mu_;
  CondVar cv_{&mu_};  // any change below; the loops and CancelAll wait on it
  bool stopping_ GUARDED_BY(mu_) = false;
  bool registered_ GUARDED_BY(mu_) = false;
  // job -> start of its last run
  std::unordered_map<state::JobId, Time> current_run_ GUARDED_BY(mu_);
  // runs launched and not yet exited
  std::unordered_map<state::JobId, Time> live_ GUARDED_BY(mu_);
  // Runs accepted whose launcher_->Launch has not returned (it runs without mu_, on the
  // poll or the report thread): a stop that comes meanwhile is kept here, with its
  // reason, and done once the launch returns -- the launcher would drop it before.
  std::map<std::pair<state::JobId, Time>, std::string> starting_ GUARDED_BY(mu_);
  // A requeued job's new run that came while its earlier run was still stopping here,
  // and such runs whose earlier run has now exited (launched by the report thread).
  std::unordered_map<state::JobId, api::LaunchSpec> deferred_ GUARDED_BY(mu_);
  std::vector<api::LaunchSpec> ready_ GUARDED_BY(mu_);
  // Runs (job, start time), ever, by this process.
  std::set<std::pair<state::JobId, Time>> launched_ GUARDED_BY(mu_);
  // Acknowledged exits, the latest run's; in finished_order_ for bounded memory.
  std::unordered_map<state::JobId, api::JobExit> finished_ GUARDED_BY(mu_);
  std::deque<state::JobId> finished_order_ GUARDED_BY(mu_);
  std::vector<api::JobExit> unreported_ GUARDED_BY(mu_);
  std::vector<api::BurnInReport> burn_in_reports_ GUARDED_BY(mu_);  // not yet acked
  // Not yet acknowledged, oldest first.
  std::vector<api::GpuHealthEvent> health_ GUARDED_BY(mu_);
  std::vector<api::GpuProcessReport> processes_ GUARDED_BY(mu_);  // the latest list
  // Shares no MPS daemon serves, whose GPU memory the agent watches: job -> its GPU and
  // what it was promised.
  struct SoftLimit {
    int gpu = -1;
    int64_t promised_mib = 0;
    bool stopped = false;  // over it, and told to stop
  };
  std::unordered_map<state::JobId, SoftLimit> soft_limits_ GUARDED_BY(mu_);
  bool processes_due_ GUARDED_BY(mu_) = false;  // not yet acknowledged by the server
  // The latest sample of each running job not yet acknowledged.
  std::map<state::JobId, state::JobUsageSample> usage_ GUARDED_BY(mu_);
  // The server refused them (it is older than the usage samples).
  bool usage_refused_ GUARDED_BY(mu_) = false;
  Time processes_sent_at_ GUARDED_BY(mu_) = 0;
  // The lease: how long, and when the last answered call was sent (monotonic ms).
  int64_t lease_ms_ GUARDED_BY(mu_) = 30000;
  int64_t renewed_ms_ GUARDED_BY(mu_) = 0;
  bool lease_expired_ GUARDED_BY(mu_) = false;    // stopped the runs; logged once
  int64_t refused_ms_ GUARDED_BY(mu_) = -1;       // the last refused probe, as sent
  bool held_by_refusal_ GUARDED_BY(mu_) = false;  // past the renewal's lease; logged once
  // TickLease(): asked, and done by the lease checker.
  uint64_t lease_ticks_asked_ GUARDED_BY(mu_) = 0;
  uint64_t lease_ticks_done_ GUARDED_BY(mu_) = 0;
  // Runs the lease stopped: their exits are reported as lost.
  std::set<std::pair<state::JobId, Time>> lease_stopped_ GUARDED_BY(mu_);
  uint64_t jitter_state_ GUARDED_BY(mu_) = 0;  // for BackoffLocked

  // Started by Start, joined by Stop (one thread calls both).
  std::thread poll_;
  std::thread report_;
  std::thread lease_;
  std::thread usage_thread_;
};

}  // namespace hachi::agent
