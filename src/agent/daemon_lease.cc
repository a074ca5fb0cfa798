// AgentDaemon's lease (docs/fencing.md): renewed by every call a leader answered (not a
// standby's answer, nor a deposed leader's, which the client refuses), checked on a
// thread of its own that never calls the server; and the jittered backoff of the calls.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "agent/daemon.h"
#include "agent/server_probe.h"

namespace hachi::agent {

void AgentDaemon::PublishLeaseLocked() {
  // The job waiters stop their runs at this deadline if this process is no longer here
  // to: a crashed agent runs nothing past its lease (agent/lease_file.h). A failed write
  // leaves the last deadline, which only ends runs sooner.
  if (!options_.lease_file) return;
  (void)options_.lease_file->HoldFor(LeaseEndLocked() - options_.clock->MonotonicMs());
}

void AgentDaemon::RenewLeaseLocked(int64_t sent_ms) {
  renewed_ms_ = std::max(renewed_ms_, sent_ms);
  PublishLeaseLocked();
  const bool within = options_.clock->MonotonicMs() - renewed_ms_ <= lease_ms_;
  if ((lease_expired_ || held_by_refusal_) && within) {
    lease_expired_ = false;
    held_by_refusal_ = false;
    cv_.SignalAll();  // the lease checker sleeps without a deadline while expired
    std::fprintf(stderr, "hachi agent: in contact with the server again\n");
  }
}

void AgentDaemon::NoteCallFailed(const Status& s) {
  // Only a call that could not reach the server: an answer, even an error, renews.
  // A standby's answer and a deposed leader's refused one are kUnavailable too; their
  // addresses accept connections, so the probe finds no outage and nothing is held.
  if (s.code() != StatusCode::kUnavailable) return;
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
  }
  const int64_t sent = options_.clock->MonotonicMs();
  if (ProbeServer(options_.server, 1000) != ProbeResult::kRefused) return;
  MutexLock lock(&mu_);
  refused_ms_ = std::max(refused_ms_, sent);
  PublishLeaseLocked();
}

int64_t AgentDaemon::last_refusal_ms() const {
  MutexLock lock(&mu_);
  return refused_ms_;
}

bool AgentDaemon::WaitStoppingLocked(std::chrono::milliseconds timeout) {
  const auto deadline = CondVar::Clock::now() + timeout;
  while (!stopping_ && cv_.WaitUntil(deadline)) {
  }
  return stopping_;
}

