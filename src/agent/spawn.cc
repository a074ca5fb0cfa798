#include "agent/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>
#include <utility>

#include "agent/waiter.h"

namespace hachi::agent {
namespace {

using Step = SpawnStep;
using ChildError = SpawnError;

[[noreturn]] void Fail(int fd, Step step, int err) {
  ChildError e{step, err};
  // Nothing more to do if the pipe is gone: the parent then sees exit status 127.
  [[maybe_unused]] ssize_t n = write(fd, &e, sizeof e);
  _exit(127);
}

// Opens an output file for appending (truncated first unless `append`) without
// blocking on a FIFO that has no reader. A missing directory above it: `dirs`
// (OutputDirChain) are created, as whoever the child is by now, and it tries again;
// -1 with errno set and *dir_failed when a directory could not be made.
int OpenOutput(const char* path, bool append, const std::vector<std::string>& dirs,
               bool* dir_failed) {
  const int flags =
      O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK | O_NOCTTY | (append ? 0 : O_TRUNC);
  int fd = open(path, flags, 0644);
  if (fd < 0 && errno == ENOENT && !dirs.empty()) {
    for (const std::string& d : dirs) {
      if (mkdir(d.c_str(), 0755) < 0 && errno != EEXIST) {
        *dir_failed = true;
        return -1;
      }
    }
    fd = open(path, flags, 0644);
  }
  if (fd >= 0) fcntl(fd, F_SETFL, O_APPEND);
  return fd;
}

bool MoveTo(int fd, int target) {
  if (fd == target) return true;
  if (dup2(fd, target) < 0) return false;
  close(fd);
  return true;
}

// The job's isolation (SpawnRequest::Setup), the child's first steps, as root.
void ApplySetup(int err_fd, const SpawnRequest::Setup& s) {
  for (const std::string& procs : s.cgroup_procs) {
    const int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0 || write(fd, "0", 1) != 1) Fail(err_fd, Step::kCgroup, errno);
    close(fd);
  }
  for (const SpawnRequest::Setup::Limit& l : s.rlimits) {
    if (syscall(SYS_prlimit64, 0, l.resource, &l.value, nullptr) < 0 &&
        (errno != EPERM ||
         syscall(SYS_prlimit64, 0, l.resource, &l.fallback, nullptr) < 0))
      Fail(err_fd, Step::kRlimit, errno);
  }
  if (s.shm_options.empty()) return;
  // Slave, not private: mounts the host makes later (NFS, a new disk) still reach the
  // job, and the job's tmpfs never reaches the host.
  if (unshare(CLONE_NEWNS) < 0 ||
      mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) < 0)
    Fail(err_fd, Step::kMountNamespace, errno);
  if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, s.shm_options.c_str()) <
      0)
    Fail(err_fd, Step::kShm, errno);
}

void WriteAll(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = write(fd, s.data(), s.size());
    if (n <= 0) return;
    s.remove_prefix(static_cast<size_t>(n));
  }
}

// chdir to the workdir as the job's user (the child's by now); a step's task goes to
// its fallback instead, saying why on its stderr. strerror is not async-signal-safe:
// the reasons the kernel gives for a chdir, spelt out.
void EnterWorkdir(int err_fd, const SpawnRequest& req) {
  if (chdir(req.workdir.c_str()) == 0) return;
  const int e = errno;
  if (req.workdir_fallback.empty()) Fail(err_fd, Step::kChdir, e);
  static constexpr std::pair<int, std::string_view> kReasons[] = {
      {ENOENT, "No such file or directory"},
      {EACCES, "Permission denied"},
      {ENOTDIR, "Not a directory"},
      {ELOOP, "Too many levels of symbolic links"},
      {ENAMETOOLONG, "File name too long"}};
  std::string_view reason = "cannot enter it";
  for (const auto& [code, text] : kReasons) {
    if (code == e) reason = text;
  }
  WriteAll(2, req.workdir_note);
  WriteAll(2, reason);
  WriteAll(2, ": going to ");
  WriteAll(2, req.workdir_fallback);
  WriteAll(2, " instead\n");
  if (chdir(req.workdir_fallback.c_str()) < 0) Fail(err_fd, Step::kChdir, errno);
}

