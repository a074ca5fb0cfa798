// Launching and supervising the processes of jobs on this node (DESIGN.md §2 agent/).
//
// Launcher is the interface the agent daemon drives; ProcessLauncher runs real
// processes, FakeLauncher (fake_launcher.h) records launches for daemon tests.
//
// Contract of every Launcher: Launch returns OK and then the exit callback given at
// construction is called exactly once for that job (its process exited, or it never
// started: api::ExitKind::kLaunchFailed with the reason), or Launch returns an error and
// the callback is never called for that launch. All methods are thread-safe. The callback
// runs on the launcher's own thread (ProcessLauncher: its supervisor thread), never
// with the launcher's locks held, so it may call back into the launcher; it must return
// quickly, since time limits are enforced on the same thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/container.h"
#include "agent/isolation.h"
#include "agent/lease_file.h"
#include "agent/spawn.h"
#include "api/launch_spec.h"
#include "core/clock.h"
#include "core/status.h"

namespace hachi::agent {

using JobId = state::JobId;
using ExitCallback = std::function<void(const api::JobExit&)>;
// A --signal without B: falling due: for the job's steps' tasks, which the StepRunner
// runs, not the launcher. Called on the launcher's supervisor thread, no lock held.
using StepSignalCallback = std::function<void(JobId job, int sig)>;
// What a launcher tells its owner.
struct LauncherEvents {
  ExitCallback on_exit;
  StepSignalCallback signal_steps;  // null: such signals go nowhere
};

// What a job step needs of a job's run on this node: the run's launch, and
// the cgroup its tasks join.
struct StepContext {
  api::LaunchSpec spec;
  std::vector<std::string> cgroup_procs;  // its cgroup.procs files; empty: no cgroup
  std::vector<SpawnRequest::Setup::Limit> rlimits;  // the job's (memlock, open files)
};

class Launcher {
 public:
  virtual ~Launcher() = default;

