#include "agent/mps.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "core/strings.h"

extern char** environ;

namespace hachi::agent {
namespace {

constexpr const char* kControlName = "nvidia-cuda-mps-control";
constexpr const char* kPidFile = "hachi-mps.pid";  // in <dir>/gpu<N>: the agent's record

// How long a real process takes (a daemon making its pipe, exiting) is bounded in real
// time: a FakeClock nobody moves must not make the agent wait on it for ever.
int64_t RealMs() { return RealClock()->MonotonicMs(); }

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

void MakeDirs(const std::string& path) {
  std::error_code ec;  // a directory that cannot be made fails the daemon's start
  std::filesystem::create_directories(path, ec);
}

std::string LastLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!Trim(line).empty()) last = line;
  }
  return std::string(Trim(last));
}

// Whether `pid` still is a control daemon (an earlier agent's, by its pid file): the
// kernel's comm of "nvidia-cuda-mps-control" is its first 15 bytes.
bool IsControlDaemon(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string comm;
  std::getline(in, comm);
  return !comm.empty() && std::string(kControlName).rfind(comm, 0) == 0;
}

// Runs `argv` with `env`, its stdin from /dev/null or a pipe fed `input`, its output
// appended to `out` (created 0644), in a session of its own with default signals.
Result<pid_t> SpawnProcess(const std::vector<std::string>& argv,
                           const std::vector<std::string>& env, const std::string& out,
                           const std::string& input = "", bool feed = false) {
  int in_pipe[2] = {-1, -1};
  if (feed && pipe2(in_pipe, O_CLOEXEC) != 0) {
    return Internal(std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (feed) {
    posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
  } else {
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);  // the agent blocks its stop signals
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(
      &attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int err =
      posix_spawn(&pid, argv[0].c_str(), &fa, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (feed) {
    close(in_pipe[0]);
    if (err == 0) {
      // A short command into an empty pipe: never blocks.
      [[maybe_unused]] ssize_t w = write(in_pipe[1], input.data(), input.size());
    }
    close(in_pipe[1]);
  }
  if (err != 0) return Unavailable("cannot run " + argv[0] + ": " + std::strerror(err));
  return pid;
}

// Whether `pid`, an earlier agent process's daemon, has ended. Reaped when it is a
// child after all (a test's, or an agent embedded in the process that started it),
// since a zombie still answers kill(pid, 0).
bool GoneNotOurs(pid_t pid) {
  if (waitpid(pid, nullptr, WNOHANG) == pid) return true;
  return kill(pid, 0) != 0 && errno == ESRCH;
}

// Waits up to `ms` for `pid` to end: reaped when it is our child, else probed.
bool WaitGone(pid_t pid, bool child, int ms) {
  const int64_t until = RealMs() + ms;
  for (;;) {
    if (child) {
      const pid_t r = waitpid(pid, nullptr, WNOHANG);
      if (r == pid || (r < 0 && errno == ECHILD)) return true;
    } else if (GoneNotOurs(pid)) {
      return true;
    }
    if (RealMs() >= until) return false;
    SleepMs(20);
  }
}

}  // namespace

bool PreVoltaModel(const std::string& model) {
  const std::string m = ToLower(model);
  for (const char* family :
       {"tesla k", "tesla m", "tesla p", "quadro k", "quadro m", "quadro p", "gtx 9",
        "gtx 10", "titan x", "grid k", "grid m"}) {
    if (m.find(family) != std::string::npos) return true;
  }
  return false;
}

std::string MpsUnavailable(const std::string& mode, const std::string& control,
                           bool simulated, const std::vector<std::string>& models,
                           std::string* resolved) {
  if (mode == "off") return "off (--mps off)";
  if (mode == "auto" && simulated) return "simulated GPUs (--mps on to use it anyway)";
  const std::string name = control.empty() ? kControlName : control;
  std::string path;
  if (name.find('/') != std::string::npos) {
    if (access(name.c_str(), X_OK) != 0) return "cannot run " + name;
    path = name;
  } else {
    const char* env_path = std::getenv("PATH");
    for (std::string_view dir :
         Split(env_path != nullptr ? env_path : "/usr/sbin:/usr/bin:/sbin:/bin", ':')) {
      const std::string p = (dir.empty() ? "." : std::string(dir)) + "/" + name;
      if (access(p.c_str(), X_OK) == 0) {
        path = p;
        break;
      }
    }
    if (path.empty()) return "no " + name + " in PATH";
  }
  for (const std::string& model : models) {
    if (PreVoltaModel(model)) {
      return model + ": MPS per-client memory limits need Volta or newer";
    }
  }
  if (resolved != nullptr) *resolved = path;
  return "";
}

namespace {
MpsOptions WithClock(MpsOptions o) {
  if (o.clock == nullptr) o.clock = RealClock();
  return o;
}
}  // namespace

MpsDaemons::MpsDaemons(MpsOptions options) : options_(WithClock(std::move(options))) {
  MakeDirs(options_.dir);
  watcher_ = std::thread([this] { Watch(); });
}

MpsDaemons::~MpsDaemons() {
  std::vector<std::pair<int, Daemon>> idle;
  {
    MutexLock lock(&mu_);
    stop_ = true;
    idle.swap(idle_);
    for (auto it = daemons_.begin(); it != daemons_.end();) {
      if (it->second.holders.empty()) {
        if (it->second.pid > 0) {
          idle.emplace_back(it->first, it->second);
          stopping_.insert(it->first);
        }
        it = daemons_.erase(it);
      } else {
        ++it;
      }
    }
  }
  cv_.SignalAll();
  watcher_.join();
  StopAll(idle);
}

void MpsDaemons::StopAll(const std::vector<std::pair<int, Daemon>>& idle) {
  for (const auto& [gpu, d] : idle) StopDaemon(gpu, d.pid, d.child);
  if (idle.empty()) return;
  {
    MutexLock lock(&mu_);
    for (const auto& [gpu, d] : idle) stopping_.erase(gpu);
  }
  cv_.SignalAll();
}

std::string MpsDaemons::PipeDir(int gpu) const {
  return options_.dir + "/gpu" + std::to_string(gpu) + "/pipe";
}
std::string MpsDaemons::LogDir(int gpu) const {
  return options_.dir + "/gpu" + std::to_string(gpu) + "/log";
}

void MpsDaemons::AdoptLeftovers(const std::vector<state::JobId>& adopted_runs) {
  std::vector<std::pair<int, Daemon>> stale;
  {
    MutexLock lock(&mu_);
    for (size_t gpu = 0; gpu < options_.devices.size(); ++gpu) {
      const int g = static_cast<int>(gpu);
      std::ifstream in(options_.dir + "/gpu" + std::to_string(g) + "/" + kPidFile);
      pid_t pid = 0;
      if (!(in >> pid) || pid <= 0 || !IsControlDaemon(pid)) continue;
      if (adopted_runs.empty()) {
        Daemon d;
        d.pid = pid;
        d.child = false;
        stale.emplace_back(g, d);
        stopping_.insert(g);
        continue;
      }
      Daemon& d = daemons_[g];
      d.pid = pid;
      d.child = false;
      d.holders.insert(adopted_runs.begin(), adopted_runs.end());
      std::ifstream log(LogDir(g) + "/control.log", std::ios::ate);
      d.log_offset = log ? static_cast<long>(log.tellg()) : 0;
    }
  }
  StopAll(stale);
}

Status MpsDaemons::StartLocked(int gpu, Daemon& d) {
  const std::string pipe = PipeDir(gpu), log = LogDir(gpu);
  MakeDirs(pipe);
  MakeDirs(log);
  // Left from a daemon that died: the new one would take them for a running instance.
  unlink((pipe + "/control").c_str());
  unlink((pipe + "/nvidia-cuda-mps-control.pid").c_str());
  const std::string device = static_cast<size_t>(gpu) < options_.devices.size()
                                 ? options_.devices[gpu]
                                 : std::to_string(gpu);
  const std::string out = log + "/control-daemon.out";
  Result<pid_t> pid =
      SpawnProcess({options_.control, "-f"},
                   {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "CUDA_MPS_PIPE_DIRECTORY=" + pipe, "CUDA_MPS_LOG_DIRECTORY=" + log,
                    "CUDA_VISIBLE_DEVICES=" + device},
                   out);
  if (!pid.ok()) return pid.status();
  std::ifstream existing(log + "/control.log", std::ios::ate);
  d.log_offset = existing ? static_cast<long>(existing.tellg()) : 0;
  const int64_t until = RealMs() + options_.start_wait_ms;
  while (!Exists(pipe + "/control")) {
    if (waitpid(*pid, nullptr, WNOHANG) == *pid) {
      std::string why = LastLine(out);
      return Unavailable("the MPS control daemon for GPU " + std::to_string(gpu) +
                         " exited at start" + (why.empty() ? "" : ": " + why));
    }
    if (RealMs() >= until) {
      kill(*pid, SIGKILL);
      waitpid(*pid, nullptr, 0);
      return Unavailable("the MPS control daemon for GPU " + std::to_string(gpu) +
                         " made no control pipe in " +
                         std::to_string(options_.start_wait_ms / 1000) + " s");
    }
    SleepMs(10);
  }
  d.pid = *pid;
  d.child = true;
  std::ofstream(options_.dir + "/gpu" + std::to_string(gpu) + "/" + kPidFile)
      << *pid << "\n";
  return Status::Ok();
}

Result<MpsClient> MpsDaemons::Acquire(int gpu, state::JobId job) {
  MutexLock lock(&mu_);
  while (stopping_.count(gpu) != 0) cv_.Wait();
  Daemon& d = daemons_[gpu];
  if (d.gave_up) {
    d.holders.insert(job);  // released with the others; the daemon starts again after
    return Unavailable("the MPS control daemon for GPU " + std::to_string(gpu) +
                       " failed " + std::to_string(options_.max_restarts) +
                       " times within a minute");
  }
  if (d.pid == 0) {
    Status s = StartLocked(gpu, d);
    if (!s.ok()) {
      if (d.holders.empty()) daemons_.erase(gpu);
      return s;
    }
  }
  d.holders.insert(job);
  MpsClient c;
  c.pipe_dir = PipeDir(gpu);
  c.log_dir = LogDir(gpu);
  const std::string device =
      static_cast<size_t>(gpu) < options_.devices.size() ? options_.devices[gpu] : "";
  c.device = StartsWith(device, "GPU-") ? device : "0";
  return c;
}

void MpsDaemons::Release(state::JobId job) {
  MutexLock lock(&mu_);
  for (auto it = daemons_.begin(); it != daemons_.end();) {
    Daemon& d = it->second;
    if (d.holders.erase(job) > 0 && d.holders.empty()) {
      if (d.pid > 0) {
        idle_.emplace_back(it->first, d);
        stopping_.insert(it->first);
      }
      it = daemons_.erase(it);
    } else {
      ++it;
    }
  }
  if (!idle_.empty()) cv_.SignalAll();
}

void MpsDaemons::StopDaemon(int gpu, pid_t pid, bool child) {
  // `echo quit | nvidia-cuda-mps-control`, as NVIDIA documents it; bounded, since a
  // daemon that hangs would hang its client too.
  const std::string pipe = PipeDir(gpu);
  Result<pid_t> quit = SpawnProcess(
      {options_.control},
      {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
       "CUDA_MPS_PIPE_DIRECTORY=" + pipe, "CUDA_MPS_LOG_DIRECTORY=" + LogDir(gpu)},
      LogDir(gpu) + "/control-daemon.out", "quit\n", /*feed=*/true);
  if (quit.ok() && !WaitGone(*quit, true, options_.stop_wait_ms)) {
    kill(*quit, SIGKILL);
    waitpid(*quit, nullptr, 0);
  }
  if (!WaitGone(pid, child, options_.stop_wait_ms)) {
    kill(pid, SIGTERM);
    if (!WaitGone(pid, child, options_.stop_wait_ms)) {
      kill(pid, SIGKILL);
      WaitGone(pid, child, options_.stop_wait_ms);
    }
  }
  unlink((options_.dir + "/gpu" + std::to_string(gpu) + "/" + kPidFile).c_str());
}

std::vector<int> MpsDaemons::Serving() const {
  MutexLock lock(&mu_);
  std::vector<int> out;
  for (const auto& [gpu, d] : daemons_) {
    if (d.pid > 0) out.push_back(gpu);
  }
  return out;
}

pid_t MpsDaemons::DaemonPid(int gpu) const {
  MutexLock lock(&mu_);
  auto it = daemons_.find(gpu);
  return it == daemons_.end() ? 0 : it->second.pid;
}

void MpsDaemons::Event(int gpu, const std::string& kind, const std::string& message) {
  if (options_.on_event) options_.on_event(gpu, kind, message);
}

namespace {

std::string JobList(const std::set<state::JobId>& jobs) {
  std::string s;
  for (state::JobId j : jobs) s += (s.empty() ? "" : ", ") + std::to_string(j);
  return s;
}

}  // namespace

void MpsDaemons::Watch() {
  MutexLock lock(&mu_);
  while (!stop_) {
    if (idle_.empty()) cv_.WaitFor(std::chrono::milliseconds(options_.check_interval_ms));
    if (stop_) break;
    if (!idle_.empty()) {
      std::vector<std::pair<int, Daemon>> idle;
      idle.swap(idle_);
      lock.Unlock();
      StopAll(idle);
      lock.Lock();
      continue;
    }
    std::vector<std::tuple<int, std::string, std::string>> events;
    const int64_t now = options_.clock->MonotonicMs();
    for (auto it = daemons_.begin(); it != daemons_.end();) {
      const int gpu = it->first;
      Daemon& d = it->second;
      // A server fault (a client's illegal access, say) ends every client of that
      // server: the share's neighbours are hit, and should be told why.
      if (std::ifstream log(LogDir(gpu) + "/control.log"); log && d.pid > 0) {
        log.seekg(d.log_offset);
        std::string line;
        while (std::getline(log, line)) {
          if (log.eof()) break;  // a line still being written: next time
          d.log_offset = static_cast<long>(log.tellg());
          if (ToLower(line).find("fault") != std::string::npos) {
            events.emplace_back(gpu, "mps-fault",
                                "MPS server on GPU " + std::to_string(gpu) +
                                    " reported a fault; its clients (jobs " +
                                    JobList(d.holders) +
                                    ") are affected: " + std::string(Trim(line)));
          }
        }
      }
      if (d.pid == 0) {
        ++it;
        continue;
      }
      int status = 0;
      bool dead = false;
      if (d.child) {
        const pid_t r = waitpid(d.pid, &status, WNOHANG);
        dead = r == d.pid || (r < 0 && errno == ECHILD);
      } else {
        dead = GoneNotOurs(d.pid);
      }
      if (!dead) {
        ++it;
        continue;
      }
      std::string how = !d.child ? "exited"
                        : WIFSIGNALED(status)
                            ? "was killed by signal " + std::to_string(WTERMSIG(status))
                            : "exited with status " + std::to_string(WEXITSTATUS(status));
      d.pid = 0;
      if (d.holders.empty()) {
        it = daemons_.erase(it);
        continue;
      }
      std::erase_if(d.deaths_ms, [now](int64_t t) { return now - t > 60000; });
      d.deaths_ms.push_back(now);
      std::string msg = "MPS control daemon for GPU " + std::to_string(gpu) + " " + how +
                        " while serving jobs " + JobList(d.holders);
      if (static_cast<int>(d.deaths_ms.size()) >= options_.max_restarts) {
        d.gave_up = true;
        events.emplace_back(gpu, "mps-failed",
                            msg + "; it died " + std::to_string(d.deaths_ms.size()) +
                                " times within a minute: not started again until its "
                                "shares are gone");
      } else if (Status s = StartLocked(gpu, d); s.ok()) {
        events.emplace_back(gpu, "mps-died", msg + "; restarted");
      } else {
        events.emplace_back(gpu, "mps-died", msg + "; restart failed: " + s.message());
      }
      ++it;
    }
    if (events.empty()) continue;
    lock.Unlock();
    for (const auto& [gpu, kind, message] : events) Event(gpu, kind, message);
    lock.Lock();
  }
}

}  // namespace hachi::agent
