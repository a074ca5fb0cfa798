#include "agent/steps.h"

#include <errno.h>
#include <fcntl.h>
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
#include <map>
#include <set>

#include "agent/environment.h"
#include "agent/spawn.h"
#include "agent/steps_state.h"
#include "api/output_paths.h"
#include "core/mutex.h"

namespace hachi::agent {
namespace {

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

// A pseudo-terminal for a --pty task: its leader (non-blocking, for the agent) and
// follower (for the task: owned by the job's user, mode 0600 — login(1)'s 0620 lets the
// tty group write(1) to it, but the group here is the user's own, whose other members
// could then type escape sequences into the session), with the window size srun gave.
// Errors: why.
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
      (fchown(follower, uid, gid) != 0 || fchmod(follower, 0600) != 0)) {
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

// What every task of a step shares: the job's run here, the directory and user.
struct StepSetup {
  const api::StepLaunch* launch;
  const StepContext* ctx;
  std::string workdir;
  bool switch_user = false;
  std::vector<gid_t> groups;
};

// A task started (pid, pidfd, the read ends of its pipes or its terminal), or why not.
struct StartedTask {
  Spawned child;
  int out = -1;
  int err = -1;
  std::string why;
};

// The task's stdout and stderr: its --pty terminal (`*follower`, for the task), the
// -o/-e files, or pipes (`out`, `err`: read end, write end). Errors: why, as text.
std::string TaskStreams(const StepSetup& s, int rank, SpawnRequest& req, int out[2],
                        int err[2], int* follower) {
  const api::StepLaunch& l = *s.launch;
  const api::LaunchSpec& job = s.ctx->spec;
  if (l.pty) {
    Result<std::pair<int, int>> term =
        OpenTerminal(job.spec.uid, job.spec.gid, l.rows, l.cols);
    if (!term.ok()) return term.status().message();
    out[0] = term->first;
    *follower = term->second;
    req.stdin_fd = req.stdout_fd = req.stderr_fd = *follower;
    req.controlling_tty = true;
    // A terminal's programs want to know what it is.
    bool has_term = false;
    for (const auto& [k, v] : req.env) has_term = has_term || k == "TERM";
    if (!has_term) req.env.emplace_back("TERM", "xterm");
    return "";
  }
  if (!l.stdout_pattern.empty()) {
    req.stdout_path = StepOutputPath(l.stdout_pattern, job, l.step, rank);
    req.stdout_dirs = OutputDirChain(req.stdout_path);
  } else if (pipe2(out, O_CLOEXEC) == 0) {
    req.stdout_fd = out[1];
  } else {
    return std::string("pipe: ") + strerror(errno);
  }
  if (!l.stderr_pattern.empty()) {
    req.stderr_path = StepOutputPath(l.stderr_pattern, job, l.step, rank);
    req.stderr_dirs = OutputDirChain(req.stderr_path);
  } else if (!l.stdout_pattern.empty()) {
    req.stderr_path = req.stdout_path;  // -o alone: both streams in its file
  } else if (pipe2(err, O_CLOEXEC) == 0) {
    req.stderr_fd = err[1];
  } else {
    return std::string("pipe: ") + strerror(errno);
  }
  return "";
}

// Starts the task of rank `rank` (the `local`th here) in the job's cgroup, as its user.
StartedTask StartTask(const StepSetup& s, int rank, int local, const std::string& node) {
  const api::StepLaunch& l = *s.launch;
  const StepContext& ctx = *s.ctx;
  SpawnRequest req;
  req.argv = l.argv;
  req.env = StepEnvironment(ctx.spec, l, rank, local);
  // srun's umask, as it sent it (the tasks' environment drops SLURM_*); else the job's.
  req.umask = api::JobUmask(l.env);
  if (!api::HasUmask(l.env)) req.umask = api::JobUmask(ctx.spec.spec.env());
  req.workdir = s.workdir;
  // Slurm's stepd does the same on a node without the submit host's directory; tried
  // as the task's user (spawn.cc), so that the answer is the user's to know.
  req.workdir_fallback = "/tmp";
  req.workdir_note = "hachi: " + node + ": couldn't chdir to `" + s.workdir + "': ";
  req.switch_user = s.switch_user;
  req.uid = ctx.spec.spec.uid;
  req.gid = ctx.spec.spec.gid;
  req.groups = s.groups;
  req.setup.cgroup_procs = ctx.cgroup_procs;
  req.setup.rlimits = ctx.rlimits;  // memlock unlimited, many open files: the job's
  req.append_output = true;         // tasks of a step may share one file (no %t)
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  int follower = -1;
  StartedTask t;
  if (l.gpus_per_task > 0 && TaskGpus(ctx.spec, l, local).empty()) {
    t.why = "--gpus-per-task=" + std::to_string(l.gpus_per_task) + " for task " +
            std::to_string(rank) + ": the job has only " +
            std::to_string(ctx.spec.gpus.size()) + " GPU(s) on " + node;
  }
  if (t.why.empty()) t.why = TaskStreams(s, rank, req, out, err, &follower);
  if (t.why.empty()) {
    req.exec_paths = ExecCandidates(req.argv[0], req.env);
    Result<Spawned> child = Spawn(req);
    if (child.ok()) {
      t.child = *child;
    } else {
      t.why = child.status().message();
    }
  }
  CloseFd(&out[1]);
  CloseFd(&err[1]);
  CloseFd(&follower);
  if (!t.why.empty()) {
    CloseFd(&out[0]);
    CloseFd(&err[0]);
    return t;
  }
  t.out = out[0];
  t.err = err[0];
  for (int fd : {t.out, t.err}) {
    if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return t;
}

}  // namespace

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
  StepSetup setup;
  setup.launch = &l;
  setup.ctx = &*ctx;
  setup.switch_user = geteuid() == 0 && ctx->spec.spec.uid != 0;
  if (setup.switch_user) {
    setup.groups = GroupsOf(ctx->spec.user, ctx->spec.spec.uid, ctx->spec.spec.gid);
  }
  setup.workdir = l.workdir.empty() ? ctx->spec.spec.workdir : l.workdir;
  if (setup.workdir.empty()) setup.workdir = "/";
  for (size_t i = 0; i < l.tasks.size(); ++i) {
    const int rank = l.tasks[i];
    StartedTask started = StartTask(setup, rank, static_cast<int>(i), options_.node);
    State::Task t;
    t.rank = rank;
    if (!started.why.empty()) {
      t.exited = true;
      p.exits.push_back(
          api::TaskExit{rank, api::ExitKind::kLaunchFailed, 0, 0, started.why, ""});
      p.tasks.push_back(t);
      continue;
    }
    t.pid = started.child.pid;
    t.pidfd = started.child.pidfd;
    t.out = started.out;
    t.err = started.err;
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
    p.kill_at = MonoNow(*options_.clock) +
                std::chrono::seconds(std::max<Duration>(1, p.launch.kill_grace));
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

void StepRunner::SignalJob(state::JobId job, int sig) {
  MutexLock lock(&state_->mu);
  for (const auto& [key, p] : state_->parts) {
    if (key.job != job || p.stopping) continue;
    for (const State::Task& t : p.tasks) {
      if (!t.exited && t.pid > 0) kill(-t.pid, sig);
    }
  }
}

void StepRunner::StopJob(state::JobId job, Duration grace) {
  MutexLock lock(&state_->mu);
  const Mono::time_point at =
      MonoNow(*options_.clock) + std::chrono::seconds(std::max<Duration>(0, grace));
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

void StepRunner::Tick() {
  State& s = *state_;
  MutexLock lock(&s.mu);
  AskRoundAndWait(s);
}

}  // namespace hachi::agent
