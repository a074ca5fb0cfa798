#include "server/runs.h"

#include <algorithm>

namespace hachi::server {
namespace {

using P = RunPhase;
using E = RunEvent;

// The run's lifecycle: every (phase, event) pair not here is refused (asked already, or
// outranked). A cancel ends every other ask; nothing is asked of a cancelled run.
// constexpr: no static initialiser or exit-time destructor in every process.
constexpr RunTransition kTable[] = {
    {P::kRunning, E::kCancelAsked, P::kCancelling},
    {P::kRunning, E::kRequeueAsked, P::kRequeueing},
    {P::kRunning, E::kPreemptRequeue, P::kPreemptedRequeueing},
    {P::kRunning, E::kPreemptCancel, P::kCancelling},
    {P::kRunning, E::kAllocationCompleted, P::kAllocationDone},

    {P::kRequeueing, E::kCancelAsked, P::kCancelling},
    {P::kRequeueing, E::kPreemptRequeue, P::kPreemptedRequeueing},
    {P::kRequeueing, E::kPreemptCancel, P::kCancelling},
    {P::kRequeueing, E::kAllocationCompleted, P::kAllocationDoneRequeueing},

    {P::kPreemptedRequeueing, E::kCancelAsked, P::kCancelling},
    {P::kPreemptedRequeueing, E::kAllocationCompleted, P::kAllocationDonePreempted},

    {P::kAllocationDone, E::kCancelAsked, P::kCancelling},
    {P::kAllocationDone, E::kRequeueAsked, P::kAllocationDoneRequeueing},
    {P::kAllocationDone, E::kPreemptRequeue, P::kAllocationDonePreempted},
    {P::kAllocationDone, E::kPreemptCancel, P::kCancelling},

    {P::kAllocationDoneRequeueing, E::kCancelAsked, P::kCancelling},
    {P::kAllocationDoneRequeueing, E::kPreemptRequeue, P::kAllocationDonePreempted},
    {P::kAllocationDoneRequeueing, E::kPreemptCancel, P::kCancelling},

    {P::kAllocationDonePreempted, E::kCancelAsked, P::kCancelling},
};

}  // namespace

std::string_view RunPhaseName(RunPhase phase) {
  switch (phase) {
    case P::kRunning:
      return "running";
    case P::kRequeueing:
      return "requeueing";
    case P::kPreemptedRequeueing:
      return "preempted-requeueing";
    case P::kAllocationDone:
      return "allocation-done";
    case P::kAllocationDoneRequeueing:
      return "allocation-done-requeueing";
    case P::kAllocationDonePreempted:
      return "allocation-done-preempted";
    case P::kCancelling:
      return "cancelling";
  }
  return "?";
}

std::string_view RunEventName(RunEvent event) {
  switch (event) {
    case E::kCancelAsked:
      return "cancel-asked";
    case E::kRequeueAsked:
      return "requeue-asked";
    case E::kPreemptRequeue:
      return "preempt-requeue";
    case E::kPreemptCancel:
      return "preempt-cancel";
    case E::kAllocationCompleted:
      return "allocation-completed";
    case E::kFenceExpired:
      return "fence-expired";
    case E::kBatchPartExited:
      return "batch-part-exited";
  }
  return "?";
}

std::span<const RunTransition> RunTransitions() { return kTable; }

Result<RunState> Transition(const RunState& state, RunEvent event) {
  RunState next = state;
  bool* fact = event == E::kFenceExpired      ? &next.fenced
               : event == E::kBatchPartExited ? &next.batch_ended
                                              : nullptr;
  if (fact != nullptr) {
    if (*fact) {
      return Busy("run: " + std::string(RunEventName(event)) + " happened already");
    }
    *fact = true;
    return next;
  }
  for (const RunTransition& t : kTable) {
    if (t.from == state.phase && t.event == event) {
      next.phase = t.to;
      return next;
    }
  }
  return Busy("run: " + std::string(RunEventName(event)) + " refused while " +
              std::string(RunPhaseName(state.phase)));
}

RunEndKind EndKindOf(RunPhase phase, bool lost, bool job_requeues) {
  switch (phase) {
    case P::kCancelling:
      return RunEndKind::kWorstExit;
    case P::kAllocationDone:
    case P::kAllocationDoneRequeueing:
    case P::kAllocationDonePreempted:
      return RunEndKind::kAllocationExit;  // salloc's command ended: its exit is the
                                           // job's
    case P::kRequeueing:
    case P::kPreemptedRequeueing:
      return RunEndKind::kRequeue;
    case P::kRunning:
      break;
  }
  // Lost with its node (the fence passed, or its agent stopped it when its lease
  // expired): a --requeue job runs again, as after any node failure.
  return lost && job_requeues ? RunEndKind::kRequeueLost : RunEndKind::kWorstExit;
}

bool RunInfo::Take(RunEvent event) {
  Result<RunState> next = Transition(state, event);
  if (!next.ok()) return false;
  state = *next;
  return true;
}

bool CountExit(RunInfo* info, const std::string& node, const api::JobExit& exit,
               int parts, bool counts_for_end) {
  if (std::find(info->ended_on.begin(), info->ended_on.end(), node) !=
      info->ended_on.end()) {
    return false;
  }
  info->ended_on.push_back(node);
  if (info->parts_left <= 0) info->parts_left = parts;  // not known yet (a restart)
  --info->parts_left;
  if (!counts_for_end) return true;
  const bool failed = !(exit.kind == api::ExitKind::kExited && exit.exit_code == 0);
  if (!info->worst || (failed && info->worst->kind == api::ExitKind::kExited &&
                       info->worst->exit_code == 0)) {
    info->worst = exit;
  }
  return true;
}

state::JobEnded EndOf(const state::JobRecord& job, const RunInfo& info, Time now) {
  state::JobEnded end;
  end.gpu_memory_peak_mib = info.gpu_memory_peak_mib;
  end.id = job.id;
  end.end_time = now;
  const api::JobExit e = info.worst.value_or(api::JobExit{});
  end.exit_code = e.exit_code;
  end.signal = e.signal;
  switch (e.kind) {
    case api::ExitKind::kExited:
      end.state =
          e.exit_code == 0 ? state::JobState::kCompleted : state::JobState::kFailed;
      if (e.exit_code != 0) end.reason = "exit code " + std::to_string(e.exit_code);
      break;
    case api::ExitKind::kSignaled:
      end.state = state::JobState::kFailed;
      end.reason = "killed by signal " + std::to_string(e.signal);
      break;
    case api::ExitKind::kTimeLimit:
      end.state = state::JobState::kTimeout;
      end.reason = "time limit " + FormatDuration(job.req.time_limit);
      break;
    case api::ExitKind::kCancelled:
      end.state = state::JobState::kCancelled;
      end.reason = info.cancel_reason.empty() ? "cancelled" : info.cancel_reason;
      break;
    case api::ExitKind::kOutOfMemory:
      end.state = state::JobState::kOutOfMemory;
      // The agent says which memory: the cgroup's ("the job used more than its 2048
      // MiB") or, for a share under the soft limit, the GPU's ("used 23.1 GiB
      // of GPU memory on GPU 2, promised 20 GiB (--gpu-mem)").
      end.reason = !e.message.empty() ? e.message
                                      : "out of memory (limit " +
                                            std::to_string(job.req.memory_mib) + " MiB)";
      break;
    case api::ExitKind::kLaunchFailed:
      end.state = state::JobState::kFailed;
      end.reason = "launch failed: " + e.message;
      break;
    case api::ExitKind::kLost:  // as Slurm says of a job whose node failed under it
      end.state = state::JobState::kNodeFail;
      end.reason = e.message;
      break;
  }
  if (info.cancelling() && info.over_time) {
    // The server's stop (or the node's loss) ended it: its time limit did.
    if (!info.worst || e.kind == api::ExitKind::kCancelled ||
        e.kind == api::ExitKind::kLost) {
      end.state = state::JobState::kTimeout;
      end.reason = info.cancel_reason;
    }
  } else if (info.cancelling() && end.state != state::JobState::kCompleted) {
    end.state = state::JobState::kCancelled;
    end.reason = info.cancel_reason;
  }
  return end;
}

state::Edit RunEnd(const state::JobRecord& job, const RunInfo& info, Time end_time) {
  const bool lost = info.worst && info.worst->kind == api::ExitKind::kLost;
  switch (EndKindOf(info.state.phase, lost, job.spec.requeue)) {
    case RunEndKind::kAllocationExit: {
      state::JobEnded end;
      end.id = job.id;
      end.end_time = end_time;
      end.gpu_memory_peak_mib = info.gpu_memory_peak_mib;
      end.exit_code = info.allocation_exit;
      end.state = info.allocation_exit == 0 ? state::JobState::kCompleted
                                            : state::JobState::kFailed;
      if (info.allocation_exit != 0) {
        end.reason = "exit code " + std::to_string(info.allocation_exit);
      }
      return end;
    }
    case RunEndKind::kRequeue:
      return state::JobRequeued{
          job.id, info.requeue_reason.empty() ? "preempted" : info.requeue_reason};
    case RunEndKind::kRequeueLost:
      return state::JobRequeued{job.id, info.worst->message};
    case RunEndKind::kWorstExit:
      break;
  }
  return EndOf(job, info, end_time);
}

}  // namespace hachi::server
