// StepRunner's two threads (steps.h): the I/O thread polls every task's pidfd and
// pipes (and a --pty terminal), reaps and kills what is due; the sender reports output
// and exits to the server in batches and drops what it acknowledged.
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "agent/steps_state.h"

namespace hachi::agent {
namespace {

constexpr size_t kReadSize = 64 * 1024;

}  // namespace

void StepRunner::IoLoop() {
  // Which task and stream each polled descriptor is: 0 pidfd, 1 stdout, 2 stderr.
  struct Slot {
    state::StepKey key;
    size_t task;
    int which;
    int fd;
  };
  std::vector<pollfd> fds;
  std::vector<Slot> slots;
  std::vector<char> buf(kReadSize);
  for (;;) {
    fds.clear();
    slots.clear();
    fds.push_back({state_->wake_fd, POLLIN, 0});
    slots.push_back({});
    Mono::time_point next = kNever;
    {
      MutexLock lock(&state_->mu);
      if (state_->stop) return;
      for (auto& [key, p] : state_->parts) {
        if (p.stopping) next = std::min(next, p.kill_at);
        // Flow control: a part whose output the server has not taken is not read (the
        // sender wakes this thread when it has room again).
        const bool full = p.Full(options_.buffer_bytes);
        for (size_t i = 0; i < p.tasks.size(); ++i) {
          const State::Task& t = p.tasks[i];
          if (t.pidfd >= 0) {
            fds.push_back({t.pidfd, POLLIN, 0});
            slots.push_back({key, i, 0, t.pidfd});
          }
          for (int which : {1, 2}) {
            const int fd = which == 1 ? t.out : t.err;
            if (fd < 0) continue;
            const bool out_waits = fd == p.pty && !p.input_pending.empty();
            const short events =
                static_cast<short>((full ? 0 : POLLIN) | (out_waits ? POLLOUT : 0));
            if (events == 0) continue;
            fds.push_back({fd, events, 0});
            slots.push_back({key, i, which, fd});
          }
          if (t.exited && !full && (t.out >= 0 || t.err >= 0)) {
            next = std::min(next, t.close_by);
          }
        }
      }
    }
    int timeout = -1;
    if (next != kNever) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            next - MonoNow(*options_.clock))
                            .count();
      timeout = static_cast<int>(std::clamp<int64_t>(left + 1, 0, 60000));
    }
    const int n = poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno != EINTR) continue;
    if (fds[0].revents & POLLIN) {
      uint64_t v;
      [[maybe_unused]] ssize_t r = read(state_->wake_fd, &v, sizeof v);
    }
    MutexLock lock(&state_->mu);
    if (state_->stop) return;
    // A Tick() asked by now is answered by this round, which reads the clock after it.
    const uint64_t ticks_asked = state_->ticks_asked;
    const Mono::time_point now = MonoNow(*options_.clock);
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const Slot& s = slots[i];
      auto it = state_->parts.find(s.key);
      if (it == state_->parts.end() || s.task >= it->second.tasks.size()) continue;
      State::Part& p = it->second;
      State::Task& t = p.tasks[s.task];
      if (s.which == 0) {
        if (t.pidfd != s.fd) continue;
        int status = 0;
        if (waitpid(t.pid, &status, WNOHANG) == t.pid) state_->Exited(p, t, status, now);
        continue;
      }
      int& fd = s.which == 1 ? t.out : t.err;
      if (fd != s.fd) continue;
      if (fd == p.pty && (fds[i].revents & POLLOUT)) FlushInput(fd, &p.input_pending);
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (p.Full(options_.buffer_bytes)) {
        // Polled for its input only: a terminal no one holds takes none.
        if (fd == p.pty && (fds[i].revents & (POLLHUP | POLLERR)))
          p.input_pending.clear();
        continue;
      }
      const ssize_t r = read(fd, buf.data(), buf.size());
      if (r > 0) {
        state_->Append(p, t.rank, s.which, buf.data(), static_cast<size_t>(r));
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        // A terminal's leader reads EIO once no one holds the follower: its end.
        if (fd == p.pty) {
          p.pty = -1;
          p.input_pending.clear();
        }
        CloseFd(&fd);
      }
    }
    for (auto& [key, p] : state_->parts) {
      if (p.stopping && now >= p.kill_at) {
        for (const State::Task& t : p.tasks) {
          if (!t.exited && t.pid > 0) kill(-t.pid, SIGKILL);
        }
        p.kill_at = kNever;
      }
      // A full part's pipes wait with what they hold: the drain starts again once the
      // server takes output (SendLoop).
      const bool full = p.Full(options_.buffer_bytes);
      for (State::Task& t : p.tasks) {
        if (t.exited && !full && now >= t.close_by) {
          if (t.out == p.pty) p.pty = -1;
          CloseFd(&t.out);
          CloseFd(&t.err);
        }
      }
      state_->CheckEnded(p);
    }
    // Parts the server no longer wants, once their tasks are gone.
    for (auto it = state_->parts.begin(); it != state_->parts.end();) {
      if (it->second.gone && it->second.ended) {
        it = state_->parts.erase(it);
        state_->cv.SignalAll();
      } else {
        ++it;
      }
    }
    if (state_->ticks_done != ticks_asked) {  // what was due is done: Tick() returns
      state_->ticks_done = ticks_asked;
      state_->ticked.SignalAll();
    }
  }
}

