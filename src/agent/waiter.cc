#include "agent/waiter.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "agent/spawn.h"
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
[[noreturn]] void ExecJob(int err_fd, int exit_fd, const std::vector<const char*>& paths,
                          char** argv) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (IgnoredByWaiter(sig)) sigaction(sig, &dfl, nullptr);
  }
  close(exit_fd);  // the job must not be able to forge its own status
  fcntl(err_fd, F_SETFD, FD_CLOEXEC);
  std::vector<char*> sh_argv = {const_cast<char*>("/bin/sh"), nullptr};
  for (int i = 1; argv[i] != nullptr; ++i) sh_argv.push_back(argv[i]);
  sh_argv.push_back(nullptr);
  ExecFailed(err_fd,
             ExecFirst(paths.data(), paths.size(), argv, environ, sh_argv.data()));
}

bool ParseFd(const char* s, int* fd) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 0 || v > 1 << 20) return false;
  *fd = static_cast<int>(v);
  return true;
}

}  // namespace

int WaiterMain(int argc, char** argv) {
  int err_fd = -1, exit_fd = -1, n = -1;
  if (argc < 6 || !ParseFd(argv[2], &err_fd) || !ParseFd(argv[3], &exit_fd) ||
      !ParseFd(argv[4], &n) || argc < 5 + n + 2 || std::strcmp(argv[5 + n], "--") != 0) {
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
  std::vector<const char*> paths(argv + 5, argv + 5 + n);
  char** job_argv = argv + 5 + n + 1;

  // Before the fork, so no signal meant for the job can end the waiter in between; the
  // child restores them. SIGCHLD stays default: ignoring it would reap the job for us.
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (IgnoredByWaiter(sig)) sigaction(sig, &ign, nullptr);
  }
  fcntl(exit_fd, F_SETFD, FD_CLOEXEC);
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    ExecFailed(err_fd, err);
  }
  if (pid == 0) ExecJob(err_fd, exit_fd, paths, job_argv);
  close(err_fd);  // the launcher reads the pipe until the job's exec closes the last end

  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, 0);
  } while (r < 0 && errno == EINTR);
  WaitedStatus w;
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
  return std::string(s.signaled ? "signal " : "exit ") + std::to_string(s.code) + "\n";
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
