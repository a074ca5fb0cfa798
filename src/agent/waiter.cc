#include "agent/waiter.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "agent/lease_file.h"
#include "agent/spawn.h"
#include "core/clock.h"
#include "core/strings.h"

namespace hachi::agent {
namespace {

[[noreturn]] void ExecFailed(int err_fd, int err) {
  SpawnError e{SpawnStep::kExec, err};
  [[maybe_unused]] ssize_t n = write(err_fd, &e, sizeof e);
  _exit(127);
}

// The signals sent to the job's process group (the launcher's SIGTERM at a time limit,
// scancel --signal, a terminal's) that the waiter must survive. Not SIGCHLD (its wait),
// SIGKILL/SIGSTOP (cannot be), nor the ones a fault of its own raises (an ignored SIGSEGV
// would loop on the faulting instruction).
bool IgnoredByWaiter(int sig) {
  switch (sig) {
    case SIGCHLD:
    case SIGKILL:
    case SIGSTOP:
    case SIGSEGV:
    case SIGBUS:
    case SIGILL:
    case SIGFPE:
    case SIGTRAP:
    case SIGSYS:
    case SIGABRT:
      return false;
    default:
      return true;
  }
}

// The job's side of the fork: the signals the waiter ignores are the job's again, then
// execvp's search over the launcher's candidates (as spawn.cc's child does without a
// waiter).
[[noreturn]] void ExecJob(int err_fd, int exit_fd, int lease_fd,
                          const std::vector<const char*>& paths, char** argv) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (IgnoredByWaiter(sig)) sigaction(sig, &dfl, nullptr);
  }
  close(exit_fd);                      // the job must not be able to forge its own status
  if (lease_fd >= 0) close(lease_fd);  // nor hold the node's lease file
  fcntl(err_fd, F_SETFD, FD_CLOEXEC);
  std::vector<char*> sh_argv = {const_cast<char*>("/bin/sh"), nullptr};
  for (int i = 1; argv[i] != nullptr; ++i) sh_argv.push_back(argv[i]);
  sh_argv.push_back(nullptr);
  ExecFailed(err_fd,
             ExecFirst(paths.data(), paths.size(), argv, environ, sh_argv.data()));
}

// A number in [0, max] that ends at `stop`; *rest is after it.
bool ParseNumber(const char* s, char stop, long max, long* v, const char** rest) {
  char* end = nullptr;
  *v = std::strtol(s, &end, 10);
  if (end == s || *end != stop || *v < 0 || *v > max) return false;
  *rest = end;
  return true;
}

bool ParseFd(const char* s, int* fd) {
  long v;
  const char* rest;
  if (!ParseNumber(s, '\0', 1 << 20, &v, &rest)) return false;
  *fd = static_cast<int>(v);
  return true;
}

// The lease the waiter enforces (--lease=FD:GRACE); fd -1: none.
struct LeaseArgs {
  int fd = -1;
  int grace_s = 0;
};

bool ParseLease(const char* arg, LeaseArgs* lease) {
  long fd, grace;
  const char* rest;
  if (!ParseNumber(arg + std::strlen(kLeaseOption), ':', 1 << 20, &fd, &rest) ||
      !ParseNumber(rest + 1, '\0', 1 << 24, &grace, &rest)) {
    return false;
  }
  lease->fd = static_cast<int>(fd);
  lease->grace_s = static_cast<int>(grace);
  return true;
}

// Waits for the job (waitpid's result, its status in *status). With a lease, sleeps on
// the job's pidfd until the deadline in the lease file, reads it again, and once it has
// passed stops the job: SIGTERM to the process group (the waiter ignores it), the
// grace, SIGKILL to the job; *silent_ms says then how long the agent had been silent.
pid_t WaitForJob(pid_t pid, const LeaseArgs& lease, int* status, int64_t* silent_ms) {
  const int pidfd = lease.fd < 0 ? -1 : static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (lease.fd >= 0 && pidfd < 0) {
    std::fprintf(stderr, "hachi %s: no pidfd (%s): the node's lease is not enforced\n",
                 kWaiterCommand, std::strerror(errno));
  }
  const Clock& clock = *RealClock();
  constexpr int64_t kNever = INT64_MAX;
  int64_t kill_at = kNever;  // once stopping: when the job gets SIGKILL
  bool killed = false;
  for (bool ended = pidfd < 0; !ended;) {
    const int64_t now = clock.MonotonicMs();
    int64_t sleep_ms = -1;    // until the job ends
    if (kill_at != kNever) {  // stopping
      if (!killed && now >= kill_at) {
        kill(pid, SIGKILL);  // the job only: the waiter must live to write its status
        killed = true;
      }
      if (!killed) sleep_ms = kill_at - now;
    } else if (std::optional<LeaseView> l = ReadLease(lease.fd); !l) {
      sleep_ms = kNoLeaseRecheckMs;
    } else if (l->deadline_ms > now) {
      sleep_ms = l->deadline_ms - now;
    } else {
      *silent_ms = now - l->held_at_ms;
      kill(-getpgrp(), SIGTERM);
      kill_at = now + int64_t{lease.grace_s} * 1000;
      continue;
    }
    pollfd p{pidfd, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(sleep_ms, INT_MAX)));
    ended = r > 0 || (r < 0 && errno != EINTR);  // an error: wait plainly below
  }
  if (pidfd >= 0) close(pidfd);
  pid_t r;
  do {
    r = waitpid(pid, status, 0);
  } while (r < 0 && errno == EINTR);
  return r;
}

}  // namespace