  // Starts the job's process. Errors: the job is already running here, or the launcher
  // is shutting down. Everything wrong with the job itself (command, workdir, output
  // files, user) is reported through the callback as kLaunchFailed.
  virtual Status Launch(const api::LaunchSpec& spec) = 0;
  // Stops the job: SIGTERM to its process group now, SIGKILL after its kill grace;
  // reported as kCancelled. A no-op for unknown jobs and jobs already stopping.
  virtual void Cancel(JobId job, std::string reason) = 0;
  // Stops the job as Cancel does, but its exit is reported as `kind` with `message`: the
  // agent's GPU memory guard ends a share that used more than it was promised as
  // kOutOfMemory. A no-op for unknown jobs and jobs already stopping.
  virtual void Stop(JobId job, api::ExitKind kind, std::string message) = 0;
  // Sends `sig` to every process of the job (its process group and, with cgroups, its
  // cgroup: scancel --full), or with `batch_only` to its batch shell alone (scancel -b,
  // sbatch --signal=B:); the job keeps its fate. A no-op for unknown jobs. (Its steps'
  // tasks alone, Slurm's default, are the StepRunner's.)
  virtual void Signal(JobId job, int sig, bool batch_only) = 0;
  // scontrol update TimeLimit=: the run of `job` that started at
  // `start_time` (api::LaunchSpec::start_time) ends `time_limit` seconds after it, 0 for
  // no limit; a --signal not sent yet moves with it. A limit already past stops the job
  // now, as its time limit. A no-op for unknown jobs, other runs, and jobs stopping.
  // `time_left` >= 0: what the server said is left of it (api::LaunchSpec::time_left),
  // counted from now on the monotonic clock instead.
  virtual void SetTimeLimit(JobId job, Time start_time, Duration time_limit,
                            Duration time_left = -1) = 0;
  // The jobs launched and not yet reported, ascending.
  virtual std::vector<JobId> Running() const = 0;
  // The run of `job` that started at `start_time`, when it runs here and is not being
  // stopped, and this launcher started it (an adopted run's launch is not known).
  virtual std::optional<StepContext> StepContextOf(JobId job, Time start_time) const = 0;
  // The runs (job, start time) an earlier agent process left that this launcher took
  // over at construction: still running, or ended meanwhile with their exit reported.
  virtual std::vector<std::pair<JobId, Time>> AdoptedRuns() const { return {}; }
};

// Runs that an earlier agent process left behind in `spool_dir` (its "run-<job>" records;
// the jobs run in their own sessions, so they outlive the agent): each that is still the
// same process is stopped, its whole process group killed, so that its GPUs are free
// before this agent registers (the server then requeues or fails the job). The records
// are removed. Returns "job 12 (pid 345)" for each run stopped. (ProcessLauncher adopts
// the runs that have a job waiter instead, unless told not to.)
std::vector<std::string> StopLeftoverRuns(const std::string& spool_dir);

// Runs each job as a real process: fork, then in the child setsid (own session and
// process group), signals back to defaults, the user's groups/gid/uid when the agent is
// root, chdir to the workdir, stdin from /dev/null, stdout/stderr appended to the output
// files (opened as the user, 0644; a missing directory is a launch failure), exec. A
// failing step reaches the parent through a close-on-exec pipe, so a job that could not
// start is reported as kLaunchFailed ("exec nosuchcmd: No such file or directory"),
// never as running. Batch scripts are written to <spool_dir>/job-<id>.sh (0700, owned
// by the user) and removed when the job ends.
//
// One supervisor thread watches every child through a pidfd (Linux >= 5.3) in one
// poll(), with an eventfd to wake it on changes, and enforces time limits (SIGTERM to
// the group at start_time + time_limit, SIGKILL after the kill grace). When a job's
// main process exits, what is left of its process group is SIGKILLed: the job is over
// and its GPUs go to the next job.
//
// With a job waiter (Options::waiter, waiter.h), the process launched is the waiter,
// which execs the job, waits for it and writes its status to "exit-<job>" in the spool;
// the run's record ("run-<job>") says what a later agent process needs. Such runs
// outlive the agent: the next ProcessLauncher on the same spool adopts them (watches the
// waiter through a pidfd, enforces the time limit, cancels and signals them) and reports
// their exits; one that ended meanwhile is reported from its exit file at once (or as
// kLost when its waiter left none). Without a waiter, leftover runs are stopped. With a
// lease file (Options::lease_file) each waiter also stops its job once the agent's lease
// has passed, so a run outlives a dead agent only as long as its lease; such a run is
// reported as kLost ("lease expired: its agent on n2 was gone for 41 s; ...").
//
// With a cgroup driver (Options::isolation), each job runs in its own cgroup (joined
// before exec) and everything in it is killed when the main process ends, including
// processes that left the session; a job the OOM killer hit ends as kOutOfMemory.
// Leftover job cgroups of an earlier agent are killed, except those of adopted runs.
//
// Limits: without cgroups, process groups do not catch processes that call setsid() or
// setpgid() to leave. The process must not ignore SIGCHLD (that auto-reaps
// children under the pidfds). Destruction waits for the jobs already being stopped
// (Cancel, time limit; at most their kill grace) and reports them; the other jobs keep
// running and are not reported (the next launcher adopts them).
class ProcessLauncher final : public Launcher {
 public:
  struct Options {
    std::string spool_dir = "/var/spool/hachi";  // created (0755) when missing
    ContainerRuntime container;                  // kind "" = container jobs fail
    Duration default_kill_grace = 30;            // when a spec's kill_grace <= 0
    // The job waiter's binary ("/proc/self/exe" for `hachi`), "" = none: jobs are exec'd
    // directly and do not survive a restart of the agent.
    std::string waiter;
    // Adopt the waiter runs an earlier agent left (else they are stopped).
    bool adopt = true;
    // The node's lease file (lease_file.h), handed to every job waiter, which stops its
    // job when the lease there has passed (the agent died); null: none. A run its waiter
    // stopped so is reported as kLost. Needs a waiter.
    std::shared_ptr<LeaseFile> lease_file;
    // This node's name, in the messages of such runs.
    std::string node;
    // By GPU index, the NICs nearest it (NearestNics, nccl_env.h): a job's NCCL_IB_HCA.
    std::vector<std::vector<std::string>> gpu_nics;
    // Per-job cgroup, rlimits and /dev/shm (isolation.h); no cgroup driver = none.
    IsolationOptions isolation;
    // Variables every job gets besides its own (after JobEnvironment's, replacing a
    // name it set): HACHI_SERVER, the server as this agent reaches it, so that srun
    // inside a job finds it.
    EnvList job_env;
    // What a node of a job whose batch script runs on its first node only (sbatch's
    // way, JobSpec::batch_on_first_node) runs on the job's other nodes to hold them
    // until the job ends: empty for "WAITER __hold" through the waiter (both waiter
    // programs hold), else "sleep infinity".
    std::vector<std::string> holder;
    // Time limits, kill graces and exit times read it (not owned; outlives the
    // launcher). The supervisor waits in real time: after moving a FakeClock, call
    // Tick() for it to act on what is due.
    const Clock* clock = RealClock();
    // Where a --signal for the steps' tasks goes when it falls due (LauncherEvents).
    StepSignalCallback signal_steps;
  };

