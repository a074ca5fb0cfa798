#include "agent/mps.h"

#include <fcntl.h>
#include <signal.h>
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

#include "agent/spawn.h"
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

// Runs `argv` with `env` as `user` (when the agent is root and the user is not), its
// stdin from /dev/null or a pipe fed `input`, its output appended to `out` (a file of
// the agent's, created 0640 and opened here, before the switch), in a session of its
// own with default signals: the job's Spawn (spawn.h), without a cgroup or a waiter.
Result<pid_t> SpawnProcess(const std::vector<std::string>& argv,
                           const std::vector<std::string>& env, const std::string& out,
                           const MpsUser& user, const std::string& input = "",
                           bool feed = false) {
  SpawnRequest req;
  req.argv = argv;
  req.exec_paths = {argv[0]};
  for (const std::string& e : env) {
    const size_t eq = e.find('=');
    req.env.emplace_back(e.substr(0, eq),
                         eq == std::string::npos ? "" : e.substr(eq + 1));
  }
  req.workdir = "/";
  req.switch_user = geteuid() == 0 && user.uid != 0;
  req.uid = user.uid;
  req.gid = user.gid;
  req.groups = user.groups;
  req.stdout_fd = req.stderr_fd =
      open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0640);
  if (req.stdout_fd < 0) {
    return Unavailable("cannot open " + out + ": " + std::strerror(errno));
  }
  int in_pipe[2] = {-1, -1};
  if (feed && pipe2(in_pipe, O_CLOEXEC) != 0) {
    const int e = errno;
    close(req.stdout_fd);
    return Internal(std::string("pipe: ") + std::strerror(e));
  }
  req.stdin_fd = in_pipe[0];  // -1 without input: /dev/null
  Result<Spawned> child = Spawn(req);
  close(req.stdout_fd);
  if (feed) {
    close(in_pipe[0]);
    if (child.ok()) {
      // A short command into an empty pipe: never blocks.
      [[maybe_unused]] ssize_t w = write(in_pipe[1], input.data(), input.size());
    }
    close(in_pipe[1]);
  }
  if (!child.ok()) {
    return Unavailable("cannot run " + argv[0] +
                       (req.switch_user ? " as uid " + std::to_string(user.uid) : "") +
                       ": " + child.status().message());
  }
  close(child->pidfd);  // reaped by waitpid, as before
  return child->pid;
}

// Makes `path` a directory of `user`'s alone (0700): one of another owner, or anything
// but a directory, is removed first (a daemon of another user left it; its logs are not
// the new user's to read). The parent is root's, so nobody can swap the entry meanwhile.
Status OwnedDir(const std::string& path, const MpsUser& user) {
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0 && (!S_ISDIR(st.st_mode) || st.st_uid != user.uid)) {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);  // never follows a symbolic link
    if (ec) return Unavailable("cannot remove " + path + ": " + ec.message());
  }
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return Unavailable("cannot create " + path + ": " + std::strerror(errno));
  }
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Unavailable("cannot open " + path + ": " + std::strerror(errno));
  const bool ok =
      (geteuid() != 0 || fchown(fd, user.uid, user.gid) == 0) && fchmod(fd, 0700) == 0;
  const int e = errno;
  close(fd);
  if (!ok)
    return Unavailable("cannot give " + path + " to uid " + std::to_string(user.uid) +
                       ": " + std::strerror(e));
  return Status::Ok();
}

// A directory of the agent's that users may pass through but not list (0711).
void RootDir(const std::string& path) {
  MakeDirs(path);
  chmod(path.c_str(), 0711);
}