// The child between fork and exec: async-signal-safe calls and raw syscalls only
// (glibc's setuid() would try to synchronise threads that do not exist here).
[[noreturn]] void Child(int err_fd, const SpawnRequest& req, char* const argv[],
                        char* const envp[], const std::vector<const char*>& paths,
                        char** sh_argv, char* const waiter_argv[]) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // EINVAL: fine
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  ApplySetup(err_fd, req.setup);
  if (setsid() < 0) Fail(err_fd, Step::kSetsid, errno);
  if (req.switch_user) {
    if (syscall(SYS_setgroups, req.groups.size(), req.groups.data()) < 0) {
      Fail(err_fd, Step::kGroups, errno);
    }
    if (syscall(SYS_setresgid, req.gid, req.gid, req.gid) < 0)
      Fail(err_fd, Step::kGid, errno);
    if (syscall(SYS_setresuid, req.uid, req.uid, req.uid) < 0)
      Fail(err_fd, Step::kUid, errno);
  }
  umask(req.umask);
  if (req.stdin_fd >= 0) {
    if (dup2(req.stdin_fd, 0) < 0) Fail(err_fd, Step::kStdin, errno);
  } else {
    int in = open("/dev/null", O_RDONLY | O_NOCTTY);
    if (in < 0 || !MoveTo(in, 0)) Fail(err_fd, Step::kStdin, errno);
  }
  if (req.controlling_tty && ioctl(0, TIOCSCTTY, 0) < 0)
    Fail(err_fd, Step::kStdin, errno);
  bool dir_failed = false;
  if (req.stdout_fd >= 0) {
    if (dup2(req.stdout_fd, 1) < 0) Fail(err_fd, Step::kStdout, errno);
  } else {
    int out = OpenOutput(req.stdout_path.c_str(), req.append_output, req.stdout_dirs,
                         &dir_failed);
    if (out < 0 && dir_failed) Fail(err_fd, Step::kStdoutDir, errno);
    if (out < 0 || !MoveTo(out, 1)) Fail(err_fd, Step::kStdout, errno);
  }
  if (req.stderr_fd >= 0) {
    if (dup2(req.stderr_fd, 2) < 0) Fail(err_fd, Step::kStderr, errno);
  } else if (req.stderr_path == req.stdout_path) {
    if (dup2(1, 2) < 0) Fail(err_fd, Step::kStderr, errno);
  } else {
    int err = OpenOutput(req.stderr_path.c_str(), req.append_output, req.stderr_dirs,
                         &dir_failed);
    if (err < 0 && dir_failed) Fail(err_fd, Step::kStderrDir, errno);
    if (err < 0 || !MoveTo(err, 2)) Fail(err_fd, Step::kStderr, errno);
  }
  // After the output is set up (its paths are absolute), so that a step's note on
  // falling back goes to the task's stderr.
  EnterWorkdir(err_fd, req);
  // Whatever else the agent has open (sockets, the database) must not leak into jobs.
  syscall(SYS_close_range, 3U, ~0U, 4U /* CLOSE_RANGE_CLOEXEC */);

  if (waiter_argv != nullptr) {
    // The waiter inherits the error pipe (for its job's exec), the exit file and the
    // lease file; it searches the job's paths itself.
    if (fcntl(err_fd, F_SETFD, 0) < 0 || fcntl(req.exit_fd, F_SETFD, 0) < 0 ||
        (req.lease_fd >= 0 && fcntl(req.lease_fd, F_SETFD, 0) < 0)) {
      Fail(err_fd, Step::kWaiter, errno);
    }
    execve(req.waiter.c_str(), waiter_argv, envp);
    Fail(err_fd, Step::kWaiter, errno);
  }

  Fail(err_fd, Step::kExec, ExecFirst(paths.data(), paths.size(), argv, envp, sh_argv));
}

