// A running job's progress on the server (not stored: rebuilt from the records and the
// agents' reports after a restart): its lifecycle as one transition table, the exits its
// parts reported, and how its end is decided and worded. Pure values and functions;
// thread-compatible (the Controller keeps its RunInfos under its lock).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api/launch_spec.h"
#include "core/status.h"
#include "core/time.h"
#include "state/edits.h"
#include "state/records.h"

namespace hachi::server {

// What has been asked of a run that decides how it ends. A cancel outranks everything
// (nothing is asked of a cancelled run after it), an ended allocation outranks a
// requeue; a preemption is asked at most once (its kill time is the scheduler's).
enum class RunPhase : uint8_t {
  kRunning,                   // nothing asked: its parts' exits decide its end
  kRequeueing,                // to run again once every part exited
  kPreemptedRequeueing,       // preempted with requeue (maybe asked to requeue before)
  kAllocationDone,            // salloc's command ended: its exit code ends the job
  kAllocationDoneRequeueing,  // ... and a requeue was asked since (it changes nothing)
  kAllocationDonePreempted,   // ... and it was preempted since (it changes nothing)
  kCancelling,  // CANCELLED unless it completed before the cancel reached it
};

enum class RunEvent : uint8_t {
  kCancelAsked,     // scancel, the idle policy's cancel
  kRequeueAsked,    // scontrol requeue, its GPU left service, the idle policy's requeue
  kPreemptRequeue,  // the scheduler preempts it, to run again
  kPreemptCancel,   // the scheduler preempts it for good
  kAllocationCompleted,  // salloc's command ended (Controller::CompleteAllocation)
  // Facts about its parts, each true at most once and in any phase:
  kFenceExpired,  // a part's node was lost and its fence passed: the others are stopped
  kBatchPartExited,  // a batch-on-first-node job's batch part ended: the job's end is
                     // decided, the other parts' exits no longer count for it
};

std::string_view RunPhaseName(RunPhase phase);
std::string_view RunEventName(RunEvent event);

struct RunState {
  RunPhase phase = RunPhase::kRunning;
  bool fenced = false;       // kFenceExpired happened
  bool batch_ended = false;  // kBatchPartExited happened
  bool operator==(const RunState&) const = default;
};

// One row of the run's transition table (runs.cc): in `from`, `event` leads to `to`.
struct RunTransition {
  RunPhase from;
  RunEvent event;
  RunPhase to;
};
// Every row, for the table test and the docs. The fact events are not rows: they keep
// the phase and are refused once their fact is set.
std::span<const RunTransition> RunTransitions();

// `state` after `event`, or Busy when the table has no such row (the event is ignored:
// asked already, or outranked by what was asked before).
Result<RunState> Transition(const RunState& state, RunEvent event);

// How a run ends once every part has exited.
enum class RunEndKind : uint8_t {
  kAllocationExit,  // JobEnded with the allocation's exit code
  kRequeue,         // JobRequeued with the requeue's reason ("preempted" without one)
  kRequeueLost,     // JobRequeued: lost with its node, and the job asked for --requeue
  kWorstExit,       // JobEnded as its worst exit (EndOf), CANCELLED when cancelled
};
RunEndKind EndKindOf(RunPhase phase, bool lost, bool job_requeues);

struct RunInfo {
  int parts_left = 0;
  // The most GPU memory its processes held on one GPU (MiB), from its agents' NVML
  // process reports; stored with the job when the run ends.
  int64_t gpu_memory_peak_mib = 0;
  // Nodes whose part has ended: an agent may report one exit twice (its report was
  // answered but the answer lost), and a gang must not end while a part still runs.
  std::vector<std::string> ended_on;
  std::optional<api::JobExit> worst;  // first failing part, else the last
  RunState state;
  std::string cancel_reason;  // kCancelling: why
  // kCancelling by the server's own time-limit check (RunOverdue): it ends TIMEOUT,
  // unless it ended by itself meanwhile (then as that exit says).
  bool over_time = false;
  std::string requeue_reason;  // requeueing: why ("" = "preempted")
  Time preempt_kill_at = kNever;
  int allocation_exit = 0;  // kAllocationDone*: the job's exit code

  // Applies `event` to `state`; false (nothing changed) when the table refuses it.
  bool Take(RunEvent event);
  bool cancelling() const { return state.phase == RunPhase::kCancelling; }
};

// Counts `exit` of the part on `node` into `info` (the first failing part's exit is the
// job's, unless !counts_for_end: a holder stopped after the batch ended). False when
// that part's exit was counted already (a repeated report).
bool CountExit(RunInfo* info, const std::string& node, const api::JobExit& exit,
               int parts, bool counts_for_end = true);

// The job's end from its worst exit: COMPLETED on exit 0, FAILED with the code or signal,
// TIMEOUT, OUT_OF_MEMORY, NODE_FAIL for a run no agent watched; CANCELLED (with the
// canceller's reason) whenever a cancel was asked for and the job did not complete.
state::JobEnded EndOf(const state::JobRecord& job, const RunInfo& info, Time now);

// The edit that ends `job`'s run once every part exited (EndKindOf, then worded).
state::Edit RunEnd(const state::JobRecord& job, const RunInfo& info, Time end_time);

}  // namespace hachi::server