// What `path` holds from byte `offset` on, and its size, read without following a
// symbolic link or blocking on a FIFO: the file sits in the user's log directory.
std::string ReadFrom(const std::string& path, long offset, long* size) {
  *size = 0;
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st {};
  std::string data;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    *size = static_cast<long>(st.st_size);
    // Bounded: a user who fills their log gets read a MiB at a time.
    const long want = std::min<long>(std::max<long>(*size - offset, 0), 1 << 20);
    data.resize(static_cast<size_t>(want));
    const ssize_t n = want > 0 ? pread(fd, data.data(), data.size(), offset) : 0;
    data.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  close(fd);
  return data;
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
  RootDir(options_.dir);
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
  for (const auto& [gpu, d] : idle) StopDaemon(gpu, d);
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
std::string MpsDaemons::GpuDir(int gpu) const {
  return options_.dir + "/gpu" + std::to_string(gpu);
}

void MpsDaemons::AdoptLeftovers(const std::vector<state::JobId>& adopted_runs) {
  std::vector<std::pair<int, Daemon>> stale;
  {
    MutexLock lock(&mu_);
    for (size_t gpu = 0; gpu < options_.devices.size(); ++gpu) {
      const int g = static_cast<int>(gpu);
      std::ifstream in(GpuDir(g) + "/" + kPidFile);
      pid_t pid = 0;
      if (!(in >> pid) || pid <= 0 || !IsControlDaemon(pid)) continue;
      // It runs as its pipe directory's owner (StartLocked made it theirs).
      MpsUser user;
      if (struct stat st{}; lstat(PipeDir(g).c_str(), &st) == 0) {
        user.uid = st.st_uid;
        user.gid = st.st_gid;
      }
      if (adopted_runs.empty()) {
        Daemon d;
        d.pid = pid;
        d.user = user;
        d.child = false;
        stale.emplace_back(g, d);
        stopping_.insert(g);
        continue;
      }
      Daemon& d = daemons_[g];
      d.pid = pid;
      d.user = user;
      d.child = false;
      d.holders.insert(adopted_runs.begin(), adopted_runs.end());
      ReadFrom(LogDir(g) + "/control.log", 0, &d.log_offset);
    }
  }
  StopAll(stale);
}

Status MpsDaemons::StartLocked(int gpu, Daemon& d) {
  const std::string pipe = PipeDir(gpu), log = LogDir(gpu);
  RootDir(GpuDir(gpu));
  if (Status s = OwnedDir(pipe, d.user); !s.ok()) return s;
  if (Status s = OwnedDir(log, d.user); !s.ok()) return s;
  // Left from a daemon that died: the new one would take them for a running instance.
  // (unlink never follows the user's links.)
  unlink((pipe + "/control").c_str());
  unlink((pipe + "/nvidia-cuda-mps-control.pid").c_str());
  const std::string device = static_cast<size_t>(gpu) < options_.devices.size()
                                 ? options_.devices[gpu]
                                 : std::to_string(gpu);
  const std::string out = GpuDir(gpu) + "/control-daemon.out";
  Result<pid_t> pid =
      SpawnProcess({options_.control, "-f"},
                   {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "CUDA_MPS_PIPE_DIRECTORY=" + pipe, "CUDA_MPS_LOG_DIRECTORY=" + log,
                    "CUDA_VISIBLE_DEVICES=" + device},
                   out, d.user);
  if (!pid.ok()) return pid.status();
  ReadFrom(log + "/control.log", 0, &d.log_offset);
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
  std::ofstream(GpuDir(gpu) + "/" + kPidFile) << *pid << "\n";
  return Status::Ok();
}

Result<MpsClient> MpsDaemons::Acquire(int gpu, state::JobId job, const MpsUser& user) {
  MutexLock lock(&mu_);
  while (stopping_.count(gpu) != 0) cv_.Wait();
  if (auto it = daemons_.find(gpu);
      it != daemons_.end() && it->second.user.uid != user.uid) {
    return Unavailable("the MPS control daemon for GPU " + std::to_string(gpu) +
                       " serves uid " + std::to_string(it->second.user.uid) +
                       " (MPS serves one user per GPU at a time)");
  }
  Daemon& d = daemons_[gpu];
  if (d.gave_up) {
    d.holders.insert(job);  // released with the others; the daemon starts again after
    return Unavailable("the MPS control daemon for GPU " + std::to_string(gpu) +
                       " failed " + std::to_string(options_.max_restarts) +
                       " times within a minute");
  }
  if (d.pid == 0) {
    d.user = user;
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

void MpsDaemons::StopDaemon(int gpu, const Daemon& d) {
  const pid_t pid = d.pid;
  const bool child = d.child;
  // `echo quit | nvidia-cuda-mps-control`, as NVIDIA documents it, by the daemon's own
  // user; bounded, since a daemon that hangs would hang its client too.
  const std::string pipe = PipeDir(gpu);
  Result<pid_t> quit = SpawnProcess(
      {options_.control},
      {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
       "CUDA_MPS_PIPE_DIRECTORY=" + pipe, "CUDA_MPS_LOG_DIRECTORY=" + LogDir(gpu)},
      GpuDir(gpu) + "/control-daemon.out", d.user, "quit\n", /*feed=*/true);
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
  unlink((GpuDir(gpu) + "/" + kPidFile).c_str());
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
      long size = 0;
      if (const std::string fresh =
              d.pid > 0 ? ReadFrom(LogDir(gpu) + "/control.log", d.log_offset, &size)
                        : "";
          !fresh.empty()) {
        size_t at = 0;
        // A line still being written (no newline yet) waits for next time.
        for (size_t nl; (nl = fresh.find('\n', at)) != std::string::npos; at = nl + 1) {
          const std::string line = fresh.substr(at, nl - at);
          if (ToLower(line).find("fault") != std::string::npos) {
            events.emplace_back(gpu, "mps-fault",
                                "MPS server on GPU " + std::to_string(gpu) +
                                    " reported a fault; its clients (jobs " +
                                    JobList(d.holders) +
                                    ") are affected: " + std::string(Trim(line)));
          }
        }
        // A MiB without a newline is no log line of MPS's: skipped whole.
        d.log_offset +=
            static_cast<long>(at == 0 && fresh.size() >= (1u << 20) ? fresh.size() : at);
      } else if (size < d.log_offset) {
        d.log_offset = size;  // the log was cut short: read on from its end
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
