// NodeService: the agents' side — registration and reconciliation, the work long poll
// (which is also the heartbeat; it waits in the AgentHub, not on the Controller's lock),
// exit reports, and lost nodes.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <iostream>
#include <set>
#include <unordered_set>

#include "server/agent_address.h"
#include "server/fence.h"
#include "server/master_ports.h"
#include "server/node_service.h"

namespace hachi::server {

NodeService::NodeService(Ledger* ledger, Fleet* fleet, AgentHub* hub, StepService* steps,
                         BurnInService* burn_in, UsageService* usage,
                         ClockOffsets* clocks, const Authorizer* authorizer,
                         const ControllerOptions* options)
    : OnLedger(ledger),
      fleet_(fleet),
      hub_(hub),
      steps_(steps),
      burn_in_(burn_in),
      usage_(usage),
      clocks_(clocks),
      authorizer_(authorizer),
      options_(options) {}

Status NodeService::Register(const AgentRegistration& reg, const std::string& peer) {
  if (reg.node.empty()) return InvalidArgument("register: node name is empty");
  Result<std::string> address = AgentAddress(reg.node, reg.address, peer);
  if (!address.ok()) {
    // Said here too: the agent only retries, and the operator reads the server's log.
    std::cerr << "hachi server: " << address.status().message() << "\n";
    return address.status();
  }
  state::NodeRecord rec;
  rec.name = reg.node;
  rec.address = std::move(*address);
  rec.topology_json = reg.topology_json;
  rec.cpus = reg.cpus;
  rec.memory_mib = reg.memory_mib;
  rec.agent_instance = reg.instance;
  rec.cgroup = reg.cgroup;
  rec.gpu_sharing = reg.gpu_sharing;
  Result<NodeHardware> hw = CompileNodeHardware(rec);
  if (!hw.ok()) return hw.status();
  if (reg.cpus <= 0 || reg.memory_mib <= 0) {
    return InvalidArgument("register: node " + reg.node + " reports " +
                           std::to_string(reg.cpus) + " CPUs and " +
                           std::to_string(reg.memory_mib) + " MiB of memory");
  }
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  burn_in_->Held(ledger_);
  const Time now = options_->clock->Now();
  auto old = ledger_->image().nodes.find(reg.node);
  // Idempotent per agent instance: a request from an instance that started before the
  // one registered now (a dead agent's retry, delayed in the network) changes nothing.
  if (auto known = fleet_->agent_started.find(reg.node);
      known != fleet_->agent_started.end() && old != ledger_->image().nodes.end() &&
      !reg.instance.empty() && old->second.agent_instance != reg.instance &&
      reg.agent_started < known->second) {
    return Busy("register: node " + reg.node + " is registered by a newer agent (" +
                old->second.agent_instance + ", started " +
                std::to_string(known->second) + "); this one (" + reg.instance +
                ", started " + std::to_string(reg.agent_started) + ") is stale");
  }
  // The same agent process as before (the server restarted, or the network blinked):
  // it still knows its jobs. Another one: the agent restarted and lost them.
  const bool same_agent = old != ledger_->image().nodes.end() && !reg.instance.empty() &&
                          old->second.agent_instance == reg.instance;
  rec.state = state::NodeState::kUp;
  rec.state_since = now;
  if (old != ledger_->image().nodes.end()) {
    rec.block = old->second.block;
    rec.unhealthy = old->second.unhealthy;
    rec.unhealthy_reasons = old->second.unhealthy_reasons;
    if (old->second.state == state::NodeState::kDrained) {  // a drain outlives restarts
      rec.state = state::NodeState::kDrained;
      rec.state_reason = old->second.state_reason;
      rec.state_since = old->second.state_since;
    }
  }
  // A node new or changed since its checks last passed is burned in first.
  std::optional<api::BurnInWork> burn_in = burn_in_->OnRegisterLocked(
      reg, old != ledger_->image().nodes.end() ? &old->second : nullptr, &rec);
  HACHI_RETURN_IF_ERROR(ledger_->Commit({state::NodeUpserted{rec}}));
  fleet_->agent_started[reg.node] = reg.agent_started;
  fleet_->hardware[reg.node] = std::move(*hw);
  fleet_->base_dirty = true;
  hub_->Open(reg.node);  // what was queued for its predecessor is dropped
  if (burn_in) {
    std::cerr << "hachi server: node " << reg.node << ": " << rec.state_reason
              << (burn_in->gpus.empty() ? "" : " for its GPUs back from repair") << "\n";
    hub_->Send(reg.node, *std::move(burn_in));
  }
  return ReconcileLocked(reg, same_agent, now);
}

namespace {
// Asked to end (cancelled, requeued, preempted, its allocation done): what the agent
// runs of it must stop, and a launch of it not delivered yet must not start.
bool Stopping(const RunInfo& run) {
  return run.state.phase != RunPhase::kRunning || run.preempt_kill_at != kNever;
}
}  // namespace

Status NodeService::ReconcileLocked(const AgentRegistration& reg, bool same_agent,
                                    Time now) {
  fleet_->Held(ledger_);
  // The jobs the records run there against what the agent says it runs.
  const std::unordered_set<state::JobId> running(reg.running.begin(), reg.running.end());
  const std::unordered_set<state::JobId> finished(reg.finished.begin(),
                                                  reg.finished.end());
  std::vector<state::Edit> edits;
  for (const auto& [id, job] : ledger_->image().jobs) {
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
      // restarted before delivering it): send it again. The agent launches a run at
      // most once and answers a repeated one by reporting its exit again. One asked to
      // stop meanwhile is not launched: the stop ends it there as cancelled.
      auto run = fleet_->runs.find(id);
      if (!finished.count(id) && run != fleet_->runs.end() && Stopping(run->second)) {
        hub_->Send(reg.node, api::RunStop{id, job.start_time});
      } else {
        fleet_->DispatchLocked(job, reg.node);
      }
      continue;
    }
    // The agent restarted after the job started and does not know it: its processes'
    // fate is unknown (the agent did not re-adopt it). Requeue or fail it.
    RunInfo& info = fleet_->runs[id];
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
    fleet_->runs.erase(id);
  }
  // Stops what the agent runs without the records' leave: jobs that ended or were
  // requeued while it was away, and jobs whose cancel or preemption was queued in the
  // session just cleared. The former are stale runs: the records gave their GPUs back,
  // but they are in use until the agent reports the exits, so the node takes no new
  // jobs until then (HoldStaleNodesLocked). This registration says which still run.
  std::set<state::JobId>& stale = fleet_->stale_runs[reg.node];
  stale.clear();
  for (state::JobId id : reg.running) {
    auto it = ledger_->image().jobs.find(id);
    const bool here =
        it != ledger_->image().jobs.end() &&
        it->second.state == state::JobState::kRunning &&
        std::any_of(it->second.allocations.begin(), it->second.allocations.end(),
                    [&](const state::NodeAllocation& a) { return a.node == reg.node; });
    auto run = fleet_->runs.find(id);
    const bool stopping = run != fleet_->runs.end() && Stopping(run->second);
    // A gang part the fence counted dead while the gang waits for its other parts: it
    // must stop, and its GPUs stay taken after the job ends until it has.
    const bool fenced_here =
        here && run != fleet_->runs.end() && run->second.state.fenced &&
        std::find(run->second.ended_on.begin(), run->second.ended_on.end(), reg.node) !=
            run->second.ended_on.end();
    if (!here || stopping || fenced_here) {
      // A run the records no longer place here: whichever run of the job it has.
      hub_->Send(reg.node, api::RunStop{id, here ? it->second.start_time : 0});
    }
    if (!here || fenced_here) stale.insert(id);
    // Its time limit as the records have it now: a scontrol update queued for the
    // session just cleared reaches the agent all the same.
    if (here && !stopping && !fenced_here) {
      hub_->Send(reg.node, api::AgentWork::Limit{id, it->second.start_time,
                                                 it->second.req.time_limit});
    }
  }
  if (stale.empty()) fleet_->stale_runs.erase(reg.node);
  steps_->Held(ledger_);
  for (state::Edit& e : steps_->LostStepsLocked(reg)) edits.push_back(std::move(e));
  return ledger_->Commit(std::move(edits));
}

