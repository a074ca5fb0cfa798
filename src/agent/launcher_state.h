// ProcessLauncher's insides that its two files share (launcher.h): launcher.cc
// launches, stops and signals; launcher_supervise.cc watches the runs to their ends.
// Internal to them.
#pragma once

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent/launcher.h"
#include "agent/mono_time.h"
#include "agent/run_records.h"
#include "agent/waiter.h"
#include "core/mutex.h"
#include "core/strings.h"

namespace hachi::agent {

// Deadlines are points on the Clock's monotonic timeline (Options::clock; mono_time.h).
inline constexpr Mono::time_point kNoDeadline = Mono::time_point::max();

// One job's process here and how it is being stopped; State::jobs holds them.
struct ProcessLauncher::Run {
  pid_t pid = -1;  // also the process group id (the child called setsid)
  int pidfd = -1;
  Duration grace = 0;
  Mono::time_point deadline = kNoDeadline;  // time limit
  Mono::time_point kill_at = kNoDeadline;   // SIGKILL, once we are stopping it
  bool killed = false;
  api::ExitKind stop = api::ExitKind::kExited;  // kTimeLimit / kCancelled once stopping
  std::string stop_message;                     // with it (Launcher::Stop)
  std::string script;                           // spooled script to remove at the end
  Time start_time = 0;   // the run (api::LaunchSpec::start_time), in its exit
  bool waiter = false;   // pid is the job's waiter: its exit file tells the status
  bool adopted = false;  // left by an earlier agent process: not our child
  JobIsolation iso;      // its cgroup and CPUs
  std::optional<api::LaunchSpec> spec;  // what it was launched with (not adopted)
  std::vector<SpawnRequest::Setup::Limit> rlimits;  // its rlimits, for its steps
  bool holder = false;  // holds a node of a first-node-only job: stopped by SIGKILL
  // --signal: sent at signal_at (before the time limit), once; `record` is rewritten
  // with `signaled` set then, so that a restarted agent does not send it again.
  Mono::time_point signal_at = kNoDeadline;
  RunRecord record;
};

struct ProcessLauncher::State {
  mutable Mutex mu;
  std::map<JobId, Run> jobs GUARDED_BY(mu);
  // Exits the supervisor has to deliver.
  std::vector<api::JobExit> reports GUARDED_BY(mu);
  std::set<JobId> launching GUARDED_BY(mu);  // inside Launch, not yet in jobs
  bool stop GUARDED_BY(mu) = false;
  int wake_fd = -1;  // eventfd; constant after construction
  // Tick(): asked and done by the supervisor.
  uint64_t ticks_asked GUARDED_BY(mu) = 0;
  uint64_t ticks_done GUARDED_BY(mu) = 0;
  CondVar ticked{&mu};

  void Wake() const {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd, &one, sizeof one);
  }
  bool Known(JobId id) const REQUIRES(mu) {
    return jobs.count(id) || launching.count(id) ||
           std::any_of(reports.begin(), reports.end(),
                       [id](const api::JobExit& e) { return e.job == id; });
  }
  // Sends `sig` to the job (mu held, so the pid cannot be reaped and reused meanwhile):
  // with `batch_only` to its batch shell alone, else to its process group and every
  // process of its cgroup (those that left the session too).
  static void SendSignal(const Run& job, int sig, bool batch_only) {
    if (batch_only) {
      const pid_t shell = BatchShellPid(job.pid, job.waiter);
      if (shell > 0) kill(shell, sig);
      return;
    }
    kill(-job.pid, sig);
    if (!job.iso.cgroup) return;
    std::set<pid_t> seen;
    for (const std::string& procs : job.iso.cgroup->procs_files) {
      std::optional<std::string> text = ReadFile(procs, nullptr);
      if (!text) continue;
      std::istringstream in(*text);
      for (long p; in >> p;) {
        // The waiter ignores what is meant for its job; the group got it already.
        if (p > 1 && p != job.pid && seen.insert(static_cast<pid_t>(p)).second) {
          if (getpgid(static_cast<pid_t>(p)) != job.pid) kill(static_cast<pid_t>(p), sig);
        }
      }
    }
  }
  // Starts stopping `job` (mu held): SIGTERM now, SIGKILL after its grace.
  static void BeginStop(Run& job, api::ExitKind why, Mono::time_point now) {
    job.stop = why;
    kill(-job.pid, SIGTERM);
    // A holder has nothing to save: its node is free at once.
    job.kill_at = job.holder ? now : now + std::chrono::seconds(job.grace);
  }
};

// A run's end as its waiter's exit file (waiter.h) tells it: the job's own status, or
// kLost with why when its waiter stopped it because the node's lease had passed (then
// true).
bool ApplyWaitedStatus(const WaitedStatus& w, const std::string& node, api::JobExit* e);

// One round of the supervisor: the runs' pidfds to poll (the wake eventfd last) with
// their jobs, how long to wait, and the exits to deliver first.
struct ProcessLauncher::Watch {
  std::vector<pollfd> fds;
  std::vector<JobId> ids;
  int timeout_ms = -1;
  std::vector<api::JobExit> deliver;
  // --signal for steps' tasks that fell due (Options::signal_steps, called unlocked:
  // the StepRunner asks the launcher for a run's context under its own lock).
  std::vector<std::pair<JobId, int>> step_signals;
};

}  // namespace hachi::agent
