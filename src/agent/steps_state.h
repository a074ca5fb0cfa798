// StepRunner's insides that its two files share (steps.h): steps.cc starts, signals
// and stops the tasks; steps_io.cc reads their output and exits (the I/O thread) and
// sends them to the server (the sender thread). Internal to them.
#pragma once

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/mono_time.h"
#include "agent/steps.h"
#include "core/mutex.h"

namespace hachi::agent {

// Deadlines are points on the Clock's monotonic timeline (Options::clock; mono_time.h).
inline constexpr Mono::time_point kNever = Mono::time_point::max();
inline constexpr size_t kCoalesce =
    64 * 1024;  // a chunk grows to this before a new one starts
// How long a task's pipes are read after it exited, for a process that left its group
// and still holds them.
inline constexpr auto kDrainAfterExit = std::chrono::seconds(1);

// Writes what the terminal takes of `pending` now; the rest stays.
inline void FlushInput(int fd, std::string* pending) {
  while (!pending->empty()) {
    const ssize_t n = write(fd, pending->data(), pending->size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // EAGAIN: later, at POLLOUT
    pending->erase(0, static_cast<size_t>(n));
  }
}

inline void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

struct StepRunner::State {
  struct Task {
    int rank = 0;
    pid_t pid = -1;  // also its process group (a session of its own)
    int pidfd = -1;
    int out = -1;  // read ends of its pipes; -1 once closed (or a file)
    int err = -1;
    bool exited = false;
    Mono::time_point close_by = kNever;  // its pipes are closed by then
  };
  struct Part {
    api::StepLaunch launch;
    std::vector<Task> tasks;
    // Output not yet acknowledged; the first `inflight` chunks are in the report being
    // sent.
    std::deque<api::OutputChunk> pending;
    size_t inflight = 0;
    int64_t acked = 0;          // the offset of pending.front()
    int64_t pending_bytes = 0;  // data in `pending`: the part's share of memory
    // The server held output back (its reader is behind): the next report waits until
    // `resend_at` and offers one chunk, `resend_ms` doubling while it is refused.
    CondVar::Clock::time_point resend_at{};
    int resend_ms = 0;
    // The server refused a batch it was in: it goes alone until a report of it gets
    // through, so that a report the server cannot take blocks no other part.
    bool alone = false;
    // Refused alone, what it offered was dropped: refused again before a report of it
    // gets through, it is given up.
    bool dropped = false;
    std::vector<api::TaskExit> exits;  // not acknowledged; the first exits_inflight sent
    size_t exits_inflight = 0;
    bool done_inflight = false;
    bool ended = false;     // every task exited and its pipes are closed
    bool stopping = false;  // cancelled: SIGKILL at kill_at
    bool gone = false;      // the server ended the step: nothing more is sent
    Mono::time_point kill_at = kNever;
    int pty = -1;               // --pty: the terminal's leader (also tasks[0].out)
    std::string input_pending;  // typed, not yet taken by the terminal

    bool Unsent() const {
      if (gone) return false;
      return pending.size() > inflight || exits.size() > exits_inflight ||
             (ended && !done_inflight);
    }
    // Holds its buffer's worth: its tasks' pipes are not read until the server takes
    // some, so they wait on their writes (a part the server ended reads on, to discard).
    bool Full(int64_t bound) const { return !gone && pending_bytes >= bound; }
    bool Live() const {
      return std::any_of(tasks.begin(), tasks.end(),
                         [](const Task& t) { return !t.exited && t.pid > 0; });
    }
  };

  mutable Mutex mu;
  std::map<state::StepKey, Part> parts GUARDED_BY(mu);
  // Parts ever started here (bounded by launched_order).
  std::set<state::StepKey> launched GUARDED_BY(mu);
  std::deque<state::StepKey> launched_order GUARDED_BY(mu);
  bool stop GUARDED_BY(mu) = false;
  // The part that last went alone (Part::alone): the next such goes after it.
  std::optional<state::StepKey> last_alone GUARDED_BY(mu);
  CondVar cv{&mu};   // something to send, a part removed, stop
  int wake_fd = -1;  // eventfd for the I/O thread; constant
  // Tick(): asked and done by the I/O thread.
  uint64_t ticks_asked GUARDED_BY(mu) = 0;
  uint64_t ticks_done GUARDED_BY(mu) = 0;
  CondVar ticked{&mu};

  void Wake() const {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd, &one, sizeof one);
  }

  // Adds output of a task. Never drops: the I/O thread stops reading a part that is
  // Full, so the part's memory is its bound plus what one round of reads brought.
  void Append(Part& p, int task, int fd, const char* data, size_t n) REQUIRES(mu) {
    if (p.gone) return;
    p.pending_bytes += static_cast<int64_t>(n);
    if (p.pending.size() > p.inflight) {
      api::OutputChunk& last = p.pending.back();
      if (last.task == task && last.fd == fd && last.lost == 0 &&
          last.data.size() < kCoalesce) {
        last.data.append(data, n);
        return;
      }
    }
    p.pending.push_back(api::OutputChunk{task, fd, std::string(data, n), 0});
    cv.SignalAll();
  }
  // The server acknowledged `bytes` of the part's stream from `acked` on (a whole batch,
  // or less when it held some back): that much leaves `pending`, a chunk cut in two
  // where the server stopped.
  static void Release(Part& p, int64_t bytes) {
    p.acked += bytes;
    while (bytes > 0 && !p.pending.empty()) {
      api::OutputChunk& c = p.pending.front();
      const int64_t size = c.size();
      if (bytes < size) {
        if (c.lost > 0) {
          c.lost -= bytes;
        } else {
          c.data.erase(0, static_cast<size_t>(bytes));
          p.pending_bytes -= bytes;
        }
        return;
      }
      bytes -= size;
      p.pending_bytes -= static_cast<int64_t>(c.data.size());
      p.pending.pop_front();
    }
  }
  // The part holds less than its bound again (at `now`): the I/O thread reads its
  // pipes, and an exited task's get their drain from now (they were not read while it
  // was full).
  void RoomAgain(Part& p, Mono::time_point now) REQUIRES(mu) {
    for (Task& t : p.tasks) {
      if (t.exited) t.close_by = std::max(t.close_by, now + kDrainAfterExit);
    }
    Wake();
  }
  // A task's process ended (at `now`, on the runner's clock).
  void Exited(Part& p, Task& t, int status, Mono::time_point now) REQUIRES(mu) {
    t.exited = true;
    api::TaskExit e;
    e.task = t.rank;
    if (WIFSIGNALED(status)) {
      e.kind = p.stopping ? api::ExitKind::kCancelled : api::ExitKind::kSignaled;
      e.signal = WTERMSIG(status);
    } else {
      e.kind = api::ExitKind::kExited;
      e.exit_code = WEXITSTATUS(status);
    }
    p.exits.push_back(std::move(e));
    kill(-t.pid, SIGKILL);  // what is left of its group: the task is over
    CloseFd(&t.pidfd);
    t.close_by = now + kDrainAfterExit;
    cv.SignalAll();
  }
  // Marks the part ended once every task exited and its pipes are closed.
  void CheckEnded(Part& p) REQUIRES(mu) {
    if (p.ended) return;
    for (const Task& t : p.tasks) {
      if (!t.exited || t.out >= 0 || t.err >= 0) return;
    }
    p.ended = true;
    cv.SignalAll();
  }
};

}  // namespace hachi::agent
