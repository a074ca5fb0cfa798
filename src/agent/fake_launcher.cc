#include "agent/fake_launcher.h"

#include <chrono>

namespace hachi::agent {

FakeLauncher::FakeLauncher(ExitCallback on_exit, const Clock* clock)
    : on_exit_(std::move(on_exit)), clock_(clock != nullptr ? clock : RealClock()) {}

Status FakeLauncher::Launch(const api::LaunchSpec& spec) {
  MutexLock lock(&mu_);
  if (hold_) {
    ++held_;
    const auto until = CondVar::Clock::now() + std::chrono::seconds(10);
    while (hold_ && held_cv_.WaitUntil(until)) {
    }
    --held_;
  }
  if (!launch_status_.ok()) return launch_status_;
  if (running_.count(spec.job)) {
    return InvalidArgument("job " + std::to_string(spec.job) +
                           " is already running here");
  }
  launches_.push_back(spec);
  running_[spec.job] = spec.start_time;
  return Status::Ok();
}

void FakeLauncher::HoldLaunches(bool hold) {
  MutexLock lock(&mu_);
  hold_ = hold;
  held_cv_.SignalAll();
}

int FakeLauncher::launches_held() const {
  MutexLock lock(&mu_);
  return held_;
}

void FakeLauncher::Cancel(JobId job, std::string reason) {
  {
    MutexLock lock(&mu_);
    cancels_.emplace_back(job, reason);
  }
  api::JobExit e;
  e.job = job;
  e.kind = api::ExitKind::kCancelled;
  e.signal = 15;  // SIGTERM, as a real job that did not trap it
  Finish(e);
}

void FakeLauncher::Stop(JobId job, api::ExitKind kind, std::string message) {
  api::JobExit e;
  e.job = job;
  e.kind = kind;
  e.signal = 15;
  e.message = std::move(message);
  {
    MutexLock lock(&mu_);
    if (!running_.count(job)) return;
    stops_.push_back(e);
  }
  Finish(e);
}

std::vector<api::JobExit> FakeLauncher::stops() const {
  MutexLock lock(&mu_);
  return stops_;
}

void FakeLauncher::Signal(JobId job, int sig, bool batch_only) {
  MutexLock lock(&mu_);
  signals_.push_back(api::JobSignal{
      job, sig, batch_only ? api::SignalScope::kBatch : api::SignalScope::kAll});
}

void FakeLauncher::SetTimeLimit(JobId job, Time start_time, Duration time_limit,
                                Duration /*time_left*/) {
  MutexLock lock(&mu_);
  auto it = running_.find(job);
  if (it == running_.end() || it->second != start_time) return;  // another run
  limits_.emplace_back(job, time_limit);
}

std::vector<std::pair<JobId, Duration>> FakeLauncher::limits() const {
  MutexLock lock(&mu_);
  return limits_;
}

std::vector<JobId> FakeLauncher::Running() const {
  MutexLock lock(&mu_);
  std::vector<JobId> out;
  for (const auto& [job, start] : running_) out.push_back(job);
  return out;
}

std::optional<StepContext> FakeLauncher::StepContextOf(JobId job, Time start_time) const {
  MutexLock lock(&mu_);
  auto r = running_.find(job);
  if (r == running_.end() || r->second != start_time) return std::nullopt;
  for (auto l = launches_.rbegin(); l != launches_.rend(); ++l) {
    if (l->job == job && l->start_time == start_time) return StepContext{*l, {}, {}};
  }
  return std::nullopt;
}

bool FakeLauncher::Finish(JobId job, int exit_code) {
  api::JobExit e;
  e.job = job;
  e.exit_code = exit_code;
  return Finish(e);
}

bool FakeLauncher::Finish(const api::JobExit& exit) {
  api::JobExit e = exit;
  {
    MutexLock lock(&mu_);
    auto it = running_.find(exit.job);
    if (it == running_.end()) return false;
    if (e.start_time == 0) e.start_time = it->second;  // as the real launcher: the run
    running_.erase(it);
  }
  if (e.end_time == 0) e.end_time = clock_->Now();
  on_exit_(e);
  return true;
}

void FakeLauncher::FailLaunches(Status status) {
  MutexLock lock(&mu_);
  launch_status_ = std::move(status);
}

std::vector<api::LaunchSpec> FakeLauncher::launches() const {
  MutexLock lock(&mu_);
  return launches_;
}

std::vector<std::pair<JobId, std::string>> FakeLauncher::cancels() const {
  MutexLock lock(&mu_);
  return cancels_;
}

std::vector<api::JobSignal> FakeLauncher::signals() const {
  MutexLock lock(&mu_);
  return signals_;
}

}  // namespace hachi::agent
