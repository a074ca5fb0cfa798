// A run's record in the agent's spool and what a later agent process reads back: the
// record ("run-<job>", written once the run's process started, removed when it is
// reaped), the waiter's exit file ("exit-<job>"), and the /proc lookups that tell the
// run's process from a reused pid. What is left after an agent process died names runs
// nobody supervises: ProcessLauncher adopts or stops them (launcher.h).
// Internal to the launcher (launcher.cc, launcher_supervise.cc).
//
// Thread-safety: plain functions over files; a run's files are one launcher's.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "api/launch_spec.h"
#include "core/clock.h"
#include "state/records.h"

namespace hachi::agent {

using JobId = state::JobId;

// What a run's record says: enough for the next agent process to watch it to its end
// (its process, time limit, kill grace, script to remove), or to stop it.
struct RunRecord {
  JobId job = 0;
  Time start_time = 0;
  pid_t pid = 0;
  unsigned long long ticks = 0;  // ProcessStartTicks(pid) when it started
  Time deadline = 0;             // wall clock, seconds; 0 = no time limit
  Duration grace = 0;
  bool waiter = false;  // pid is a job waiter, which leaves an exit file
  std::string script;   // "" = none
  // --signal (v3): `signal` due at `signal_at` (wall clock, seconds), for `scope` (the
  // batch shell alone with B:, else the steps' tasks; kAll in a record written before
  // scopes, as then); `signaled` once sent, so a restarted agent neither loses it nor
  // sends it twice.
  int signal = 0;
  Time signal_at = 0;
  api::SignalScope scope = api::SignalScope::kAll;
  bool signaled = false;
};

// A run's record in the spool, "run-<job>": written once its process started, removed
// when it is reaped. What is left after the agent process died names runs nobody
// supervises.
std::string RunRecordPath(const std::string& spool, JobId job);

// The exit file of a run with a waiter (waiter.h): "exit N" / "signal N" once it ended.
std::string ExitFilePath(const std::string& spool, JobId job);

// The kernel's start time of a process (field 22 of /proc/PID/stat, clock ticks since
// boot): with the pid it names one process, even after the pid is reused. 0 when gone.
unsigned long long ProcessStartTicks(pid_t pid);

// "v3 JOB START PID TICKS DEADLINE GRACE WAITER SIGNAL SIGNAL_AT BATCH_ONLY SIGNALED
// SCRIPT|-"; "v2 JOB START PID TICKS DEADLINE GRACE WAITER SCRIPT|-" (no --signal) is
// read too, and the first format, "JOB START PID TICKS" (an agent of an old version
// left it: stopped, not adopted).
std::optional<RunRecord> ParseRunRecord(const std::string& text);

// Writes `r` (atomically, by rename); best effort: without it a restarted agent cannot
// stop this run.
void WriteRunRecord(const std::string& spool, const RunRecord& r);

// The run records in `spool` (unparsable ones are removed).
std::vector<RunRecord> LeftoverRuns(const std::string& spool);

// Still the same process (not a reused pid).
bool SameProcess(const RunRecord& r);

// Stops a leftover run: its whole process group, which is the job's session (the child
// called setsid). Removes its files. True when there was something to kill.
bool StopRun(const std::string& spool, const RunRecord& r);

// "job 12 (pid 345)".
std::string RunName(const RunRecord& r);

// The job's batch shell: the process launched, or with a job waiter (which forks the job
// and waits) the waiter's child. -1 when it has none (it ended).
pid_t BatchShellPid(pid_t pid, bool waiter);

}  // namespace hachi::agent
