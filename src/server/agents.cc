// Controller: the agents' side — registration and reconciliation, the work long poll
// (which is also the heartbeat; it waits in the AgentHub, not on the Controller's lock),
// exit reports, and lost nodes.
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
  MutexLock writer(&writer_mu_);
  MutexLock lock(&mu_);
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
  HACHI_RETURN_IF_ERROR(CommitAndApply({state::NodeUpserted{rec}}));
  hardware_[reg.node] = std::move(*hw);
  base_dirty_ = true;
  agents_.Open(reg.node);  // what was queued for its predecessor is dropped

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
      state::JobEnded end = EndOf(job, info, now);
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
    if (!here || stopping) agents_.Cancel(reg.node, id);
  }
  return CommitAndApply(std::move(edits));
}

AgentWork Controller::Poll(const std::string& node, int wait_ms) {
  return agents_.Wait(node, wait_ms);
}

Status Controller::Report(const std::string& node,
                          const std::vector<api::JobExit>& exits) {
  if (!agents_.IsOpen(node)) return NotFound("agent " + node + " is not registered");
  agents_.Touch(node);
  MutexLock writer(&writer_mu_);
  MutexLock lock(&mu_);
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
    if (!CountExit(&info, node, e, static_cast<int>(job.allocations.size()))) {
      continue;  // this part's exit, reported again
    }
    const bool failed = !(e.kind == api::ExitKind::kExited && e.exit_code == 0);
    if (failed && info.parts_left > 0 && !info.cancel_requested) {
      // A gang is one job: when one part fails, stop the others (no edit: at once).
      for (const state::NodeAllocation& a : job.allocations) {
        if (a.node != node) agents_.Cancel(a.node, e.job);
      }
    }
    if (info.parts_left > 0) continue;
    if (info.requeue_on_exit) {
      edits.push_back(state::JobRequeued{e.job, "preempted"});
    } else {
      edits.push_back(
          EndOf(job, info, e.end_time > 0 ? e.end_time : options_.clock->Now()));
    }
    runs_.erase(e.job);
  }
  return CommitAndApply(std::move(edits));
}

void Controller::NodeLostLocked(const std::string& node, const std::string& why,
                                Time now) {
  // Its agent must register again, and what was queued for it is dropped.
  agents_.Close(node);
  std::vector<state::Edit> edits;
  std::vector<std::pair<std::string, state::JobId>> stops;
  edits.push_back(state::NodeStateChanged{node, state::NodeState::kDown, why, now});
  for (const auto& [id, job] : image_.jobs) {
    if (job.state != state::JobState::kRunning) continue;
    if (std::none_of(job.allocations.begin(), job.allocations.end(),
                     [&](const state::NodeAllocation& a) { return a.node == node; })) {
      continue;
    }
    for (const state::NodeAllocation& a : job.allocations) {  // the gang's other parts
      if (a.node != node) stops.emplace_back(a.node, id);
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
  // A failed commit changes nothing; the next check tries again.
  if (!CommitAndApply(std::move(edits)).ok()) return;
  for (const auto& [n, id] : stops) agents_.Cancel(n, id);  // once the end is durable
}

void Controller::CheckAgentsLocked(Time now) {
  std::vector<std::string> lost;
  for (const auto& [name, rec] : image_.nodes) {
    if (rec.state == state::NodeState::kDown) continue;
    const int64_t silent = agents_.SilentForMs(name);
    if (silent < 0 || silent > options_.agent_timeout * 1000) lost.push_back(name);
  }
  for (const std::string& name : lost) {
    NodeLostLocked(name,
                   "agent silent for more than " + FormatDuration(options_.agent_timeout),
                   now);
  }
}

}  // namespace hachi::server
