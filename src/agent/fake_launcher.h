// FakeLauncher: a Launcher for tests of the agent daemon. It starts nothing; it records
// what it was asked to do, and a test ends jobs with Finish().
//
// Thread-safe. Unlike ProcessLauncher it has no thread of its own: the exit callback
// runs on the thread that calls Finish() or Cancel() (never with its lock held), and
// exactly once per job launched with an OK status.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/launcher.h"
#include "core/mutex.h"

namespace hachi::agent {

class FakeLauncher final : public Launcher {
 public:
  // Exit times are read from `clock` (not owned; outlives the launcher).
  explicit FakeLauncher(ExitCallback on_exit, const Clock* clock = RealClock());

  // Records the launch; fails like ProcessLauncher for a job already running, or with
  // the status given to FailLaunches.
  Status Launch(const api::LaunchSpec& spec) override EXCLUDES(mu_);
  // Reports kCancelled at once (a real job would stop within its grace).
  void Cancel(JobId job, std::string reason) override EXCLUDES(mu_);
  // Reports `kind` with `message` at once, and records it.
  void Stop(JobId job, api::ExitKind kind, std::string message) override EXCLUDES(mu_);
  void Signal(JobId job, int sig, bool batch_only) override EXCLUDES(mu_);  // recorded
  std::vector<JobId> Running() const override EXCLUDES(mu_);
  // The recorded launch of a running run (no cgroup).
  std::optional<StepContext> StepContextOf(JobId job, Time start_time) const override
      EXCLUDES(mu_);

  // Ends a running job: kExited with `exit_code`. False when the job is not running.
  bool Finish(JobId job, int exit_code) EXCLUDES(mu_);
  // Ends a running job with any report (job is taken from `exit`).
  bool Finish(const api::JobExit& exit) EXCLUDES(mu_);
  // Launch returns `status` from now on (OK: launches work again).
  void FailLaunches(Status status) EXCLUDES(mu_);
  // While held, Launch waits (at most 10 s) before it launches: a launch under way.
  void HoldLaunches(bool hold) EXCLUDES(mu_);
  int launches_held() const EXCLUDES(mu_);  // Launch calls waiting now

  std::vector<api::LaunchSpec> launches() const EXCLUDES(mu_);  // in order
  std::vector<std::pair<JobId, std::string>> cancels() const
      EXCLUDES(mu_);                                          // (job, reason)
  std::vector<api::JobSignal> signals() const EXCLUDES(mu_);  // in order
  std::vector<api::JobExit> stops() const EXCLUDES(mu_);      // Stop()s, in order
  void SetTimeLimit(JobId job, Time start_time, Duration time_limit,
                    Duration time_left = -1) override EXCLUDES(mu_);
  // (job, time limit) of each SetTimeLimit for a run that is running, in order.
  std::vector<std::pair<JobId, Duration>> limits() const EXCLUDES(mu_);

 private:
  const ExitCallback on_exit_;
  const Clock* const clock_;
  mutable Mutex mu_;
  std::vector<api::LaunchSpec> launches_ GUARDED_BY(mu_);
  std::map<JobId, Time> running_ GUARDED_BY(mu_);  // job -> its run's start time
  std::vector<std::pair<JobId, std::string>> cancels_ GUARDED_BY(mu_);
  std::vector<api::JobSignal> signals_ GUARDED_BY(mu_);
  std::vector<api::JobExit> stops_ GUARDED_BY(mu_);
  std::vector<std::pair<JobId, Duration>> limits_ GUARDED_BY(mu_);
  Status launch_status_ GUARDED_BY(mu_);
  CondVar held_cv_{&mu_};
  bool hold_ GUARDED_BY(mu_) = false;
  int held_ GUARDED_BY(mu_) = 0;
};

}  // namespace hachi::agent
