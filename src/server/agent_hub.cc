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

void AgentHub::WakeLocked(Session& s, const std::string& node) {
  s.wake.Signal();  // one agent process polls a node at a time
  if (notify_) notify_(AgentTopic(node));
}

void AgentHub::Open(const std::string& node) {
  MutexLock lock(&mu_);
  Session& s = SessionLocked(node);
  s.open = true;
  s.last_seen_ms = clock_->MonotonicMs();
  s.queued = api::AgentWork{};
  s.sent = api::AgentWork{};
  s.wake.SignalAll();  // a poll of the previous session answers with nothing
}

void AgentHub::Close(const std::string& node) {
  MutexLock lock(&mu_);
  Session& s = SessionLocked(node);
  s.open = false;
  s.queued = api::AgentWork{};
  s.sent = api::AgentWork{};
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

namespace {

// Appends `item` to its list of `w` (a burn-in run replaces the one there).
struct Append {
  api::AgentWork* w;
  void operator()(api::LaunchSpec&& x) const { w->launch.push_back(std::move(x)); }
  void operator()(api::RunStop&& x) const { w->cancel.push_back(x); }
  void operator()(api::JobSignal&& x) const { w->signals.push_back(x); }
  void operator()(api::AgentWork::Limit&& x) const { w->limits.push_back(x); }
  void operator()(api::StepLaunch&& x) const { w->steps.push_back(std::move(x)); }
  void operator()(api::StepSignal&& x) const { w->step_signals.push_back(x); }
  void operator()(api::StepInput&& x) const { w->step_input.push_back(std::move(x)); }
  void operator()(api::BurnInWork&& x) const { w->burn_in = std::move(x); }
};

// `later`'s items after `earlier`'s, list by list (a later burn-in run wins).
template <typename T>
void AppendAll(std::vector<T>* to, std::vector<T>* from) {
  to->insert(to->end(), std::make_move_iterator(from->begin()),
             std::make_move_iterator(from->end()));
}
api::AgentWork Merged(api::AgentWork earlier, api::AgentWork later) {
  AppendAll(&earlier.launch, &later.launch);
  AppendAll(&earlier.cancel, &later.cancel);
  AppendAll(&earlier.signals, &later.signals);
  AppendAll(&earlier.limits, &later.limits);
  AppendAll(&earlier.steps, &later.steps);
  AppendAll(&earlier.step_signals, &later.step_signals);
  AppendAll(&earlier.step_input, &later.step_input);
  if (later.burn_in) earlier.burn_in = std::move(later.burn_in);
  earlier.seq = 0;
  return earlier;
}

}  // namespace

void AgentHub::StampTimeLeft(api::AgentWork* w, Time now) {
  // What is left of each limit as the batch goes out (again, for a batch sent again):
  // the agent counts it on its monotonic clock, never on its own wall clock.
  auto left = [now](Time start, Duration limit) -> Duration {
    return limit > 0 ? std::max<Duration>(0, start + limit - now) : -1;
  };
  for (api::LaunchSpec& l : w->launch) l.time_left = left(l.start_time, l.time_limit);
  for (api::AgentWork::Limit& l : w->limits) {
    l.time_left = left(l.start_time, l.time_limit);
  }
}

void AgentHub::Send(const std::string& node, AgentItem item) {
  MutexLock lock(&mu_);
  Session& s = SessionLocked(node);
  if (!s.open) return;
  std::visit(Append{&s.queued}, std::move(item));
  WakeLocked(s, node);
}

bool AgentHub::TakeBackLaunch(const std::string& node, state::JobId job) {
  MutexLock lock(&mu_);
  Session& s = SessionLocked(node);
  auto l = std::find_if(s.queued.launch.begin(), s.queued.launch.end(),
                        [&](const api::LaunchSpec& x) { return x.job == job; });
  if (l == s.queued.launch.end()) return false;
  s.queued.launch.erase(l);
  return true;
}

void AgentHub::AckLocked(Session& s, int64_t ack) {
  if (s.sent.seq == 0) return;
  if (ack >= 0 && static_cast<uint64_t>(ack) == s.sent.seq) {
    s.sent = api::AgentWork{};
    return;
  }
  // The agent acted on an earlier batch only: the answer carrying this one was lost
  // (or came after the agent had given up on that poll). Its items go first.
  s.queued = Merged(std::move(s.sent), std::move(s.queued));
  s.sent = api::AgentWork{};
}

api::AgentWork AgentHub::Wait(const std::string& node, int wait_ms, int64_t ack) {
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
  for (bool acked = false;;) {
    // An agent the server does not know is not heard from: it must register, and a
    // node whose registration keeps failing goes down at the timeout.
    if (!s.open) {
      work.reregister = true;
      return work;
    }
    s.last_seen_ms = clock_->MonotonicMs();
    if (!acked) AckLocked(s, ack);
    acked = true;
    if (!s.queued.Empty() || stopping_) {
      work = std::move(s.queued);
      s.queued = api::AgentWork{};
      StampTimeLeft(&work, clock_->Now());
      if (ack != kNoAck && !work.Empty()) {
        work.seq = next_seq_++;
        s.sent = work;
      }
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
