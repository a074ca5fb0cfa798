// StepRunner's two threads (steps.h): the I/O thread polls every task's pidfd and
// pipes (and a --pty terminal), reaps and kills what is due; the sender reports output
// and exits to the server in batches sized by their JSON, drops what it acknowledged,
// and keeps a report the server refuses from blocking the others.
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "agent/steps_state.h"
#include "api/step_sizes.h"
#include "core/strings.h"

namespace hachi::agent {
namespace {

constexpr size_t kReadSize = 64 * 1024;
// A task's exit as a report carries it: its message (a launch failure's) clipped to this.
constexpr size_t kMaxExitMessageBytes = 4096;
// The least a batch is sized to (Options::batch_bytes): room for an exit and some output.
constexpr int64_t kMinBatchBytes = 64 * 1024;
// So the first report of a batch always carries something: its first exit (clipped, with
// "...", and a node name of at most 256 bytes) or some output.
static_assert(kMinBatchBytes - api::kStepReportsJsonBytes - api::kStepReportJsonBytes >=
              160 + 6 * (static_cast<int64_t>(kMaxExitMessageBytes) + 3 + 256));

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

struct StepRunner::Offer {
  state::StepKey key;
  int64_t bytes = 0;  // output offered: its data and lost marks
  bool data = false;  // some of it is data (a refusal drops that, then the part)
};

void StepRunner::SendLoop() {
  int backoff_ms = 100;
  MutexLock lock(&state_->mu);
  for (;;) {
    // Parts with something new, those the server held back once their wait is over.
    const CondVar::Clock::time_point now = CondVar::Clock::now();
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
    std::vector<Offer> offers;
    const std::vector<api::StepReport> batch = NextBatch(now, &offers);
    lock.Unlock();
    Result<std::vector<api::StepAck>> acks = send_(batch);
    lock.Lock();
    if (!acks.ok()) {
      NotTaken(offers, acks.status(), backoff_ms);
      if (state_->stop) return;
      const auto until = CondVar::Clock::now() + std::chrono::milliseconds(backoff_ms);
      while (!state_->stop && state_->cv.WaitUntil(until)) {
      }
      backoff_ms = std::min(backoff_ms * 2, 2000);
      continue;
    }
    backoff_ms = 100;
    Taken(batch, offers, *acks);
  }
}

// One report per part due, each with its exits and as much of its output as the
// batch's bound leaves room for, by the size of its JSON (a NUL takes more room than a
// letter): the body stays far below the server's limit, whatever the tasks wrote. A
// chunk is cut where the room ends. A part the server held back offers one chunk (the
// probe costs little if refused); a part refused in company goes alone, each in turn.
std::vector<api::StepReport> StepRunner::NextBatch(
    std::chrono::steady_clock::time_point now, std::vector<Offer>* offers) {
  state_->mu.AssertHeld();
  auto& parts = state_->parts;
  auto due = [&](const State::Part& p) { return p.Unsent() && p.resend_at <= now; };
  auto alone = parts.end();
  const auto after_last =
      state_->last_alone ? parts.upper_bound(*state_->last_alone) : parts.begin();
  for (auto [from, to] :
       {std::pair{after_last, parts.end()}, std::pair{parts.begin(), after_last}}) {
    for (auto it = from; it != to && alone == parts.end(); ++it) {
      if (it->second.alone && due(it->second)) alone = it;
    }
  }
  // kMinBatchBytes leaves the first report room for a clipped exit and some output.
  int64_t room =
      std::max(options_.batch_bytes, kMinBatchBytes) - api::kStepReportsJsonBytes;
  std::vector<api::StepReport> batch;
  for (auto it = alone == parts.end() ? parts.begin() : alone; it != parts.end(); ++it) {
    const state::StepKey& key = it->first;
    State::Part& p = it->second;
    if (!due(p)) continue;
    int64_t left = room - api::kStepReportJsonBytes;
    api::StepReport r;
    r.job = key.job;
    r.job_start = key.job_start;
    r.step = key.step;
    r.seq = p.acked;
    // Exits first: small, and the step's end waits for them.
    size_t exits = 0;
    for (; exits < p.exits.size(); ++exits) {
      api::TaskExit e = p.exits[exits];
      // A launch failure quotes the task's argv or directory, which may be megabytes.
      if (e.message.size() > kMaxExitMessageBytes) {
        e.message = Clip(e.message, kMaxExitMessageBytes);
      }
      const int64_t n = api::TaskExitJsonBytes(e);
      if (n > left) break;
      left -= n;
      r.exits.push_back(std::move(e));
    }
    Offer offer{key};
    const size_t most = p.resend_ms > 0 ? 1 : p.pending.size();
    size_t take = 0;
    while (take < std::min(most, p.pending.size())) {
      int64_t n = api::OutputChunkJsonBytes(p.pending[take]);
      if (n > left) {
        api::OutputChunk& c = p.pending[take];
        const int64_t fit = c.lost > 0 ? 0 : api::OutputChunkDataFitting(left);
        if (fit <= 0) break;
        // The rest of the chunk waits for the next report.
        api::OutputChunk rest{c.task, c.fd, c.data.substr(static_cast<size_t>(fit)), 0};
        c.data.resize(static_cast<size_t>(fit));
        n = api::OutputChunkJsonBytes(c);
        p.pending.insert(p.pending.begin() + static_cast<std::ptrdiff_t>(take) + 1,
                         std::move(rest));
      }
      const api::OutputChunk& c = p.pending[take];
      left -= n;
      offer.bytes += c.size();
      offer.data = offer.data || !c.data.empty();
      r.chunks.push_back(c);
      ++take;
    }
    r.done = p.ended && take == p.pending.size() && exits == p.exits.size();
    if (r.chunks.empty() && r.exits.empty() && !r.done) break;  // no room left
    p.inflight = take;
    p.exits_inflight = exits;
    p.done_inflight = r.done;
    room = left;
    batch.push_back(std::move(r));
    offers->push_back(offer);
    if (alone != parts.end()) {
      state_->last_alone = key;
      break;
    }
  }
  return batch;
}

// Nothing of the batch was taken: the same output goes again, with whatever came
// meanwhile — unless the server refused it (400, 413: kInvalidArgument), which sending
// it again would not change. A refused batch of several parts may be one part's doing:
// each goes alone until it gets through, so that one part never blocks the others. A
// part refused alone loses the output it offered (marked lost in the step's output),
// and if its next report is refused too, it is given up: nothing of it is sent again.
void StepRunner::NotTaken(const std::vector<Offer>& offers, const Status& why,
                          int backoff_ms) {
  state_->mu.AssertHeld();
  const bool refused = why.code() == StatusCode::kInvalidArgument;
  const auto now = CondVar::Clock::now();
  for (const Offer& o : offers) {
    auto it = state_->parts.find(o.key);
    if (it == state_->parts.end()) continue;
    State::Part& p = it->second;
    const std::string step = std::to_string(o.key.job) + "." + std::to_string(o.key.step);
    const bool was_full = p.Full(options_.buffer_bytes);
    if (offers.size() > 1) {
      // A broken connection may be a refusal too (a body the server would not read).
      p.alone = true;
    } else if (!refused) {
      // Its own wait, so that others go meanwhile when the fault is this part's.
      p.resend_at = now + std::chrono::milliseconds(backoff_ms);
    } else if (o.data && !p.dropped) {
      p.dropped = true;
      int64_t bytes = 0;
      for (size_t i = 0; i < p.inflight && i < p.pending.size(); ++i) {
        api::OutputChunk& c = p.pending[i];
        if (c.lost > 0 || c.data.empty()) continue;
        c.lost = static_cast<int64_t>(c.data.size());
        bytes += c.lost;
        p.pending_bytes -= c.lost;
        std::string().swap(c.data);
      }
      std::fprintf(stderr,
                   "hachi agent: the server refused the output of step %s (%s): %lld "
                   "bytes of it dropped, marked lost in the step's output\n",
                   step.c_str(), why.message().c_str(), static_cast<long long>(bytes));
    } else {
      std::fprintf(stderr,
                   "hachi agent: the server refused the report of step %s (%s): it is "
                   "not sent again; its tasks' output is discarded from now\n",
                   step.c_str(), why.message().c_str());
      p.gone = true;  // its tasks run on, their output read and dropped (Append)
      p.pending.clear();
      p.pending_bytes = 0;
      p.exits.clear();
    }
    p.inflight = 0;
    p.exits_inflight = 0;
    p.done_inflight = false;
    if (p.gone && p.ended) {
      state_->parts.erase(it);
      state_->cv.SignalAll();
      continue;
    }
    if (was_full && !p.Full(options_.buffer_bytes))
      state_->RoomAgain(p, MonoNow(*options_.clock));
  }
}

void StepRunner::Taken(const std::vector<api::StepReport>& batch,
                       const std::vector<Offer>& offers,
                       const std::vector<api::StepAck>& acks) {
  state_->mu.AssertHeld();
  const auto now = CondVar::Clock::now();
  for (size_t b = 0; b < batch.size(); ++b) {
    const api::StepReport& r = batch[b];
    auto it = state_->parts.find(offers[b].key);
    if (it == state_->parts.end()) continue;
    State::Part& p = it->second;
    const api::StepAck* ack = nullptr;
    for (const api::StepAck& a : acks) {
      if (a.job == r.job && a.job_start == r.job_start && a.step == r.step) ack = &a;
    }
    // How far the server took the batch (all of it when it does not say).
    const int64_t offered = offers[b].bytes;
    const int64_t took =
        ack == nullptr ? offered : std::clamp<int64_t>(ack->next - r.seq, 0, offered);
    const bool was_full = p.Full(options_.buffer_bytes);
    State::Release(p, took);
    p.inflight = 0;
    p.alone = false;
    p.dropped = false;
    p.exits.erase(p.exits.begin(),
                  p.exits.begin() + static_cast<std::ptrdiff_t>(p.exits_inflight));
    p.exits_inflight = 0;
    const bool whole = took == offered;
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
    if (was_full && !p.Full(options_.buffer_bytes))
      state_->RoomAgain(p, MonoNow(*options_.clock));
    if (((p.done_inflight && whole) || p.gone) && p.ended) {
      state_->parts.erase(it);
      state_->cv.SignalAll();
    } else {
      p.done_inflight = false;
    }
  }
}

}  // namespace hachi::agent
