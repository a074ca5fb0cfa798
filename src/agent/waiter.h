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
// The lease (lease_file.h): with `--lease=FD:GRACE` the waiter also holds the node's
// lease file, read-only, and enforces the agent's lease when the agent cannot: it
// sleeps (poll on the job's pidfd) until the deadline in the file, reads it again (the
// agent moves it on while it hears from the server), and once it has passed stops the
// job as the launcher would -- SIGTERM to the process group, GRACE seconds, SIGKILL --
// so a run whose agent died ends before the server's fence lets its job start again
// elsewhere. One wake-up per lease, none between (no lease in the file: one every
// kNoLeaseRecheckMs, to see an agent's first hold). The exit file then says so
// ("lease N" after the status: the agent had been silent N ms), the launcher reports
// such a run as lost, and the waiter SIGKILLs what is left of the group, itself
// included, after writing it: with no agent, nobody else would.
//
// Free functions, no shared state.
#pragma once

#include <cstdint>
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

// `hachi __job-waiter [--lease=FD:GRACE] ERR_FD EXIT_FD N PATH1..PATHN -- ARGV...`:
// ERR_FD is the launcher's close-on-exec error pipe (a failed exec is written there as
// spawn.cc's ChildError, as if the job's own exec had failed), EXIT_FD the exit file,
// PATH* the candidates for argv[0] (ExecCandidates); --lease the node's lease file and
// the job's kill grace in seconds (an agent that passes none: no lease, as before it).
// The environment is the job's. Returns what the waiter exits with when it cannot
// mirror its job's end by a signal. argv[0] is the binary, argv[1] kWaiterCommand.
int WaiterMain(int argc, char** argv);
inline constexpr char kLeaseOption[] = "--lease=";
// How often a waiter whose lease file holds no lease looks again.
inline constexpr int kNoLeaseRecheckMs = 10'000;

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
  // The waiter stopped the job because the node's lease had passed: how long the agent
  // had been silent then (ms since it last held the lease). -1: not stopped so.
  int64_t lease_silent_ms = -1;
};

// The exit file's text: "exit 3\n", "signal 9\n", "signal 15\nlease 41200\n" (the status
// first, so an agent of an older version reads it too).
std::string FormatWaitedStatus(const WaitedStatus& s);
// nullopt when the file is missing, empty or garbled (the waiter was killed before its
// job ended).
std::optional<WaitedStatus> ReadWaitedStatus(const std::string& path);

}  // namespace hachi::agent
