#include "server/runs.h"

#include <algorithm>

namespace hachi::server {

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
      // MiB") or, for a share under the soft limit, the GPU's (issue 20: "used 23.1 GiB
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
  if (info.cancel_requested && end.state != state::JobState::kCompleted) {
    end.state = state::JobState::kCancelled;
    end.reason = info.cancel_reason;
  }
  return end;
}

}  // namespace hachi::server