// clone()'s entry point: the child runs on its own small stack in the agent's memory
// (CLONE_VM) while the agent's thread waits (CLONE_VFORK) until it execs or fails.
struct ChildArgs {
  int read_fd;
  int err_fd;
  const SpawnRequest* req;
  char* const* argv;
  char* const* envp;
  const std::vector<const char*>* paths;
  char** sh_argv;
  char* const* waiter_argv;  // nullptr: exec the job itself
};

int ChildEntry(void* p) {
  const ChildArgs* a = static_cast<const ChildArgs*>(p);
  close(a->read_fd);
  Child(a->err_fd, *a->req, a->argv, a->envp, *a->paths, a->sh_argv, a->waiter_argv);
}

std::string Describe(const SpawnRequest& req, const ChildError& e) {
  const std::string why = strerror(e.err);
  switch (e.step) {
    case Step::kSetsid:
      return "setsid: " + why;
    case Step::kGroups:
      return "cannot set the groups of uid " + std::to_string(req.uid) + ": " + why;
    case Step::kGid:
      return "cannot switch to gid " + std::to_string(req.gid) + ": " + why;
    case Step::kUid:
      return "cannot switch to uid " + std::to_string(req.uid) + ": " + why;
    case Step::kChdir:
      return "cannot chdir to " + req.workdir + ": " + why;
    case Step::kStdin:
      return "cannot open /dev/null: " + why;
    case Step::kStdout:
      return "cannot open " + req.stdout_path + ": " + why;
    case Step::kStderr:
      return "cannot open " + req.stderr_path + ": " + why;
    case Step::kExec:
      return "exec " + (req.argv.empty() ? std::string() : req.argv[0]) + ": " + why;
    case Step::kWaiter:
      return "cannot start the job waiter " + req.waiter + ": " + why;
    case Step::kCgroup:
      return "cannot join the job's cgroup: " + why;
    case Step::kRlimit:
      return "cannot set the job's resource limits: " + why;
    case Step::kMountNamespace:
      return "cannot make a mount namespace for the job's /dev/shm: " + why;
    case Step::kShm:
      return "cannot mount the job's /dev/shm (" + req.setup.shm_options + "): " + why;
    case Step::kStdoutDir:
      return "cannot create the directory of " + req.stdout_path + ": " + why;
    case Step::kStderrDir:
      return "cannot create the directory of " + req.stderr_path + ": " + why;
  }
  return "launch failed: " + why;
}

}  // namespace

std::vector<std::string> OutputDirChain(const std::string& path) {
  std::vector<std::string> dirs;
  if (path.empty() || path[0] != '/') return dirs;
  const size_t last = path.rfind('/');
  for (size_t i = path.find('/', 1); i != std::string::npos && i <= last;
       i = path.find('/', i + 1)) {
    if (path[i - 1] != '/') dirs.push_back(path.substr(0, i));  // "//" adds nothing
  }
  return dirs;
}

std::vector<std::string> ExecCandidates(const std::string& cmd, const EnvList& env) {
  if (cmd.empty()) return {};
  if (cmd.find('/') != std::string::npos) return {cmd};
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& [k, v] : env) {
    if (k == "PATH") path = v;
  }
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (dir.empty()) dir = ".";  // POSIX: an empty PATH entry is the current directory
    out.push_back(dir + "/" + cmd);
    start = end + 1;
  }
  return out;
}

std::vector<gid_t> GroupsOf(const std::string& user, uid_t uid, gid_t gid) {
  std::string name = user;
  if (name.empty()) {
    std::vector<char> buf(16384);
    struct passwd pw;
    struct passwd* found = nullptr;
    if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found) {
      name = found->pw_name;
    }
  }
  if (name.empty()) return {gid};
  int n = 64;
  std::vector<gid_t> groups(n);
  while (getgrouplist(name.c_str(), gid, groups.data(), &n) < 0) {
    if (n <= static_cast<int>(groups.size())) n = static_cast<int>(groups.size()) * 2;
    groups.resize(n);
  }
  groups.resize(n);
  if (std::find(groups.begin(), groups.end(), gid) == groups.end()) groups.push_back(gid);
  return groups;
}

