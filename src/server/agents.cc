// Controller: agent sessions — registration and reconciliation, the work long poll
// (which is also the heartbeat), exit reports, and lost nodes.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <unordered_set>

#include "server/controller.h"

namespace hachi::server {

Status Controller::Register(const AgentRegistration& reg) {
  if (reg.node.empty()) return InvalidArgument("register: node name is empty");
  state::NodeRecord rec;
  rec.name = reg.node;
  rec.address = reg.address;
  rec.topology_json = reg.topology_json;
  rec.cpus = reg.cpus;
  rec.memory_mib = reg.memory_mib;
  rec.agent_instance = reg.instance;
  rec.cgroup = reg.cgroup;
  Result<NodeHardware> hw = CompileNodeHardware(rec);
  if (!hw.ok()) return hw.status();
  if (reg.cpus <= 0 || reg.memory_mib <= 0) {
    return InvalidArgument("register: node " + reg.node + " reports " +
                           std::to_string(reg.cpus) + " CPUs and " +
                           std::to_string(reg.memory_mib) + " MiB of memory");
  }
  std::unique_lock<std::mutex> lock(mu_);
  const Time now = options_.clock->Now();
  auto old = image_.nodes.find(reg.node);
  // The same agent process as before (the server restarted, or the network blinked):
  // it still knows its jobs. Another one: the agent restarted and lost them.
  const bool same_agent = old != image_.nodes.end() && !reg.instance.empty() &&
                          old->second.agent_instance == reg.instance;
  rec.state = state::NodeState::kUp;
  rec.state_since = now;
  if (old != image_.nodes.end()) {
    rec.block = old->second.block;
    rec.unhealthy = old->second.unhealthy;
    if (old->second.state == state::NodeState::kDrained) {  // a drain outlives restarts
      rec.state = state::NodeState::kDrained;
      rec.state_reason = old->second.state_reason;
      rec.state_since = old->second.state_since;
    }
  }
  HACHI_RETURN_IF_ERROR(CommitAndApply(lock, {state::NodeUpserted{rec}}));
  hardware_[reg.node] = std::move(*hw);
  base_dirty_ = true;
  AgentSession& session = agents_[reg.node];
  session.registered = true;
  session.last_seen_ms = options_.clock->MonotonicMs();
  session.launches.clear();
  session.cancels.clear();

  // Reconcile the jobs the records run there with what the agent says it runs.
  const std::unordered_set<state::JobId> running(reg.running.begin(), reg.running.end());
  const std::unordered_set<state::JobId> finished(reg.finished.begin(),
                                                  reg.finished.end());
  std::vector<state::Edit> edits;
  for (const auto& [id, job] : image_.jobs) {
    if (job.state != state::JobState::kRunning) continue;
    const bool here =
        std::any_of(job.allocations.begin(), job.allocations.end(),
                    [&](const state::NodeAllocation& a) { return a.node == reg.node; });
    if (!here || running.count(id)) continue;
    // Without an instance id (older agents, tests) the start times decide.
    const bool agent_knew =
        reg.instance.empty() ? job.start_time >= reg.agent_started : same_agent;
    if (agent_knew || finished.count(id)) {
      // The agent finished it (its report was lost) or never got the launch (the server
      // restarted before delivering it): send it again. The agent launches a job id at
      // most once and answers a repeated one by reporting its exit again.
      DispatchLocked(job, reg.node);
      continue;
    }
    // The agent restarted after the job started and does not know it: its processes'
    // fate is unknown (re-adoption is issue 7). Requeue or fail it.
    RunInfo& info = runs_[id];
    if (job.spec.requeue) {
      edits.push_back(state::JobRequeued{id, "agent on " + reg.node + " restarted"});
    } else {
      api::JobExit e;
      e.job = id;
      e.kind = api::ExitKind::kLaunchFailed;
      e.message = "agent on " + reg.node + " restarted while the job ran";
      info.worst = e;
      info.parts_left = 0;
      state::JobEnded end = EndFor(job, info, now);
      end.state = state::JobState::kNodeFail;
      edits.push_back(end);
    }
    runs_.erase(id);
  }
  // Stops what the agent runs without the records' leave: jobs that ended or were
  // requeued while it was away (their GPUs may be given to others), and jobs whose
  // cancel or preemption was queued in the session just cleared.
  for (state::JobId id : reg.running) {
    auto it = image_.jobs.find(id);
    const bool here =
        it != image_.jobs.end() && it->second.state == state::JobState::kRunning &&
        std::any_of(it->second.allocations.begin(), it->second.allocations.end(),
                    [&](const state::NodeAllocation& a) { return a.node == reg.node; });
    auto run = runs_.find(id);
    const bool stopping = run != runs_.end() && (run->second.cancel_requested ||
                                                 run->second.preempt_kill_at != kNever);
    if (!here || stopping) session.cancels.push_back(id);
  }
  work_cv_.notify_all();
  return CommitAndApply(lock, std::move(edits));
}

AgentWork Controller::Poll(const std::string& node, int wait_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  AgentWork work;
  auto it = agents_.find(node);
  if (it == agents_.end() || !it->second.registered) {
    work.reregister = true;
    return work;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(wait_ms, 0));
  for (;;) {
    AgentSession& s = agents_[node];
    s.last_seen_ms = options_.clock->MonotonicMs();
    if (!s.registered) {
      work.reregister = true;
      return work;
    }
    if (!s.launches.empty() || !s.cancels.empty() || stopping_) {
      work.launch.assign(std::make_move_iterator(s.launches.begin()),
                         std::make_move_iterator(s.launches.end()));
      s.launches.clear();
      work.cancel = std::move(s.cancels);
      s.cancels.clear();
      return work;
    }
    if (work_cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      agents_[node].last_seen_ms = options_.clock->MonotonicMs();
      return work;
    }
  }
}

state::JobEnded Controller::EndFor(const state::JobRecord& job, const RunInfo& info,
                                   Time now) const {
  state::JobEnded end;
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
      end.reason = "out of memory (limit " + std::to_string(job.req.memory_mib) + " MiB)";
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

Status Controller::Report(const std::string& node,
                          const std::vector<api::JobExit>& exits) {
  std::unique_lock<std::mutex> lock(mu_);
  auto session = agents_.find(node);
  if (session == agents_.end() || !session->second.registered) {
    return NotFound("agent " + node + " is not registered");
  }
  session->second.last_seen_ms = options_.clock->MonotonicMs();
  std::vector<state::Edit> edits;
  for (const api::JobExit& e : exits) {
    auto it = image_.jobs.find(e.job);
    if (it == image_.jobs.end() || it->second.state != state::JobState::kRunning) {
      continue;  // a repeated report of a job that already ended
    }
    const state::JobRecord& job = it->second;
    if (e.start_time != 0 && e.start_time != job.start_time) {
      continue;  // the exit of an earlier run of this (requeued) job
    }
    if (std::none_of(job.allocations.begin(), job.allocations.end(),
                     [&](const state::NodeAllocation& a) { return a.node == node; })) {
      continue;
    }
    RunInfo& info = runs_[e.job];
    if (std::find(info.ended_on.begin(), info.ended_on.end(), node) !=
        info.ended_on.end()) {
      continue;  // this part's exit, reported again
    }
    info.ended_on.push_back(node);
    if (info.parts_left <= 0) info.parts_left = static_cast<int>(job.allocations.size());
    --info.parts_left;
    const bool failed = !(e.kind == api::ExitKind::kExited && e.exit_code == 0);
    if (!info.worst || (failed && info.worst->kind == api::ExitKind::kExited &&
                        info.worst->exit_code == 0)) {
      info.worst = e;
    }
    if (failed && info.parts_left > 0 && !info.cancel_requested) {
      // A gang is one job: when one part fails, stop the others.
      for (const state::NodeAllocation& a : job.allocations) {
        if (a.node != node) agents_[a.node].cancels.push_back(e.job);
      }
      work_cv_.notify_all();
    }
    if (info.parts_left > 0) continue;
    if (info.requeue_on_exit) {
      edits.push_back(state::JobRequeued{e.job, "preempted"});
    } else {
      edits.push_back(
          EndFor(job, info, e.end_time > 0 ? e.end_time : options_.clock->Now()));
    }
    runs_.erase(e.job);
  }
  return CommitAndApply(lock, std::move(edits));
}

void Controller::NodeLostLocked(std::unique_lock<std::mutex>& lock,
                                const std::string& node, const std::string& why,
                                Time now) {
  std::vector<state::Edit> edits;
  edits.push_back(state::NodeStateChanged{node, state::NodeState::kDown, why, now});
  for (const auto& [id, job] : image_.jobs) {
    if (job.state != state::JobState::kRunning) continue;
    if (std::none_of(job.allocations.begin(), job.allocations.end(),
                     [&](const state::NodeAllocation& a) { return a.node == node; })) {
      continue;
    }
    for (const state::NodeAllocation& a : job.allocations) {  // the gang's other parts
      if (a.node != node) agents_[a.node].cancels.push_back(id);
    }
    if (job.spec.requeue) {
      edits.push_back(state::JobRequeued{id, "node " + node + " down: " + why});
    } else {
      state::JobEnded end;
      end.id = id;
      end.state = state::JobState::kNodeFail;
      end.end_time = now;
      end.reason = "node " + node + " down: " + why;
      edits.push_back(end);
    }
    runs_.erase(id);
  }
  agents_[node].registered = false;
  agents_[node].launches.clear();
  agents_[node].cancels.clear();
  work_cv_.notify_all();
  Status s = CommitAndApply(lock, std::move(edits));
  (void)s;  // a failed commit changes nothing; the next check tries again
}

void Controller::CheckAgentsLocked(std::unique_lock<std::mutex>& lock, Time now) {
  const int64_t ms = options_.clock->MonotonicMs();
  std::vector<std::string> lost;
  for (const auto& [name, rec] : image_.nodes) {
    if (rec.state == state::NodeState::kDown) continue;
    const AgentSession& s = agents_[name];
    if (ms - s.last_seen_ms > options_.agent_timeout * 1000) lost.push_back(name);
  }
  for (const std::string& name : lost) {
    NodeLostLocked(lock, name,
                   "agent silent for more than " + FormatDuration(options_.agent_timeout),
                   now);
  }
}

}  // namespace hachi::server
