#include "server/agent_hub.h"

#include <algorithm>
#include <chrono>
#include <iterator>

namespace hachi::server {

std::string AgentTopic(const std::string& node) { return "agent/" + node; }

void AgentHub::SetNotifier(std::function<void(const std::string&)> notify) {
  MutexLock lock(&mu_);
  notify_ = std::move(notify);
}

AgentHub::Session& AgentHub::SessionLocked(const std::string& node) {
  std::unique_ptr<Session>& s = sessions_[node];
  if (!s) s = std::make_unique<Session>(&mu_);
  return *s;
}

void AgentHub::Open(const std::string& node) {
  MutexLock lock(&mu_);
  Session& s = SessionLocked(node);
  s.open = true;
  s.last_seen_ms = clock_->MonotonicMs();
  s.launches.clear();
  s.cancels.clear();
  s.signals.clear();
  s.limits.clear();
  s.steps.clear();
  s.step_signals.clear();
  s.step_input.clear();
  s.burn_in.reset();
  s.wake.SignalAll();  // a poll of the previous session answers with nothing
}

void AgentHub::Close(const std::string& node) {
  MutexLock lock(&mu_);
  Session& s = SessionLocked(node);
  s.open = false;
  s.launches.clear();
  s.cancels.clear();
  s.signals.clear();
  s.limits.clear();
  s.burn_in.reset();
  s.wake.SignalAll();
  if (notify_) notify_(AgentTopic(node));
}

bool AgentHub::IsOpen(const std::string& node) const {
  MutexLock lock(&mu_);
  auto it = sessions_.find(node);
  return it != sessions_.end() && it->second->open;
}

void AgentHub::Touch(const std::string& node) {
  MutexLock lock(&mu_);
  SessionLocked(node).last_seen_ms = clock_->MonotonicMs();
}

int64_t AgentHub::SilentForMs(const std::string& node) const {
  MutexLock lock(&mu_);
  auto it = sessions_.find(node);
  if (it == sessions_.end()) return -1;
  return clock_->MonotonicMs() - it->second->last_seen_ms;
}

void AgentHub::Launch(const std::string& node, api::LaunchSpec launch) {
  MutexLock lock(&mu_);
  Session& s = SessionLocked(node);
  if (!s.open) return;
  s.launches.push_back(std::move(launch));
  s.wake.Signal();  // one agent process polls a node at a time
  if (notify_) notify_(AgentTopic(node));
}

void AgentHub::Cancel(const std::string& node, state::JobId job) {
  MutexLock lock(&mu_);
  Session& s = SessionLocked(node);
  if (!s.open) return;
  s.cancels.push_back(job);
  s.wake.Signal();
  if (notify_) notify_(AgentTopic(node));
}

void AgentHub::Signal(const std::string& node, api::JobSignal signal) {
  MutexLock lock(&mu_);
  Session& s = SessionLocked(node);
  if (!s.open) return;
  s.signals.push_back(signal);
  s.wake.Signal();
  if (notify_) notify_(AgentTopic(node));
}

void AgentHub::SetLimit(const std::string& node, api::AgentWork::Limit limit) {
  MutexLock lock(&mu_);
  Session& s = SessionLocked(node);
  if (!s.open) return;
  s.limits.push_back(limit);
  s.wake.Signal();
  if (notify_) notify_(AgentTopic(node));
}

void AgentHub::BurnIn(const std::string& node, api::BurnInWork run) {
  MutexLock lock(&mu_);
  Session& s = SessionLocked(node);
  if (!s.open) return;
  s.burn_in = std::move(run);  // a newer run replaces one not picked up yet
  s.wake.Signal();
  if (notify_) notify_(AgentTopic(node));
}

void AgentHub::LaunchStep(const std::string& node, api::StepLaunch launch) {
  MutexLock lock(&mu_);
  Session& s = SessionLocked(node);
  if (!s.open) return;
  s.steps.push_back(std::move(launch));
  s.wake.Signal();
  if (notify_) notify_(AgentTopic(node));
}

void AgentHub::SignalStep(const std::string& node, api::StepSignal signal) {
  MutexLock lock(&mu_);
  Session& s = SessionLocked(node);
  if (!s.open) return;
  s.step_signals.push_back(signal);
  s.wake.Signal();
  if (notify_) notify_(AgentTopic(node));
}

void AgentHub::StepInput(const std::string& node, api::StepInput input) {
  MutexLock lock(&mu_);
  Session& s = SessionLocked(node);
  if (!s.open) return;
  s.step_input.push_back(std::move(input));
  s.wake.Signal();
  if (notify_) notify_(AgentTopic(node));
}

bool AgentHub::TakeBackLaunch(const std::string& node, state::JobId job) {
  MutexLock lock(&mu_);
  Session& s = SessionLocked(node);
  auto l = std::find_if(s.launches.begin(), s.launches.end(),
                        [&](const api::LaunchSpec& x) { return x.job == job; });
  if (l == s.launches.end()) return false;
  s.launches.erase(l);
  return true;
}

api::AgentWork AgentHub::Wait(const std::string& node, int wait_ms) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(wait_ms, 0));
  MutexLock lock(&mu_);
  api::AgentWork work;
  auto it = sessions_.find(node);
  if (it == sessions_.end()) {  // never registered, never expected
    work.reregister = true;
    return work;
  }
  Session& s = *it->second;
  for (;;) {
    // An agent the server does not know is not heard from: it must register, and a
    // node whose registration keeps failing goes down at the agent timeout.
    if (!s.open) {
      work.reregister = true;
      return work;
    }
    s.last_seen_ms = clock_->MonotonicMs();
    if (!s.launches.empty() || !s.cancels.empty() || !s.signals.empty() ||
        !s.limits.empty() || !s.steps.empty() || !s.step_signals.empty() ||
        !s.step_input.empty() || s.burn_in || stopping_) {
      work.launch.assign(std::make_move_iterator(s.launches.begin()),
                         std::make_move_iterator(s.launches.end()));
      s.launches.clear();
      work.cancel = std::move(s.cancels);
      s.cancels.clear();
      work.signals = std::move(s.signals);
      s.signals.clear();
      work.limits = std::move(s.limits);
      s.limits.clear();
      work.steps = std::move(s.steps);
      s.steps.clear();
      work.step_signals = std::move(s.step_signals);
      s.step_signals.clear();
      work.step_input = std::move(s.step_input);
      s.step_input.clear();
      work.burn_in = std::move(s.burn_in);
      s.burn_in.reset();
      return work;
    }
    if (!s.wake.WaitUntil(deadline) && std::chrono::steady_clock::now() >= deadline) {
      if (s.open) s.last_seen_ms = clock_->MonotonicMs();
      return work;
    }
  }
}

void AgentHub::Stop() {
  MutexLock lock(&mu_);
  stopping_ = true;
  for (auto& [name, s] : sessions_) {
    s->wake.SignalAll();
    if (notify_) notify_(AgentTopic(name));
  }
}

}  // namespace hachi::server