Result<Spawned> Spawn(const SpawnRequest& req) {
  if (req.argv.empty() || req.exec_paths.empty())
    return InvalidArgument("the job has no command");
  // Every string the child touches, laid out before fork.
  std::vector<char*> argv;
  for (const std::string& a : req.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  env_strings.reserve(req.env.size());
  for (const auto& [k, v] : req.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (const std::string& s : env_strings) envp.push_back(const_cast<char*>(s.c_str()));
  envp.push_back(nullptr);
  std::vector<const char*> paths;
  for (const std::string& p : req.exec_paths) paths.push_back(p.c_str());
  std::vector<char*> sh_argv = {const_cast<char*>("/bin/sh"), nullptr};
  for (size_t i = 1; i < req.argv.size(); ++i) sh_argv.push_back(argv[i]);
  sh_argv.push_back(nullptr);

  if (!req.waiter.empty() && req.exit_fd < 0) {
    return InvalidArgument("a job waiter needs an exit file");
  }
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) < 0)
    return Internal(std::string("pipe2: ") + strerror(errno));
  // The waiter's command line (waiter.h): hachi __job-waiter [--lease=FD:GRACE] ERR EXIT
  // N PATHS... -- ARGV.
  std::vector<std::string> waiter_strings;
  std::vector<char*> waiter_argv;
  if (!req.waiter.empty()) {
    waiter_strings = {req.waiter, kWaiterCommand};
    if (req.lease_fd >= 0) {
      waiter_strings.push_back(kLeaseOption + std::to_string(req.lease_fd) + ":" +
                               std::to_string(std::max(0, req.lease_grace_s)));
    }
    for (int fd : {pipe_fds[1], req.exit_fd})
      waiter_strings.push_back(std::to_string(fd));
    waiter_strings.push_back(std::to_string(req.exec_paths.size()));
    waiter_strings.insert(waiter_strings.end(), req.exec_paths.begin(),
                          req.exec_paths.end());
    waiter_strings.push_back("--");
    waiter_strings.insert(waiter_strings.end(), req.argv.begin(), req.argv.end());
    for (std::string& a : waiter_strings) waiter_argv.push_back(a.data());
    waiter_argv.push_back(nullptr);
  }

  // The child starts with every signal blocked, so no handler of the agent runs in it
  // before it has reset them.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  // Not fork(): copying the page tables of a big multi-threaded agent (hachi dev holds
  // the server too) for every job dominated launch time (docs/benchmarks.md). The child
  // shares the agent's memory until exec, as posix_spawn's does: it only makes raw
  // system calls and writes to its own stack, and every signal is blocked meanwhile.
  constexpr size_t kStackBytes = 256 * 1024;
  void* stack = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) {
    const int err = errno;
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return Internal(std::string("mmap: ") + strerror(err));
  }
  ChildArgs args{pipe_fds[0],    pipe_fds[1],
                 &req,           argv.data(),
                 envp.data(),    &paths,
                 sh_argv.data(), waiter_argv.empty() ? nullptr : waiter_argv.data()};
  const pid_t pid = clone(ChildEntry, static_cast<char*>(stack) + kStackBytes,
                          CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
  const int fork_errno = errno;
  munmap(stack, kStackBytes);  // the child has exec'd or exited by now (CLONE_VFORK)
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  close(pipe_fds[1]);
  if (pid < 0) {
    close(pipe_fds[0]);
    return Internal(std::string("clone: ") + strerror(fork_errno));
  }

  ChildError e{};
  ssize_t n;
  do {
    n = read(pipe_fds[0], &e, sizeof e);
  } while (n < 0 && errno == EINTR);
  close(pipe_fds[0]);
  if (n != 0) {  // the child failed before or at exec
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (n != static_cast<ssize_t>(sizeof e))
      return Internal("launch failed: broken error pipe");
    return Internal(Describe(req, e));
  }
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    const int err = errno;
    kill(-pid, SIGKILL);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return Internal(std::string("pidfd_open: ") + strerror(err) +
                    " (needs Linux >= 5.3)");
  }
  return Spawned{pid, pidfd};
}

}  // namespace hachi::agent
