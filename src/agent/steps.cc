#include "agent/steps.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <set>

#include "agent/environment.h"
#include "agent/spawn.h"
#include "api/output_paths.h"
#include "core/mutex.h"

namespace hachi::agent {
namespace {

using Mono = std::chrono::steady_clock;
constexpr Mono::time_point kNever = Mono::time_point::max();
constexpr size_t kReadSize = 64 * 1024;
constexpr size_t kCoalesce = 64 * 1024;  // a chunk grows to this before a new one starts
// How long a task's pipes are read after it exited, for a process that left its group
// and still holds them.
constexpr auto kDrainAfterExit = std::chrono::seconds(1);

// srun's -o/-e pattern for one task: %t (task), %s (step) here, the job's patterns
// (%j %x %A %a %u %N %n %%) by ExpandOutputPath; a width zero-pads as there.
std::string StepOutputPath(const std::string& pattern, const api::LaunchSpec& job,
                           int step, int rank) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      out += pattern[i];
      continue;
    }
    size_t j = i + 1;
    while (j < pattern.size() && pattern[j] >= '0' && pattern[j] <= '9') ++j;
    if (j < pattern.size() && (pattern[j] == 't' || pattern[j] == 's')) {
      const int width = j > i + 1 ? std::stoi(pattern.substr(i + 1, j - i - 1)) : 0;
      std::string n = std::to_string(pattern[j] == 't' ? rank : step);
      if (static_cast<int>(n.size()) < width) {
        n.insert(0, static_cast<size_t>(width) - n.size(), '0');
      }
      out += n;
      i = j;
      continue;
    }
    if (j < pattern.size() && pattern[j] == '%' && j == i + 1) {
      out += "%%";  // stays an escaped percent for ExpandOutputPath
      i = j;
      continue;
    }
    out += '%';
  }
  return api::ExpandOutputPath(out, job);
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

// A pseudo-terminal for a --pty task: its leader (non-blocking, for the agent) and
// follower (for the task: owned by the job's user, as login(1) leaves a terminal), with
// the window size srun gave. Errors: why.
Result<std::pair<int, int>> OpenTerminal(uid_t uid, gid_t gid, int rows, int cols) {
  const int leader = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (leader < 0) return Internal(std::string("posix_openpt: ") + strerror(errno));
  char name[128];
  if (grantpt(leader) != 0 || unlockpt(leader) != 0 ||
      ptsname_r(leader, name, sizeof name) != 0) {
    const int err = errno;
    close(leader);
    return Internal(std::string("cannot set up a terminal: ") + strerror(err));
  }
  const int follower = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (follower < 0) {
    const int err = errno;
    close(leader);
    return Internal(std::string("cannot open ") + name + ": " + strerror(err));
  }
  if (geteuid() == 0 &&
      (fchown(follower, uid, gid) != 0 || fchmod(follower, 0620) != 0)) {
    const int err = errno;
    close(leader);
    close(follower);
    return Internal(std::string("cannot give ") + name +
                    " to the job's user: " + strerror(err));
  }
  if (rows > 0 && cols > 0) {
    winsize ws{};
    ws.ws_row = static_cast<unsigned short>(rows);
    ws.ws_col = static_cast<unsigned short>(cols);
    ioctl(leader, TIOCSWINSZ, &ws);
  }
  fcntl(leader, F_SETFL, fcntl(leader, F_GETFL) | O_NONBLOCK);
  return std::make_pair(leader, follower);
}