  // Takes over the runs an earlier agent process left in `spool_dir` first: adopts those
  // with a waiter (when `adopt`), stops the others (StopLeftoverRuns).
  ProcessLauncher(Options options, ExitCallback on_exit);
  ~ProcessLauncher() override;
  // What the constructor stopped: "job 12 (pid 345)" each.
  const std::vector<std::string>& leftovers_stopped() const { return leftovers_stopped_; }
  // What it adopted and still runs: "job 12 (pid 345)" each.
  const std::vector<std::string>& runs_adopted() const { return runs_adopted_; }
  ProcessLauncher(const ProcessLauncher&) = delete;
  ProcessLauncher& operator=(const ProcessLauncher&) = delete;

  Status Launch(const api::LaunchSpec& spec) override;
  void Cancel(JobId job, std::string reason) override;
  void Stop(JobId job, api::ExitKind kind, std::string message) override;
  void Signal(JobId job, int sig, bool batch_only) override;
  void SetTimeLimit(JobId job, Time start_time, Duration time_limit,
                    Duration time_left = -1) override;
  std::vector<JobId> Running() const override;
  std::optional<StepContext> StepContextOf(JobId job, Time start_time) const override;
  // Has the supervisor read the clock and act on what is due (SIGTERM at a time limit,
  // SIGKILL after a grace) before it returns: for tests that move a FakeClock
  // (Options::clock). A real clock needs no ticks.
  void Tick();
  std::vector<std::pair<JobId, Time>> AdoptedRuns() const override;

 private:
  // launcher_state.h: the jobs, pending reports, stop flag (guarded by State::mu); one
  // job's process; one round of the supervisor.
  struct State;
  struct Run;
  struct Watch;
  void TakeOverLeftoverRuns();  // the constructor, before the supervisor starts
  void TakeOverCgroups();       // the constructor, after TakeOverLeftoverRuns

  // Launch's stages (launcher.cc), in order; *Locked under State::mu.
  SpawnRequest ProcessOf(const api::LaunchSpec& spec, bool holder) const;
  Status SetCommand(const api::LaunchSpec& spec, bool holder, SpawnRequest& req, Run& run,
                    std::vector<std::string>& binds) const;
  Status Confine(const api::LaunchSpec& spec, bool holder,
                 const std::vector<std::string>& binds, SpawnRequest& req,
                 Run& run) const;
  Result<Spawned> SpawnRun(const api::LaunchSpec& spec, SpawnRequest& req) const;
  void LaunchFailedLocked(const api::LaunchSpec& spec, Run& run, const Status& why);
  void StartedLocked(const api::LaunchSpec& spec, const SpawnRequest& req, bool holder,
                     const Spawned& child, Run run,
                     std::chrono::steady_clock::time_point now);

  // The supervisor thread (launcher_supervise.cc).
  void Supervise();
  bool NextRound(Watch& w);
  void EndRunLocked(JobId id);

  // Constant after construction.
  const Options options_;
  const ExitCallback on_exit_;
  std::vector<std::string> leftovers_stopped_;  // these three: set by the constructor
  std::vector<std::string> runs_adopted_;
  std::vector<std::pair<JobId, Time>> adopted_;  // (job, start time), in spool order
  const std::unique_ptr<Isolation> isolation_;
  std::unique_ptr<State> state_;
  std::thread supervisor_;
};

}  // namespace hachi::agent
