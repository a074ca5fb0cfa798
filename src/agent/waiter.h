// The job waiter: the small process between the agent and a job, so that a job outlives
// its agent and its exit status is not lost with it ("agent restart").
//
// ProcessLauncher (launcher.h) execs the waiter -- `hachi __job-waiter`, the same binary
// -- in the job's place, after the steps that need the agent's privileges (session,
// cgroup, user, working directory, output files). The waiter forks; the child execs the
// job's command; the waiter waits for it, writes "exit N" or "signal N" to an exit file
// the agent opened for it in the spool, and then ends the same way its job did (same
// exit code, or killed by the same signal), so an agent that is still there sees the
// job's own status through waitpid. A restarted agent finds the run's record and watches
// the waiter through a pidfd; when it ends, the exit file says how the job ended.
//
// The waiter runs as the job's uid and holds the exit file, which is root's: it makes
// itself undumpable (PR_SET_DUMPABLE 0) before it forks the job, so the job cannot take
// that descriptor (pidfd_getfd, ptrace, /proc/PPID/fd/N are refused to a same-uid
// process without CAP_SYS_PTRACE) to forge its status or fill the spool. The
// job's own exec makes the job dumpable again.
//
// The waiter ignores the signals the launcher sends to the job's process group (SIGTERM
// at a time limit, scancel --signal), so they reach the job alone; SIGKILL ends both.
//
// Free functions, no shared state.
#pragma once

#include <optional>
#include <string>

namespace hachi::agent {

// The hidden subcommand: argv[1] of the waiter's command line.
inline constexpr char kWaiterCommand[] = "__job-waiter";
// `hachi __hold`: what the other nodes of a job whose batch script runs on
// its first node only run, to hold the allocation for its steps. It blocks every signal
// and waits: the launcher ends it with SIGKILL (ProcessLauncher stops a holder at once).
inline constexpr const char* kHoldCommand = "__hold";
[[noreturn]] int HoldMain();

// `hachi __job-waiter ERR_FD EXIT_FD N PATH1..PATHN -- ARGV...`: ERR_FD is the launcher's
// close-on-exec error pipe (a failed exec is written there as spawn.cc's ChildError, as
// if the job's own exec had failed), EXIT_FD the exit file, PATH* the candidates for
// argv[0] (ExecCandidates). The environment is the job's. Returns what the waiter exits
// with when it cannot mirror its job's end by a signal. argv[0] is the binary, argv[1]
// kWaiterCommand.
int WaiterMain(int argc, char** argv);

// The waiter's own program, `hachi-job-waiter`: beside `self_exe` (the build tree), else
// in ../lib/hachi from its directory (the package: /usr/bin/hachi,
// /usr/lib/hachi/hachi-job-waiter); `fallback` (the agent's own binary, which runs
// `__job-waiter` too) when neither is executable. `self_exe` is a real path, not
// /proc/self/exe.
std::string FindWaiterBinary(const std::string& self_exe, const std::string& fallback);
inline constexpr char kWaiterBinary[] = "hachi-job-waiter";

// How a job ended, as its waiter wrote it.
struct WaitedStatus {
  bool signaled = false;
  int code = 0;  // exit code, or the signal when `signaled`
};

// The exit file's text: "exit 3\n", "signal 9\n".
std::string FormatWaitedStatus(const WaitedStatus& s);
// nullopt when the file is missing, empty or garbled (the waiter was killed before its
// job ended).
std::optional<WaitedStatus> ReadWaitedStatus(const std::string& path);

}  // namespace hachi::agent
