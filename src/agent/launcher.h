// Launching and supervising the processes of jobs on this node (DESIGN.md §2 agent/).
//
// Launcher is the interface the agent daemon drives; ProcessLauncher runs real
// processes, FakeLauncher (fake_launcher.h) records launches for daemon tests.
//
// Contract of every Launcher: Launch returns OK and then the exit callback given at
// construction is called exactly once for that job (its process exited, or it never
// started: ExitKind::kLaunchFailed with the reason), or Launch returns an error and the
// callback is never called for that launch. All methods are thread-safe. The callback
// runs on the launcher's own thread (ProcessLauncher: its supervisor thread), never
// with the launcher's locks held, so it may call back into the launcher; it must return
// quickly, since time limits are enforced on the same thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/container.h"
#include "api/launch_spec.h"
#include "core/status.h"

namespace hachi::agent {

using JobId = state::JobId;
using ExitCallback = std::function<void(const JobExit&)>;

class Launcher {
 public:
  virtual ~Launcher() = default;

  // Starts the job's process. Errors: the job is already running here, or the launcher
  // is shutting down. Everything wrong with the job itself (command, workdir, output
  // files, user) is reported through the callback as kLaunchFailed.
  virtual Status Launch(const LaunchSpec& spec) = 0;
  // Stops the job: SIGTERM to its process group now, SIGKILL after its kill grace;
  // reported as kCancelled. A no-op for unknown jobs and jobs already stopping.
  virtual void Cancel(JobId job, std::string reason) = 0;
  // Sends `sig` to the job's process group (scancel --signal); the job keeps its fate.
  virtual void Signal(JobId job, int sig) = 0;
  // The jobs launched and not yet reported, ascending.
  virtual std::vector<JobId> Running() const = 0;
};

// Runs that an earlier agent process left behind in `spool_dir` (its "run-<job>" records;
// the jobs run in their own sessions, so they outlive the agent): each that is still the
// same process is stopped, its whole process group killed, so that its GPUs are free
// before this agent registers (the server then requeues or fails the job). The records
// are removed. Returns "job 12 (pid 345)" for each run stopped.
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
// Limits: process groups do not catch processes that call setsid() or setpgid() to
// leave; cgroups (issue 6) will. The process must not ignore SIGCHLD (that auto-reaps
// children under the pidfds). Destruction waits for the jobs already being stopped
// (Cancel, time limit; at most their kill grace) and reports them; the other jobs keep
// running and are not reported (re-adoption after an agent restart comes later).
class ProcessLauncher final : public Launcher {
 public:
  struct Options {
    std::string spool_dir = "/var/spool/hachi";  // created (0755) when missing
    ContainerRuntime container;                  // kind "" = container jobs fail
    Duration default_kill_grace = 30;            // when a spec's kill_grace <= 0
  };

  // Stops the runs an earlier agent process left in `spool_dir` first (StopLeftoverRuns).
  ProcessLauncher(Options options, ExitCallback on_exit);
  ~ProcessLauncher() override;
  // What the constructor stopped: "job 12 (pid 345)" each.
  const std::vector<std::string>& leftovers_stopped() const { return leftovers_stopped_; }
  ProcessLauncher(const ProcessLauncher&) = delete;
  ProcessLauncher& operator=(const ProcessLauncher&) = delete;

  Status Launch(const LaunchSpec& spec) override;
  void Cancel(JobId job, std::string reason) override;
  void Signal(JobId job, int sig) override;
  std::vector<JobId> Running() const override;

 private:
  struct State;  // jobs, pending reports, stop flag: guarded by State::mu
  void Supervise();

  // Constant after construction.
  const Options options_;
  const ExitCallback on_exit_;
  std::vector<std::string> leftovers_stopped_;
  std::unique_ptr<State> state_;
  std::thread supervisor_;
};

}  // namespace hachi::agent