void AgentDaemon::BackoffLocked(int* backoff_ms) {
  // splitmix64: a fresh draw in [0, backoff] per wait.
  uint64_t z = (jitter_state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  const int wait_ms = static_cast<int>(z % static_cast<uint64_t>(*backoff_ms + 1));
  WaitStoppingLocked(std::chrono::milliseconds(wait_ms));
  *backoff_ms = std::min(*backoff_ms * 2, 2000);
}

void AgentDaemon::LeaseLoop() {
  // Sleeps until the next moment something can change -- the lease's end, or the end
  // of the contact that a refusing address extends -- not on a period: an idle agent
  // wakes here about once a lease, not five times a second. A renewal only moves those
  // moments later, so a wake-up that comes early just sleeps again; what can move them
  // sooner (a registration's shorter lease, contact back after an expiry) signals cv_,
  // which ends the sleep.
  // Waits in real time, decides by the Clock (a test moves a FakeClock and asks for a
  // check with TickLease; kLongestSleep bounds a sleep computed from a clock that is not
  // the real one). Never calls the server: a call hung on a dead connection delays
  // nothing here.
  constexpr int64_t kLongestSleepMs = 60000;
  // With a lease file, the job waiters stop the runs at the lease's end themselves (they
  // must, for an agent that died); this process then stops what is left a second later,
  // so that a job does not get its SIGTERM from both at once (its handler run twice).
  // Well within the fence's margin: the server counts the runs dead only lease + kill
  // grace + margin after the last contact.
  const int64_t after_waiters_ms = options_.lease_file ? 1000 : 0;
  MutexLock lock(&mu_);
  // The ticks asked before this round read the clock: answered once it has acted.
  auto ticked = [this](uint64_t asked) REQUIRES(mu_) {
    if (lease_ticks_done_ == asked) return;
    lease_ticks_done_ = asked;
    cv_.SignalAll();
  };
  for (;;) {
    int64_t sleep_ms = kLongestSleepMs;
    if (!lease_expired_) {
      const int64_t now = options_.clock->MonotonicMs();
      // Past these, the checks below act: `> end`, hence the + 1.
      int64_t next = LeaseEndLocked() + after_waiters_ms + 1;
      if (!held_by_refusal_) next = std::min(next, renewed_ms_ + lease_ms_ + 1);
      sleep_ms = std::clamp<int64_t>(next - now, 1, kLongestSleepMs);
    }
    const auto until = CondVar::Clock::now() + std::chrono::milliseconds(sleep_ms);
    // One wait: any signal on cv_ may have moved the deadlines, so the checks run again
    // (they only act on what the clock and the fields say; a wake-up in vain costs them).
    if (!stopping_ && lease_ticks_done_ == lease_ticks_asked_) cv_.WaitUntil(until);
    if (stopping_) return;
    const uint64_t asked = lease_ticks_asked_;
    const int64_t now = options_.clock->MonotonicMs();
    if (!lease_expired_ && !held_by_refusal_ && now - renewed_ms_ > lease_ms_ &&
        now <= LeaseEndLocked()) {
      held_by_refusal_ = true;
      std::fprintf(stderr,
                   "hachi agent: no contact with the server for %lld s, but its address "
                   "refuses connections (no server is running there): keeping %zu "
                   "job(s) running until it is back\n",
                   static_cast<long long>(lease_ms_ / 1000), live_.size());
    }
    if (lease_expired_ || now <= LeaseEndLocked() + after_waiters_ms) {
      ticked(asked);
      continue;
    }
    lease_expired_ = true;
    const std::string why =
        "lease expired: no contact with the server for " +
        std::to_string(lease_ms_ / 1000) + " s" +
        (held_by_refusal_ ? " (and its address stopped refusing connections)" : "");
    held_by_refusal_ = false;
    // Runs that waited for their job's earlier run never start: reported lost.
    std::vector<api::LaunchSpec> unstarted;
    for (auto& [job, l] : deferred_) unstarted.push_back(std::move(l));
    deferred_.clear();
    for (api::LaunchSpec& l : ready_) unstarted.push_back(std::move(l));
    ready_.clear();
    for (const api::LaunchSpec& l : unstarted) {
      launched_.emplace(l.job, l.start_time);  // a launch sent again is not started
      api::JobExit e;
      e.job = l.job;
      e.start_time = l.start_time;
      e.kind = api::ExitKind::kLost;
      e.message = why + " before it started";
      e.end_time = options_.clock->Now();
      unreported_.push_back(e);
    }
    std::vector<state::JobId> stop, cancel;
    for (const auto& [job, start] : live_) {
      lease_stopped_.emplace(job, start);
      stop.push_back(job);
      auto starting = starting_.find({job, start});
      if (starting != starting_.end()) {
        starting->second = why;  // being launched: LaunchNow stops it once it is
      } else {
        cancel.push_back(job);
      }
    }
    std::string list;
    for (state::JobId id : stop) list += (list.empty() ? "" : ", ") + std::to_string(id);
    std::fprintf(stderr, "hachi agent: %s; stopping %zu job(s)%s%s\n", why.c_str(),
                 stop.size(), list.empty() ? "" : ": ", list.c_str());
    cv_.SignalAll();
    lock.Unlock();
    // Without mu_: a launcher may report the exit (OnExit) from within Cancel.
    for (state::JobId id : cancel) {
      launcher_->Cancel(id, why);
      steps_->StopJob(id, kStepGrace);
    }
    lock.Lock();
    ticked(asked);
  }
}

void AgentDaemon::TickLease() {
  MutexLock lock(&mu_);
  const uint64_t want = ++lease_ticks_asked_;
  cv_.SignalAll();
  // Bounded: a checker that has returned (stopping) ticks no more.
  const auto until = CondVar::Clock::now() + std::chrono::seconds(10);
  while (lease_ticks_done_ < want && !stopping_ && cv_.WaitUntil(until)) {
  }
}

}  // namespace hachi::agent
