// FakeLauncher: a Launcher for tests of the agent daemon. It starts nothing; it records
// what it was asked to do, and a test ends jobs with Finish().
//
// Thread-safe. Unlike ProcessLauncher it has no thread of its own: the exit callback
// runs on the thread that calls Finish() or Cancel() (never with its lock held), and
// exactly once per job launched with an OK status.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/launcher.h"

namespace hachi::agent {

class FakeLauncher final : public Launcher {
 public:
  // Exit times are read from `clock` (not owned; outlives the launcher).
  explicit FakeLauncher(ExitCallback on_exit, const Clock* clock = RealClock());

  // Records the launch; fails like ProcessLauncher for a job already running, or with
  // the status given to FailLaunches.
  Status Launch(const api::LaunchSpec& spec) override;
  // Reports kCancelled at once (a real job would stop within its grace).
  void Cancel(JobId job, std::string reason) override;
  // Reports `kind` with `message` at once, and records it.
  void Stop(JobId job, api::ExitKind kind, std::string message) override;
  void Signal(JobId job, int sig, bool batch_only) override;  // recorded
  std::vector<JobId> Running() const override;
  // The recorded launch of a running run (no cgroup).
  std::optional<StepContext> StepContextOf(JobId job, Time start_time) const override;

  // Ends a running job: kExited with `exit_code`. False when the job is not running.
  bool Finish(JobId job, int exit_code);
  // Ends a running job with any report (job is taken from `exit`).
  bool Finish(const api::JobExit& exit);
  // Launch returns `status` from now on (OK: launches work again).
  void FailLaunches(Status status);

  std::vector<api::LaunchSpec> launches() const;               // in order
  std::vector<std::pair<JobId, std::string>> cancels() const;  // (job, reason)
  std::vector<api::JobSignal> signals() const;                 // in order
  std::vector<api::JobExit> stops() const;                     // Stop()s, in order
  void SetTimeLimit(JobId job, Time start_time, Duration time_limit) override;
  // (job, time limit) of each SetTimeLimit for a run that is running, in order.
  std::vector<std::pair<JobId, Duration>> limits() const;

 private:
  const ExitCallback on_exit_;
  const Clock* const clock_;
  mutable std::mutex mu_;
  std::vector<api::LaunchSpec> launches_;  // guarded by mu_
  std::map<JobId, Time> running_;          // guarded by mu_: job -> its run's start time
  std::vector<std::pair<JobId, std::string>> cancels_;  // guarded by mu_
  std::vector<api::JobSignal> signals_;                 // guarded by mu_
  std::vector<api::JobExit> stops_;                     // guarded by mu_
  std::vector<std::pair<JobId, Duration>> limits_;      // guarded by mu_
  Status launch_status_;                                // guarded by mu_
};

}  // namespace hachi::agent