int WaiterMain(int argc, char** argv) {
  // The arguments after the option, if any: ERR_FD EXIT_FD N PATHS... -- ARGV...
  LeaseArgs lease;
  const bool leased =
      argc > 2 && std::strncmp(argv[2], kLeaseOption, std::strlen(kLeaseOption)) == 0;
  char** const a = argv + (leased ? 3 : 2);
  const int left = argc - (leased ? 3 : 2);
  int err_fd = -1, exit_fd = -1, n = -1;
  if ((leased && !ParseLease(argv[2], &lease)) || left < 4 || !ParseFd(a[0], &err_fd) ||
      !ParseFd(a[1], &exit_fd) || !ParseFd(a[2], &n) || left < 3 + n + 2 ||
      std::strcmp(a[3 + n], "--") != 0) {
    std::fprintf(stderr, "hachi %s: started by the agent only\n", kWaiterCommand);
    return 2;
  }
  // Undumpable before the job exists: the waiter holds the exit file (root's, opened
  // by the agent) and runs as the job's uid, so otherwise the job could take that
  // descriptor with pidfd_getfd(2), or ptrace the waiter, or open /proc/PPID/fd/N, and
  // forge its status or fill the spool through it. Not dumpable, the kernel
  // refuses all three to processes of the same uid without CAP_SYS_PTRACE; /proc/PID
  // becomes root's. The job gets its own dumpable flag back at its exec (same uid, no
  // set-id bits), so debuggers and core dumps of the job itself still work.
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    std::fprintf(stderr, "hachi %s: cannot make the waiter undumpable: %s\n",
                 kWaiterCommand, std::strerror(errno));
    return 2;
  }
  std::vector<const char*> paths(a + 3, a + 3 + n);
  char** job_argv = a + 3 + n + 1;

  // Before the fork, so no signal meant for the job can end the waiter in between; the
  // child restores them. SIGCHLD stays default: ignoring it would reap the job for us.
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (IgnoredByWaiter(sig)) sigaction(sig, &ign, nullptr);
  }
  fcntl(exit_fd, F_SETFD, FD_CLOEXEC);
  if (lease.fd >= 0 && fcntl(lease.fd, F_SETFD, FD_CLOEXEC) != 0) lease.fd = -1;
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    ExecFailed(err_fd, err);
  }
  if (pid == 0) ExecJob(err_fd, exit_fd, lease.fd, paths, job_argv);
  close(err_fd);  // the launcher reads the pipe until the job's exec closes the last end

  int status = 0;
  int64_t silent_ms = -1;
  const pid_t r = WaitForJob(pid, lease, &status, &silent_ms);
  WaitedStatus w;
  w.lease_silent_ms = silent_ms;
  if (r == pid && WIFSIGNALED(status)) {
    w.signaled = true;
    w.code = WTERMSIG(status);
  } else if (r == pid) {
    w.code = WEXITSTATUS(status);
  } else {
    w.code = 127;
  }
  const std::string text = FormatWaitedStatus(w);
  [[maybe_unused]] ssize_t written = pwrite(exit_fd, text.data(), text.size(), 0);
  fsync(
      exit_fd);  // a restarted agent reads it, perhaps after a crash of the node's agent
  close(exit_fd);
  // Stopped on the lease: the job is over and its agent is not there to clear out what
  // is left of its group (the launcher does that otherwise). The waiter goes with it;
  // its exit file says how the job ended.
  if (w.lease_silent_ms >= 0) kill(-getpgrp(), SIGKILL);
  if (w.signaled) {
    // End as the job did, without a core dump of our own.
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(w.code, &dfl, nullptr);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, w.code);
    sigprocmask(SIG_UNBLOCK, &one, nullptr);
    kill(getpid(), w.code);
    return 128 + w.code;  // a signal that does not terminate (SIGCHLD, ...)
  }
  return w.code;
}

std::string FindWaiterBinary(const std::string& self_exe, const std::string& fallback) {
  const size_t slash = self_exe.rfind('/');
  if (slash == std::string::npos) return fallback;
  const std::string dir = self_exe.substr(0, slash);
  for (const std::string& candidate :
       {dir + "/" + kWaiterBinary, dir + "/../lib/hachi/" + kWaiterBinary}) {
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return fallback;
}

std::string FormatWaitedStatus(const WaitedStatus& s) {
  std::string text =
      std::string(s.signaled ? "signal " : "exit ") + std::to_string(s.code) + "\n";
  if (s.lease_silent_ms >= 0) text += "lease " + std::to_string(s.lease_silent_ms) + "\n";
  return text;
}

std::optional<WaitedStatus> ReadWaitedStatus(const std::string& path) {
  std::optional<std::string> text = ReadFile(path, nullptr);
  if (!text) return std::nullopt;
  char kind[16] = {};
  int code = 0;
  if (std::sscanf(text->c_str(), "%15s %d", kind, &code) != 2) return std::nullopt;
  WaitedStatus w;
  if (std::strcmp(kind, "signal") == 0) {
    w.signaled = true;
  } else if (std::strcmp(kind, "exit") != 0) {
    return std::nullopt;
  }
  w.code = code;
  const size_t lease = text->find("\nlease ");
  long long silent = 0;
  if (lease != std::string::npos &&
      std::sscanf(text->c_str() + lease + 1, "lease %lld", &silent) == 1 && silent >= 0) {
    w.lease_silent_ms = silent;
  }
  return w;
}

int HoldMain() {
  // Every signal the job's users send (scancel --signal reaches every process of the
  // job) is for its steps, not for this: it ends by the launcher's SIGKILL.
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, nullptr);
  for (;;) pause();
}

}  // namespace hachi::agent
