// NodeService (node_service.h): what admins do to nodes (drain, resume) and what
// agents say of their GPUs (health, processes, usage samples).
#include <algorithm>
#include <ctime>
#include <deque>
#include <map>

#include "core/strings.h"
#include "server/node_service.h"

namespace hachi::server {
namespace {

std::string ClockTime(Time t) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

Status NodeService::Drain(const std::string& node, const std::string& reason,
                          const Caller& who) {
  HACHI_RETURN_IF_ERROR(
      authorizer_->Authorize(who, Action::kDrain, Resource::Node(node)));
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  auto it = ledger_->image().nodes.find(node);
  if (it == ledger_->image().nodes.end()) return NotFound("no node " + node);
  if (it->second.state == state::NodeState::kDown) {
    return InvalidArgument("node " + node + " is down; drain it when it is back");
  }
  return ledger_->Commit({state::NodeStateChanged{node, state::NodeState::kDrained,
                                                  reason.empty() ? "drained" : reason,
                                                  options_->clock->Now()}});
}

Status NodeService::Resume(const std::string& node, int gpu, const Caller& who) {
  HACHI_RETURN_IF_ERROR(
      authorizer_->Authorize(who, Action::kResume, Resource::Node(node)));
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  burn_in_->Held(ledger_);
  auto it = ledger_->image().nodes.find(node);
  if (it == ledger_->image().nodes.end()) return NotFound("no node " + node);
  const state::NodeRecord& rec = it->second;
  std::optional<api::BurnInWork> work;
  if (gpu >= 0) {
    if (!rec.unhealthy.contains(gpu)) {
      return InvalidArgument("GPU " + std::to_string(gpu) + " of node " + node +
                             " is not unhealthy (unhealthy: {" +
                             rec.unhealthy.ToString() + "})");
    }
    // Back from repair, the GPU is burned in (with the others still being
    // burned in, in one run) unless the node as a whole is, or has no checks.
    GpuSet gpus = GpuSet();
    gpus.Insert(gpu);
    if (rec.burn_in != state::BurnInPhase::kNone && !rec.burn_in_gpus.empty()) {
      gpus = gpus | rec.burn_in_gpus;
    }
    if (rec.state != state::NodeState::kBurnIn) {
      Result<std::vector<state::Edit>> edits = burn_in_->StartLocked(rec, gpus, &work);
      if (!edits.ok()) return edits.status();
      if (work) {
        HACHI_RETURN_IF_ERROR(ledger_->Commit(*std::move(edits)));
        hub_->Send(node, *std::move(work));
        return Status::Ok();
      }
    }
    state::NodeHealthChanged h{node, rec.unhealthy, rec.unhealthy_reasons};
    h.unhealthy.Erase(gpu);
    h.reasons.erase(gpu);
    return ledger_->Commit({h});
  }
  const bool drained = rec.state == state::NodeState::kDrained;
  const bool burning_in = rec.state == state::NodeState::kBurnIn;
  if (!drained && !burning_in && rec.unhealthy.empty()) {
    return InvalidArgument("node " + node + " is " +
                           std::string(state::NodeStateName(rec.state)) +
                           ", not drained, and has no unhealthy GPUs");
  }
  // A node in burn-in runs its checks again (after a failure, the operator's
  // fix), and so does a drained one that has not passed with what it is now; GPUs
  // back from repair are burned in with the node, or on their own.
  const bool unproven = burn_in_->UnprovenLocked(rec);
  std::vector<state::Edit> edits;
  if ((burning_in || (drained && unproven)) && !burn_in_->ChecksLocked(node).empty()) {
    Result<std::vector<state::Edit>> start = burn_in_->StartLocked(rec, GpuSet(), &work);
    if (!start.ok()) return start.status();
    edits = *std::move(start);
    if (!rec.unhealthy.empty())
      edits.push_back(state::NodeHealthChanged{node, GpuSet(), {}});
  } else if (!rec.unhealthy.empty() && !burning_in &&
             !burn_in_->ChecksLocked(node).empty()) {
    if (drained) {
      edits.push_back(state::NodeStateChanged{node, state::NodeState::kUp, "",
                                              options_->clock->Now()});
    }
    Result<std::vector<state::Edit>> start =
        burn_in_->StartLocked(rec, rec.unhealthy, &work);
    if (!start.ok()) return start.status();
    for (state::Edit& e : *start) edits.push_back(std::move(e));
  } else {
    if (drained || burning_in) {
      edits.push_back(state::NodeStateChanged{node, state::NodeState::kUp, "",
                                              options_->clock->Now()});
    }
    if (!rec.unhealthy.empty())
      edits.push_back(state::NodeHealthChanged{node, GpuSet(), {}});
    if (rec.burn_in != state::BurnInPhase::kNone) {
      edits.push_back(state::NodeBurnInChanged{node, rec.burn_in_passed, rec.burn_in_run,
                                               state::BurnInPhase::kNone, GpuSet()});
    }
  }
  HACHI_RETURN_IF_ERROR(ledger_->Commit(std::move(edits)));
  if (work) hub_->Send(node, *std::move(work));
  return Status::Ok();
}

Status NodeService::NoteProcessesLocked(const std::string& node,
                                        const api::AgentHealth& health, int gpus,
                                        Time now) {
  fleet_->Held(ledger_);
  if (!health.has_processes) return Status::Ok();
  for (const api::GpuProcessReport& p : health.processes) {
    if (p.gpu >= gpus) {
      return InvalidArgument("health: node " + node + " has " + std::to_string(gpus) +
                             " GPUs; a process on GPU " + std::to_string(p.gpu));
    }
  }
  Fleet::NodeProcesses& seen = fleet_->gpu_processes[node];
  std::map<std::pair<int, uint32_t>, Time> since;
  for (const api::GpuProcessReport& p : health.processes) {
    auto old = seen.since.find({p.gpu, p.pid});
    since[{p.gpu, p.pid}] = old != seen.since.end() ? old->second : now;
  }
  seen.processes = health.processes;
  seen.since = std::move(since);
  // What each running job holds on each of its GPUs here: its peak, which `show job`
  // sets against what it asked (--gpu-mem, or the whole GPU).
  std::map<std::pair<state::JobId, int>, int64_t> held;
  for (const api::GpuProcessReport& p : health.processes) {
    if (p.job != 0 && p.used_mib > 0) held[{p.job, p.gpu}] += p.used_mib;
  }
  for (const auto& entry : held) {
    // Named, not structured bindings: clang 14 (make analyze) cannot capture those.
    const int gpu = entry.first.second;
    const int64_t mib = entry.second;
    auto job = ledger_->image().jobs.find(entry.first.first);
    auto run = fleet_->runs.find(entry.first.first);
    if (job == ledger_->image().jobs.end() || run == fleet_->runs.end() ||
        job->second.state != state::JobState::kRunning) {
      continue;
    }
    const bool its_gpu =
        std::any_of(job->second.allocations.begin(), job->second.allocations.end(),
                    [&](const state::NodeAllocation& a) {
                      return a.node == node && a.gpus.contains(gpu);
                    });
    if (its_gpu) {
      run->second.gpu_memory_peak_mib = std::max(run->second.gpu_memory_peak_mib, mib);
    }
  }
  return Status::Ok();
}

Status NodeService::ReportHealth(const std::string& node,
                                 const api::AgentHealth& health) {
  hub_->Touch(node);
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  auto it = ledger_->image().nodes.find(node);
  if (it == ledger_->image().nodes.end()) return NotFound("no node " + node);
  const state::NodeRecord& rec = it->second;
  auto hw = fleet_->hardware.find(node);
  const int gpus = hw == fleet_->hardware.end() ? 0 : hw->second.model->gpu_count();
  const Time now = options_->clock->Now();
  HACHI_RETURN_IF_ERROR(NoteProcessesLocked(node, health, gpus, now));
  usage_->Held(ledger_);
  usage_->AddSamplesLocked(node, health.usage);
  state::NodeHealthChanged health_edit{node, rec.unhealthy, rec.unhealthy_reasons};
  GpuSet newly_bad;
  std::string node_fault;          // the first node-wide event's message
  std::map<int, std::string> why;  // GPU -> the event that took it out
  for (const api::GpuHealthEvent& e : health.events) {
    if (StartsWith(e.kind, "mps-")) {  // shown with the node, the last few
      std::deque<std::string>& log = fleet_->gpu_processes[node].mps_events;
      log.push_back(ClockTime(e.at > 0 ? e.at : now) + " " + e.message);
      while (log.size() > 5) log.pop_front();
    }
    const bool gpu_fault = e.fault == "fatal" || e.fault == "reset";
    if (e.fault == "node") {
      if (node_fault.empty()) node_fault = e.message;
      continue;
    }
    if (!gpu_fault) continue;  // info, or the application's own fault
    if (e.gpu < 0) continue;   // a device the agent could not name: nothing to take out
    if (e.gpu >= gpus) {
      return InvalidArgument("health: node " + node + " has " + std::to_string(gpus) +
                             " GPUs; event for GPU " + std::to_string(e.gpu) + ": " +
                             e.message);
    }
    if (health_edit.unhealthy.contains(e.gpu)) continue;  // already out of service
    health_edit.unhealthy.Insert(e.gpu);
    health_edit.reasons[e.gpu] =
        e.message + " (" + ClockTime(e.at > 0 ? e.at : now) + ")";
    newly_bad.Insert(e.gpu);
    why[e.gpu] = e.message;
  }
  std::vector<state::Edit> edits;
  if (!newly_bad.empty()) edits.push_back(health_edit);
  if (!node_fault.empty() && rec.state == state::NodeState::kUp) {
    edits.push_back(state::NodeStateChanged{node, state::NodeState::kDrained,
                                            "health: " + node_fault, now});
  }
  if (edits.empty()) return Status::Ok();
  // The jobs on a GPU that left service (all of the node's on a node-wide fault): stopped
  // everywhere they run, once the GPU's state is durable (commit, then dispatch), and
  // requeued with the event as their reason when every part has reported its exit — not
  // before: until then their processes may still hold the GPUs (and a requeued gang
  // would run twice). An agent that never reports is fenced (docs/fencing.md).
  std::vector<std::pair<std::string, api::RunStop>> stops;
  for (const auto& [id, job] : ledger_->image().jobs) {
    if (job.state != state::JobState::kRunning) continue;
    std::string reason;
    for (const state::NodeAllocation& a : job.allocations) {
      if (a.node != node) continue;
      if (!node_fault.empty()) {
        reason = "node " + node + ": " + node_fault;
      } else if (const GpuSet hit = a.gpus & newly_bad; !hit.empty()) {
        const int g = hit.First();
        reason = "GPU " + std::to_string(g) + " of node " + node + ": " + why[g];
      }
    }
    if (reason.empty()) continue;
    RunInfo& info = fleet_->runs[id];
    if (!info.Take(RunEvent::kRequeueAsked)) continue;  // stopping already
    info.requeue_reason = reason;
    for (const state::NodeAllocation& a : job.allocations) {
      stops.emplace_back(a.node, api::RunStop{id, job.start_time});
    }
  }
  HACHI_RETURN_IF_ERROR(ledger_->Commit(std::move(edits)));
  for (const auto& [n, stop] : stops) hub_->Send(n, stop);
  return Status::Ok();
}

}  // namespace hachi::server