Time NodeService::EndTimeOf(const api::JobExit& e, const state::JobRecord& job) const {
  const Time now = options_->clock->Now();
  // Dated by this server's clock from how long ago the agent saw it end: the agent's
  // wall clock may be off by any amount. An older agent's own end_time otherwise.
  if (e.ended_ago_ms >= 0) return std::max(job.start_time, now - e.ended_ago_ms / 1000);
  return e.end_time > 0 ? e.end_time : now;
}

AgentWork NodeService::Poll(const std::string& node, int wait_ms, int64_t ack,
                            std::optional<int64_t> agent_clock_ms) {
  if (agent_clock_ms && hub_->IsOpen(node)) clocks_->Note(node, *agent_clock_ms);
  return hub_->Wait(node, wait_ms, ack);
}

Status NodeService::ReportExits(const std::string& node,
                                const std::vector<api::JobExit>& exits) {
  if (!hub_->IsOpen(node)) return NotFound("agent " + node + " is not registered");
  hub_->Touch(node);
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  std::vector<state::Edit> edits;
  for (const api::JobExit& e : exits) {
    // A stale run's exit (the records had ended or requeued it): its GPUs are free now.
    if (auto st = fleet_->stale_runs.find(node);
        st != fleet_->stale_runs.end() && st->second.erase(e.job) > 0) {
      if (st->second.empty()) fleet_->stale_runs.erase(st);
      fleet_->WakeLocked();
    }
    auto it = ledger_->image().jobs.find(e.job);
    if (it == ledger_->image().jobs.end() ||
        it->second.state != state::JobState::kRunning) {
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
    RunInfo& info = fleet_->runs[e.job];
    if (e.kind == api::ExitKind::kLaunchFailed && e.busy_port > 0) {
      // Its MASTER_PORT is held there by a process outside Hachi: that port is skipped
      // there from now on, and the job placed again (with another port), not failed.
      fleet_->foreign_ports[PortKey(ledger_->image(), node)][e.busy_port] =
          options_->clock->Now();
      if (info.Take(RunEvent::kRequeueAsked)) {
        info.requeue_reason = e.message + "; placed again with another port";
        std::cerr << "hachi server: job " << e.job << ": " << info.requeue_reason << "\n";
      }
    }
    // A job whose batch script runs on its first node only ends with that
    // part; the other parts only held their nodes.
    const bool first_only = job.spec.batch_on_first_node && job.allocations.size() > 1;
    const bool batch_part = node == job.allocations.front().node;
    if (!CountExit(&info, node, e, static_cast<int>(job.allocations.size()),
                   !(first_only && info.state.batch_ended && !batch_part))) {
      continue;  // this part's exit, reported again
    }
    const bool failed = !(e.kind == api::ExitKind::kExited && e.exit_code == 0);
    if (first_only && batch_part && info.Take(RunEvent::kBatchPartExited)) {
      if (info.parts_left > 0 && !info.cancelling() && !failed) {
        for (const state::NodeAllocation& a : job.allocations) {
          if (a.node != node) hub_->Send(a.node, api::RunStop{e.job, job.start_time});
        }
      }
    }
    if (failed && info.parts_left > 0 && !info.cancelling()) {
      // A gang is one job: when one part fails, stop the others (no edit: at once).
      for (const state::NodeAllocation& a : job.allocations) {
        if (a.node != node) hub_->Send(a.node, api::RunStop{e.job, job.start_time});
      }
    }
    if (info.parts_left > 0) continue;
    edits.push_back(fleet_->RunEndLocked(job, info, EndTimeOf(e, job)));
    fleet_->runs.erase(e.job);
  }
  return ledger_->Commit(std::move(edits));
}

void NodeService::NodeLostLocked(const std::string& node, const std::string& why,
                                 Time now) {
  fleet_->Held(ledger_);
  // Its agent must register again, and what was queued for it is dropped. Its jobs
  // keep their GPUs: cut off, the agent may still be running them (FenceLocked).
  hub_->Close(node);
  // A failed commit changes nothing; the next check tries again.
  (void)ledger_->Commit(
      {state::NodeStateChanged{node, state::NodeState::kDown, why, now}});
}

void NodeService::FenceLocked(Time now) {
  fleet_->Held(ledger_);
  std::vector<state::Edit> edits;
  std::vector<state::JobId> ended;
  std::vector<std::pair<std::string, api::RunStop>> stops;
  for (const state::JobRecord* running : RunningJobsLocked()) {
    const state::JobRecord& job = *running;
    const state::JobId id = job.id;
    auto run = fleet_->runs.find(id);
    bool counted = false;
    for (const state::NodeAllocation& a : job.allocations) {
      if (fleet_->FenceLeftMsLocked(a.node) != 0) continue;  // up, or still fenced
      if (run == fleet_->runs.end()) run = fleet_->runs.emplace(id, RunInfo{}).first;
      api::JobExit e;
      e.job = id;
      e.start_time = job.start_time;
      e.kind = api::ExitKind::kLost;
      e.end_time = now;
      e.message = FencedExitMessage(
          a.node, {options_->lease, options_->kill_grace, options_->fence_margin});
      counted |=
          CountExit(&run->second, a.node, e, static_cast<int>(job.allocations.size()));
    }
    if (run == fleet_->runs.end() || (!counted && !run->second.state.fenced)) continue;
    RunInfo& info = run->second;
    // The gang's other parts cannot go on without this one.
    if (info.Take(RunEvent::kFenceExpired)) {
      for (const state::NodeAllocation& a : job.allocations) {
        if (std::find(info.ended_on.begin(), info.ended_on.end(), a.node) ==
            info.ended_on.end()) {
          stops.emplace_back(a.node, api::RunStop{id, job.start_time});
        }
      }
    }
    if (info.parts_left > 0) continue;  // requeued or ended when the others report
    edits.push_back(fleet_->RunEndLocked(job, info, now));
    ended.push_back(id);
  }
  for (const auto& [n, stop] : stops) hub_->Send(n, stop);
  if (edits.empty()) return;
  // A failed commit changes nothing; the next check tries again (the RunInfo says so).
  if (!ledger_->Commit(std::move(edits)).ok()) return;
  for (state::JobId id : ended) fleet_->runs.erase(id);
}

void NodeService::CheckAgentsLocked(Time now) {
  fleet_->Held(ledger_);
  // A server that stalled (starved of CPU, stopped, its clock's jump) heard no one
  // meanwhile through no fault of the agents: it counts their silence from now, as a
  // restarted one does, rather than take every node down and fence their runs.
  const int64_t mono = options_->clock->MonotonicMs();
  const int64_t gap = last_check_ms_ < 0 ? 0 : mono - last_check_ms_;
  if (last_check_ms_ < 0) checking_since_ms_ = mono;
  last_check_ms_ = mono;
  if (gap > std::max<int64_t>(options_->agent_timeout * 1000 / 2, 5000)) {
    checking_since_ms_ = mono;
    std::cerr << "hachi server: no agent check for " << gap / 1000
              << " s (the server stalled): counting the agents' silence from now\n";
    for (const auto& [name, rec] : ledger_->image().nodes) hub_->Touch(name);
  }
  std::vector<std::string> lost;
  for (const auto& [name, rec] : ledger_->image().nodes) {
    if (rec.state == state::NodeState::kDown) continue;
    if (AgentLost(hub_->SilentForMs(name), options_->agent_timeout)) lost.push_back(name);
  }
  for (const std::string& name : lost) {
    NodeLostLocked(name, AgentLostReason(options_->agent_timeout), now);
  }
  FenceLocked(now);
  StopOverdueLocked(now);
}

std::vector<const state::JobRecord*> NodeService::RunningJobsLocked() const {
  std::vector<const state::JobRecord*> out;
  for (state::JobId id : ledger_->active()) {
    auto it = ledger_->image().jobs.find(id);
    if (it != ledger_->image().jobs.end() &&
        it->second.state == state::JobState::kRunning) {
      out.push_back(&it->second);
    }
  }
  return out;
}

void NodeService::StopOverdueLocked(Time now) {
  fleet_->Held(ledger_);
  const FenceTimes times{options_->lease, options_->kill_grace, options_->fence_margin};
  const int64_t checking = options_->clock->MonotonicMs() - checking_since_ms_;
  std::vector<state::Edit> edits;
  std::vector<state::JobId> ended;
  for (const state::JobRecord* running : RunningJobsLocked()) {
    const state::JobRecord& job = *running;
    const state::JobId id = job.id;
    if (!RunOverdue(job.start_time, job.req.time_limit, now, checking, times)) continue;
    RunInfo& info = fleet_->runs[id];
    if (!info.over_time) {
      // Only a run nothing was asked of: a cancel, a requeue or a preemption under way
      // ends it already, with its own reason.
      if (info.state.phase != RunPhase::kRunning || !info.Take(RunEvent::kCancelAsked))
        continue;
      info.over_time = true;
      info.cancel_reason =
          OverdueReason(job.req.time_limit, now - job.start_time - job.req.time_limit);
      std::cerr << "hachi server: job " << id << ": " << info.cancel_reason << "\n";
      fleet_->StopPartsLocked(job, &info);
    }
    // No part left to report (none was delivered): it ends now, or at the next check
    // if this commit fails.
    if (info.parts_left <= 0) {
      edits.push_back(EndOf(job, info, now));
      ended.push_back(id);
    }
  }
  if (edits.empty()) return;
  if (!ledger_->Commit(std::move(edits)).ok()) return;
  for (state::JobId id : ended) fleet_->runs.erase(id);
}

}  // namespace hachi::server