void StepRunner::SendLoop() {
  int backoff_ms = 100;
  MutexLock lock(&state_->mu);
  for (;;) {
    // Parts with something new, those the server held back once their wait is over.
    CondVar::Clock::time_point now = CondVar::Clock::now();
    auto soonest = CondVar::Clock::time_point::max();
    bool due = false;
    for (const auto& [key, p] : state_->parts) {
      if (!p.Unsent()) continue;
      if (p.resend_at <= now) due = true;
      soonest = std::min(soonest, p.resend_at);
    }
    if (state_->stop) return;
    if (!due) {
      if (soonest == CondVar::Clock::time_point::max()) {
        state_->cv.Wait();
      } else {
        state_->cv.WaitUntil(soonest);
      }
      continue;
    }
    // One report per part with something new, all of its output up to the batch bound
    // (one chunk from a part the server held back: the probe costs little if refused).
    std::vector<api::StepReport> batch;
    std::vector<int64_t> offered;
    int64_t room = options_.batch_bytes;
    for (auto& [key, p] : state_->parts) {
      if (!p.Unsent() || p.resend_at > now) continue;
      api::StepReport r;
      r.job = key.job;
      r.job_start = key.job_start;
      r.step = key.step;
      r.seq = p.acked;
      const size_t most = p.resend_ms > 0 ? 1 : p.pending.size();
      size_t take = 0;
      int64_t bytes = 0;
      while (take < std::min(most, p.pending.size()) && (take == 0 || room > 0)) {
        room -= static_cast<int64_t>(p.pending[take].data.size());
        bytes += p.pending[take].size();
        r.chunks.push_back(p.pending[take]);
        ++take;
      }
      p.inflight = take;
      r.exits = p.exits;
      p.exits_inflight = p.exits.size();
      r.done = p.ended && take == p.pending.size();
      p.done_inflight = r.done;
      batch.push_back(std::move(r));
      offered.push_back(bytes);
      if (room <= 0) break;
    }
    lock.Unlock();
    Result<std::vector<api::StepAck>> acks = send_(batch);
    lock.Lock();
    if (!acks.ok()) {
      // Nothing was taken: the same output goes again, with whatever came meanwhile.
      for (const api::StepReport& r : batch) {
        auto it = state_->parts.find({r.job, r.job_start, r.step});
        if (it == state_->parts.end()) continue;
        State::Part& p = it->second;
        p.inflight = 0;
        p.exits_inflight = 0;
        p.done_inflight = false;
      }
      if (state_->stop) return;
      const auto until = CondVar::Clock::now() + std::chrono::milliseconds(backoff_ms);
      while (!state_->stop && state_->cv.WaitUntil(until)) {
      }
      backoff_ms = std::min(backoff_ms * 2, 2000);
      continue;
    }
    backoff_ms = 100;
    now = CondVar::Clock::now();
    for (size_t b = 0; b < batch.size(); ++b) {
      const api::StepReport& r = batch[b];
      const state::StepKey key{r.job, r.job_start, r.step};
      auto it = state_->parts.find(key);
      if (it == state_->parts.end()) continue;
      State::Part& p = it->second;
      const api::StepAck* ack = nullptr;
      for (const api::StepAck& a : *acks) {
        if (a.job == r.job && a.job_start == r.job_start && a.step == r.step) ack = &a;
      }
      // How far the server took the batch (all of it when it does not say).
      const int64_t took = ack == nullptr
                               ? offered[b]
                               : std::clamp<int64_t>(ack->next - r.seq, 0, offered[b]);
      const bool was_full = p.Full(options_.buffer_bytes);
      State::Release(p, took);
      p.inflight = 0;
      p.exits.erase(p.exits.begin(),
                    p.exits.begin() + static_cast<std::ptrdiff_t>(p.exits_inflight));
      p.exits_inflight = 0;
      const bool whole = took == offered[b];
      if (whole) {
        p.resend_ms = 0;
        p.resend_at = {};
      } else {
        // Its reader is behind: ask again later, not in a loop; soon when the server
        // took some (its reader reads), later each time it took none.
        p.resend_ms = took > 0 ? 5 : std::clamp(p.resend_ms * 2, 5, 100);
        p.resend_at = now + std::chrono::milliseconds(p.resend_ms);
      }
      if (ack != nullptr && ack->gone && !p.gone) {
        // The server ended the step (the job's end, a lost node): stop what runs.
        p.gone = true;
        p.pending.clear();
        p.pending_bytes = 0;
        for (const State::Task& t : p.tasks) {
          if (!t.exited && t.pid > 0) kill(-t.pid, SIGKILL);
        }
        state_->Wake();
      }
      if (was_full && !p.Full(options_.buffer_bytes)) {
        // Room again: the I/O thread reads the part's pipes, and an exited task's get
        // their drain from now (they were not read while full).
        const Mono::time_point drain_by = MonoNow(*options_.clock) + kDrainAfterExit;
        for (State::Task& t : p.tasks) {
          if (t.exited) t.close_by = std::max(t.close_by, drain_by);
        }
        state_->Wake();
      }
      if (((p.done_inflight && whole) || p.gone) && p.ended) {
        state_->parts.erase(it);
        state_->cv.SignalAll();
      } else {
        p.done_inflight = false;
      }
    }
  }
}

}  // namespace hachi::agent
