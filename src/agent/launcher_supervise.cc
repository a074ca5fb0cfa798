// ProcessLauncher's supervisor thread (launcher.h): one poll() over every run's pidfd,
// the signals, time limits and kills that fall due, and each run's end reported.
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "agent/launcher_state.h"
#include "agent/waiter.h"

namespace hachi::agent {

void ProcessLauncher::Supervise() {
  State& s = *state_;
  Watch w;
  for (;;) {
    if (!NextRound(w)) return;
    for (const auto& [job, sig] : w.step_signals) {
      if (options_.signal_steps) options_.signal_steps(job, sig);
    }
    if (!w.deliver.empty()) {
      for (const api::JobExit& e : w.deliver) on_exit_(e);
      continue;  // the callbacks may have launched or cancelled: look again
    }
    w.fds.push_back({s.wake_fd, POLLIN, 0});
    if (poll(w.fds.data(), w.fds.size(), w.timeout_ms) < 0 && errno != EINTR) {
      // Cannot happen with valid fds; do not spin if it does.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (w.fds.back().revents) {
      uint64_t n;
      [[maybe_unused]] ssize_t r = read(s.wake_fd, &n, sizeof n);
    }
    MutexLock lock(&s.mu);
    for (size_t i = 0; i + 1 < w.fds.size(); ++i) {
      if (w.fds[i].revents) EndRunLocked(w.ids[i]);
    }
  }
}

// Under the lock: what fell due is done (--signal, the time limit's SIGTERM, the grace's
// SIGKILL), then `w` says what to watch, until when, and which exits to deliver first.
// False once shutting down with nothing left to finish.
bool ProcessLauncher::NextRound(Watch& w) {
  State& s = *state_;
  w.deliver.clear();
  w.step_signals.clear();
  w.timeout_ms = -1;
  w.fds.clear();
  w.ids.clear();
  MutexLock lock(&s.mu);
  // Shutting down: finish what is being stopped (bounded by the kill grace) and
  // report it; leave the other jobs running.
  if (s.stop && s.reports.empty() &&
      std::none_of(s.jobs.begin(), s.jobs.end(),
                   [](const auto& kv) { return kv.second.kill_at != kNoDeadline; })) {
    return false;
  }
  w.deliver.swap(s.reports);
  const Mono::time_point now = MonoNow(*options_.clock);
  Mono::time_point next = kNoDeadline;
  for (auto& [id, job] : s.jobs) {
    if (s.stop && job.kill_at == kNoDeadline) continue;  // left running
    if (job.kill_at == kNoDeadline && job.signal_at <= now) {
      if (job.record.scope == api::SignalScope::kSteps) {
        w.step_signals.emplace_back(id, job.record.signal);  // the StepRunner's
      } else {
        State::SendSignal(job, job.record.signal,
                          job.record.scope == api::SignalScope::kBatch);
      }
      job.signal_at = kNoDeadline;
      job.record.signaled = true;
      WriteRunRecord(options_.spool_dir, job.record);
    }
    if (job.kill_at == kNoDeadline && job.deadline <= now) {
      State::BeginStop(job, api::ExitKind::kTimeLimit, now);
    }
    if (!job.killed && job.kill_at <= now) {
      kill(-job.pid, SIGKILL);
      job.killed = true;
    }
    if (job.kill_at == kNoDeadline) next = std::min({next, job.deadline, job.signal_at});
    if (!job.killed) next = std::min(next, job.kill_at);
    w.fds.push_back({job.pidfd, POLLIN, 0});
    w.ids.push_back(id);
  }
  if (s.ticks_done != s.ticks_asked) {  // what was due is done: Tick() returns
    s.ticks_done = s.ticks_asked;
    s.ticked.SignalAll();
  }
  if (next != kNoDeadline) {
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
    w.timeout_ms = static_cast<int>(std::clamp<int64_t>(ms, 0, 60'000));
  }
  return true;
}

bool ApplyWaitedStatus(const WaitedStatus& w, const std::string& node, api::JobExit* e) {
  e->kind = w.signaled ? api::ExitKind::kSignaled : api::ExitKind::kExited;
  (w.signaled ? e->signal : e->exit_code) = w.code;
  if (w.lease_silent_ms < 0) return false;
  // As after a node failure: the server requeues it or ends it NODE_FAIL.
  e->kind = api::ExitKind::kLost;
  e->message = "lease expired: its agent on " + (node.empty() ? "this node" : node) +
               " was gone for " + std::to_string(w.lease_silent_ms / 1000) +
               " s; its job waiter stopped it";
  return true;
}

// The run of `id` ended (its pidfd is readable): its exit status, reaped (or read from
// its waiter's exit file when adopted), its leftovers killed with its cgroup, its files
// removed and its exit queued for delivery. Under the lock.
void ProcessLauncher::EndRunLocked(JobId id) {
  State& s = *state_;
  // The lock is State's, which launcher.h cannot name: Supervise holds it.
  s.mu.AssertHeld();
  auto it = s.jobs.find(id);
  if (it == s.jobs.end()) return;
  Run& job = it->second;
  api::JobExit e;
  e.job = it->first;
  e.start_time = it->second.start_time;
  const std::string exit_path = ExitFilePath(options_.spool_dir, it->first);
  bool lease_stopped = false;  // by its waiter: lost, whatever else is true of it
  if (job.adopted) {
    // Not our child (init reaped it): its waiter's exit file tells how the job ended.
    // The group may have lost its leader; a live member keeps the id from reuse.
    kill(-job.pid, SIGKILL);
    if (std::optional<WaitedStatus> w = ReadWaitedStatus(exit_path)) {
      lease_stopped = ApplyWaitedStatus(*w, options_.node, &e);
    } else if (job.stop == api::ExitKind::kExited) {
      e.kind = api::ExitKind::kLost;
      e.message = "the job's waiter was killed before its job ended";
    }
  } else {
    siginfo_t info{};
    if (waitid(P_PID, job.pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == 0) {
      return;  // not exited after all
    }
    // The leader is a zombie until reaped, so its group id is still ours: clear out
    // what is left of the job before the id can be reused.
    kill(-job.pid, SIGKILL);
    int status = 0;
    pid_t r;
    do {
      r = waitpid(job.pid, &status, 0);
    } while (r < 0 && errno == EINTR);
    if (r > 0 && WIFSIGNALED(status)) {
      e.kind = api::ExitKind::kSignaled;
      e.signal = WTERMSIG(status);
    } else if (r > 0) {
      e.exit_code = WEXITSTATUS(status);
    }
    // Its waiter may have stopped it on the lease while this agent was cut off (and then
    // went with the job's group): the exit file says so, and the job's own status.
    if (job.waiter && options_.lease_file) {
      std::optional<WaitedStatus> w = ReadWaitedStatus(exit_path);
      if (w && w->lease_silent_ms >= 0) {
        lease_stopped = ApplyWaitedStatus(*w, options_.node, &e);
      }
    }
  }
  // Whatever is left of the job, in or out of its session, dies with its cgroup.
  const std::string oom = isolation_->Finish(job.iso);
  e.end_time = options_.clock->Now();
  if (job.stop != api::ExitKind::kExited) {
    e.kind = job.stop;
    e.message = job.stop_message;
  } else if (!oom.empty() && !lease_stopped) {
    e.kind = api::ExitKind::kOutOfMemory;
    e.message = oom;
  }
  close(job.pidfd);
  if (!job.script.empty()) unlink(job.script.c_str());
  if (job.waiter) unlink(exit_path.c_str());
  unlink(RunRecordPath(options_.spool_dir, it->first).c_str());
  s.jobs.erase(it);
  s.reports.push_back(std::move(e));
}

}  // namespace hachi::agent