// Writes what the terminal takes of `pending` now; the rest stays.
void FlushInput(int fd, std::string* pending) {
  while (!pending->empty()) {
    const ssize_t n = write(fd, pending->data(), pending->size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // EAGAIN: later, at POLLOUT
    pending->erase(0, static_cast<size_t>(n));
  }
}

}  // namespace

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
    // sent (never dropped meanwhile).
    std::deque<api::OutputChunk> pending;
    size_t inflight = 0;
    int64_t acked = 0;                 // the offset of pending.front()
    int64_t unsent_bytes = 0;          // data of pending past the in-flight chunks
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
  CondVar cv{&mu};   // something to send, a part removed, stop
  int wake_fd = -1;  // eventfd for the I/O thread; constant

  void Wake() const {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd, &one, sizeof one);
  }

  // Adds output of a task, dropping the oldest unsent output past the bound.
  void Append(Part& p, int task, int fd, const char* data, size_t n, int64_t bound)
      REQUIRES(mu) {
    if (p.gone) return;
    if (p.pending.size() > p.inflight) {
      api::OutputChunk& last = p.pending.back();
      if (last.task == task && last.fd == fd && last.lost == 0 &&
          last.data.size() < kCoalesce) {
        last.data.append(data, n);
        p.unsent_bytes += static_cast<int64_t>(n);
        Bound(p, bound);
        return;
      }
    }
    p.pending.push_back(api::OutputChunk{task, fd, std::string(data, n), 0});
    p.unsent_bytes += static_cast<int64_t>(n);
    Bound(p, bound);
    cv.SignalAll();
  }
  static void Bound(Part& p, int64_t bound) {
    for (size_t i = p.inflight; p.unsent_bytes > bound && i + 1 < p.pending.size(); ++i) {
      api::OutputChunk& c = p.pending[i];
      if (c.lost > 0) continue;
      c.lost = static_cast<int64_t>(c.data.size());
      p.unsent_bytes -= c.lost;
      c.data.clear();
      c.data.shrink_to_fit();
      // Neighbouring gaps of the same stream become one.
      if (i > p.inflight) {
        api::OutputChunk& prev = p.pending[i - 1];
        if (prev.lost > 0 && prev.task == c.task && prev.fd == c.fd) {
          prev.lost += c.lost;
          p.pending.erase(p.pending.begin() + static_cast<std::ptrdiff_t>(i));
          --i;
        }
      }
    }
  }
  // A task's process ended.
  void Exited(Part& p, Task& t, int status) REQUIRES(mu) {
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
    t.close_by = Mono::now() + kDrainAfterExit;
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

StepRunner::StepRunner(Options options, ContextFn context, SendFn send)
    : options_(std::move(options)),
      context_(std::move(context)),
      send_(std::move(send)),
      state_(std::make_unique<State>()) {
  state_->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  io_ = std::thread([this] { IoLoop(); });
  sender_ = std::thread([this] { SendLoop(); });
}

StepRunner::~StepRunner() {
  {
    MutexLock lock(&state_->mu);
    state_->stop = true;
    for (auto& [key, p] : state_->parts) {
      for (State::Task& t : p.tasks) {
        if (!t.exited && t.pid > 0) kill(-t.pid, SIGKILL);
      }
    }
  }
  state_->cv.SignalAll();
  state_->Wake();
  io_.join();
  sender_.join();
  for (auto& [key, p] : state_->parts) {
    for (State::Task& t : p.tasks) {
      if (!t.exited && t.pid > 0) waitpid(t.pid, nullptr, 0);
      CloseFd(&t.pidfd);
      CloseFd(&t.out);
      CloseFd(&t.err);
    }
  }
  if (state_->wake_fd >= 0) close(state_->wake_fd);
}

void StepRunner::Launch(const api::StepLaunch& l) {
  const state::StepKey key{l.job, l.job_start, l.step};
  MutexLock lock(&state_->mu);
  if (state_->stop || !state_->launched.insert(key).second) return;
  state_->launched_order.push_back(key);
  while (state_->launched_order.size() > 100000) {  // bounded memory
    state_->launched.erase(state_->launched_order.front());
    state_->launched_order.pop_front();
  }
  State::Part& p = state_->parts[key];
  p.launch = l;
  auto fail_all = [&](const std::string& why) {
    state_->mu.AssertHeld();  // called below, under the lock
    for (int rank : l.tasks) {
      p.tasks.push_back(State::Task{rank, -1, -1, -1, -1, true, kNever});
      p.exits.push_back(api::TaskExit{rank, api::ExitKind::kLaunchFailed, 0, 0, why, ""});
    }
    state_->CheckEnded(p);
    state_->cv.SignalAll();
  };
  std::optional<StepContext> ctx = context_(l.job, l.job_start);
  if (!ctx) {
    fail_all("job " + std::to_string(l.job) + " does not run on " + options_.node +
             " under this agent (it ended, is ending, or an earlier agent process " +
             "started it)");
    return;
  }
  if (!ctx->spec.spec.container_image.empty()) {
    fail_all("job steps in container jobs are not available yet");
    return;
  }
  const bool root = geteuid() == 0;
  const bool switch_user = root && ctx->spec.spec.uid != 0;
  std::vector<gid_t> groups;
  if (switch_user)
    groups = GroupsOf(ctx->spec.user, ctx->spec.spec.uid, ctx->spec.spec.gid);
  std::string workdir = l.workdir.empty() ? ctx->spec.spec.workdir : l.workdir;
  if (workdir.empty()) workdir = "/";
  if (!IsDirectory(workdir)) {
    // Slurm's stepd does the same on a node without the submit host's directory.
    const std::string note = "hachi: " + options_.node + ": couldn't chdir to `" +
                             workdir +
                             "': No such file or directory: going to /tmp instead\n";
    state_->Append(p, l.tasks.empty() ? 0 : l.tasks[0], 2, note.data(), note.size(),
                   options_.buffer_bytes);
    workdir = "/tmp";
  }
  for (size_t i = 0; i < l.tasks.size(); ++i) {
    const int rank = l.tasks[i];
    const int local = static_cast<int>(i);
    State::Task t;
    t.rank = rank;
    SpawnRequest req;
    req.argv = l.argv;
    req.env = StepEnvironment(ctx->spec, l, rank, local);
    req.workdir = workdir;
    req.switch_user = switch_user;
    req.uid = ctx->spec.spec.uid;
    req.gid = ctx->spec.spec.gid;
    req.groups = groups;
    req.setup.cgroup_procs = ctx->cgroup_procs;
    req.setup.rlimits = ctx->rlimits;  // memlock unlimited, many open files: the job's
    req.append_output = true;          // tasks of a step may share one file (no %t)
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    int follower = -1;
    std::string why;
    if (l.gpus_per_task > 0 && TaskGpus(ctx->spec, l, local).empty()) {
      why = "--gpus-per-task=" + std::to_string(l.gpus_per_task) + " for task " +
            std::to_string(rank) + ": the job has only " +
            std::to_string(ctx->spec.gpus.size()) + " GPU(s) on " + options_.node;
    }
    if (why.empty() && l.pty) {
      Result<std::pair<int, int>> term =
          OpenTerminal(ctx->spec.spec.uid, ctx->spec.spec.gid, l.rows, l.cols);
      if (term.ok()) {
        out[0] = term->first;
        follower = term->second;
        req.stdin_fd = req.stdout_fd = req.stderr_fd = follower;
        req.controlling_tty = true;
        // A terminal's programs want to know what it is.
        bool has_term = false;
        for (const auto& [k, v] : req.env) has_term = has_term || k == "TERM";
        if (!has_term) req.env.emplace_back("TERM", "xterm");
      } else {
        why = term.status().message();
      }
    } else if (why.empty()) {
      if (!l.stdout_pattern.empty()) {
        req.stdout_path = StepOutputPath(l.stdout_pattern, ctx->spec, l.step, rank);
        req.stdout_dirs = OutputDirChain(req.stdout_path);
      } else if (pipe2(out, O_CLOEXEC) == 0) {
        req.stdout_fd = out[1];
      } else {
        why = std::string("pipe: ") + strerror(errno);
      }
    }
    if (why.empty() && !l.pty) {
      if (!l.stderr_pattern.empty()) {
        req.stderr_path = StepOutputPath(l.stderr_pattern, ctx->spec, l.step, rank);
        req.stderr_dirs = OutputDirChain(req.stderr_path);
      } else if (!l.stdout_pattern.empty()) {
        req.stderr_path = req.stdout_path;  // -o alone: both streams in its file
      } else if (pipe2(err, O_CLOEXEC) == 0) {
        req.stderr_fd = err[1];
      } else {
        why = std::string("pipe: ") + strerror(errno);
      }
    }
    Result<Spawned> child = Internal("not started");
    if (why.empty()) {
      req.exec_paths = ExecCandidates(req.argv[0], req.env);
      child = Spawn(req);
      if (!child.ok()) why = child.status().message();
    }
    CloseFd(&out[1]);
    CloseFd(&err[1]);
    CloseFd(&follower);
    if (!why.empty()) {
      CloseFd(&out[0]);
      CloseFd(&err[0]);
      t.exited = true;
      p.exits.push_back(api::TaskExit{rank, api::ExitKind::kLaunchFailed, 0, 0, why, ""});
      p.tasks.push_back(t);
      continue;
    }
    t.pid = child->pid;
    t.pidfd = child->pidfd;
    t.out = out[0];
    t.err = err[0];
    for (int fd : {t.out, t.err}) {
      if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    if (l.pty) p.pty = t.out;
    p.tasks.push_back(t);
  }
  state_->CheckEnded(p);
  state_->cv.SignalAll();
  state_->Wake();
}

void StepRunner::Signal(const api::StepSignal& s) {
  MutexLock lock(&state_->mu);
  auto it = state_->parts.find({s.job, s.job_start, s.step});
  if (it == state_->parts.end()) return;
  State::Part& p = it->second;
  if (s.cancel) {
    if (p.stopping) return;
    p.stopping = true;
    p.kill_at =
        Mono::now() + std::chrono::seconds(std::max<Duration>(1, p.launch.kill_grace));
  }
  for (const State::Task& t : p.tasks) {
    if (!t.exited && t.pid > 0) kill(-t.pid, s.cancel ? SIGTERM : s.signal);
  }
  state_->Wake();
}

void StepRunner::Input(const api::StepInput& in) {
  MutexLock lock(&state_->mu);
  auto it = state_->parts.find({in.job, in.job_start, in.step});
  if (it == state_->parts.end() || it->second.pty < 0) return;
  State::Part& p = it->second;
  if (in.rows > 0 && in.cols > 0) {
    winsize ws{};
    ws.ws_row = static_cast<unsigned short>(in.rows);
    ws.ws_col = static_cast<unsigned short>(in.cols);
    ioctl(p.pty, TIOCSWINSZ, &ws);  // the terminal sends SIGWINCH to its programs
  }
  if (in.data.empty()) return;
  p.input_pending += in.data;
  if (p.input_pending.size() > (4u << 20)) {
    p.input_pending.erase(0, p.input_pending.size() - (4u << 20));  // bounded
  }
  FlushInput(p.pty, &p.input_pending);
  if (!p.input_pending.empty()) state_->Wake();  // the I/O thread waits for POLLOUT
}

void StepRunner::StopJob(state::JobId job, Duration grace) {
  MutexLock lock(&state_->mu);
  const Mono::time_point at =
      Mono::now() + std::chrono::seconds(std::max<Duration>(0, grace));
  for (auto& [key, p] : state_->parts) {
    if (key.job != job) continue;
    if (!p.stopping || at < p.kill_at) p.kill_at = at;
    p.stopping = true;
    for (const State::Task& t : p.tasks) {
      if (!t.exited && t.pid > 0) kill(-t.pid, grace > 0 ? SIGTERM : SIGKILL);
    }
  }
  state_->Wake();
}

std::vector<state::StepKey> StepRunner::Running() const {
  MutexLock lock(&state_->mu);
  std::vector<state::StepKey> keys;
  for (const auto& [key, p] : state_->parts) keys.push_back(key);
  return keys;
}

bool StepRunner::WaitIdle(int wait_ms) const {
  const auto until = CondVar::Clock::now() + std::chrono::milliseconds(wait_ms);
  MutexLock lock(&state_->mu);
  while (!state_->parts.empty()) {
    if (!state_->cv.WaitUntil(until)) return state_->parts.empty();
  }
  return true;
}

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
            fds.push_back(
                {fd, static_cast<short>(POLLIN | (out_waits ? POLLOUT : 0)), 0});
            slots.push_back({key, i, which, fd});
          }
          if (t.exited && (t.out >= 0 || t.err >= 0)) next = std::min(next, t.close_by);
        }
      }
    }
    int timeout = -1;
    if (next != kNever) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(next - Mono::now())
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
        if (waitpid(t.pid, &status, WNOHANG) == t.pid) state_->Exited(p, t, status);
        continue;
      }
      int& fd = s.which == 1 ? t.out : t.err;
      if (fd != s.fd) continue;
      if (fd == p.pty && (fds[i].revents & POLLOUT)) FlushInput(fd, &p.input_pending);
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t r = read(fd, buf.data(), buf.size());
      if (r > 0) {
        state_->Append(p, t.rank, s.which, buf.data(), static_cast<size_t>(r),
                       options_.buffer_bytes);
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        // A terminal's leader reads EIO once no one holds the follower: its end.
        if (fd == p.pty) {
          p.pty = -1;
          p.input_pending.clear();
        }
        CloseFd(&fd);
      }
    }
    const Mono::time_point now = Mono::now();
    for (auto& [key, p] : state_->parts) {
      if (p.stopping && now >= p.kill_at) {
        for (const State::Task& t : p.tasks) {
          if (!t.exited && t.pid > 0) kill(-t.pid, SIGKILL);
        }
        p.kill_at = kNever;
      }
      for (State::Task& t : p.tasks) {
        if (t.exited && now >= t.close_by) {
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
  }
}

void StepRunner::SendLoop() {
  int backoff_ms = 100;
  MutexLock lock(&state_->mu);
  for (;;) {
    while (!state_->stop &&
           std::none_of(state_->parts.begin(), state_->parts.end(),
                        [](const auto& kv) { return kv.second.Unsent(); })) {
      state_->cv.Wait();
    }
    if (state_->stop) return;
    // One report per part with something new, all of its output up to the batch bound.
    std::vector<api::StepReport> batch;
    int64_t room = options_.batch_bytes;
    for (auto& [key, p] : state_->parts) {
      if (!p.Unsent()) continue;
      api::StepReport r;
      r.job = key.job;
      r.job_start = key.job_start;
      r.step = key.step;
      r.seq = p.acked;
      size_t take = 0;
      while (take < p.pending.size() && (take == 0 || room > 0)) {
        room -= static_cast<int64_t>(p.pending[take].data.size());
        r.chunks.push_back(p.pending[take]);
        ++take;
      }
      p.inflight = take;
      for (size_t i = 0; i < take; ++i)
        p.unsent_bytes -= static_cast<int64_t>(p.pending[i].data.size());
      r.exits = p.exits;
      p.exits_inflight = p.exits.size();
      r.done = p.ended && take == p.pending.size();
      p.done_inflight = r.done;
      batch.push_back(std::move(r));
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
        for (size_t i = 0; i < p.inflight; ++i)
          p.unsent_bytes += static_cast<int64_t>(p.pending[i].data.size());
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
    for (const api::StepReport& r : batch) {
      const state::StepKey key{r.job, r.job_start, r.step};
      auto it = state_->parts.find(key);
      if (it == state_->parts.end()) continue;
      State::Part& p = it->second;
      const api::StepAck* ack = nullptr;
      for (const api::StepAck& a : *acks) {
        if (a.job == r.job && a.job_start == r.job_start && a.step == r.step) ack = &a;
      }
      for (size_t i = 0; i < p.inflight; ++i) {
        p.acked += p.pending.front().size();
        p.pending.pop_front();
      }
      p.inflight = 0;
      p.exits.erase(p.exits.begin(),
                    p.exits.begin() + static_cast<std::ptrdiff_t>(p.exits_inflight));
      p.exits_inflight = 0;
      if (ack != nullptr && ack->gone && !p.gone) {
        // The server ended the step (the job's end, a lost node): stop what runs.
        p.gone = true;
        p.pending.clear();
        p.unsent_bytes = 0;
        for (const State::Task& t : p.tasks) {
          if (!t.exited && t.pid > 0) kill(-t.pid, SIGKILL);
        }
        state_->Wake();
      }
      if ((p.done_inflight || p.gone) && p.ended) {
        state_->parts.erase(it);
        state_->cv.SignalAll();
      } else {
        p.done_inflight = false;
      }
    }
  }
}

}  // namespace hachi::agent
