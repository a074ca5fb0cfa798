// Fleet: the state the services share beside the records, and the run control
// (fleet.h).
#include "server/fleet.h"

#include <algorithm>
#include <string>

#include "server/auth.h"
#include "server/fence.h"
#include "server/master_ports.h"

namespace hachi::server {
namespace {

// The MASTER_PORT range the options give (master_ports.h decides within it).
PortRange Ports(const ControllerOptions& o) {
  return {o.master_port_base, o.master_port_count};
}

}  // namespace

Fleet::Fleet(Ledger* ledger, AgentHub* hub, const ControllerOptions* options)
    : OnLedger(ledger), hub_(hub), options_(options) {}

Status Fleet::LoadLocked() {
  for (const auto& [name, rec] : ledger_->image().nodes) {
    Result<NodeHardware> hw = CompileNodeHardware(rec);
    if (hw.ok()) hardware[name] = std::move(*hw);
    // Until its agent registers again the node is not trusted: the server may have
    // been down longer than the agent timeout. Its jobs are reconciled at Register,
    // or ended when the agent stays silent (NodeService::CheckAgentsLocked).
    hub_->Touch(name);
  }
  for (const auto& [id, job] : ledger_->image().jobs) {
    if (job.state != state::JobState::kRunning) continue;
    RunInfo& info = runs[id];
    info.parts_left = static_cast<int>(job.allocations.size());
  }
  return RebuildBaseLocked();
}

Status Fleet::RebuildBaseLocked() {
  Result<BaseCluster> built = BuildBase(ledger_->image(), hardware,
                                        options_->config ? &*options_->config : nullptr);
  if (!built.ok()) return built.status();
  base = std::move(*built);
  base_dirty = false;
  ++base_generation;
  return Status::Ok();
}

void Fleet::DispatchLocked(const state::JobRecord& job, const std::string& node) {
  std::vector<std::string> names;
  std::vector<std::string> addresses;
  for (const state::NodeAllocation& a : job.allocations) {
    names.push_back(a.node);
    auto n = ledger_->image().nodes.find(a.node);
    addresses.push_back(n == ledger_->image().nodes.end() ? "" : n->second.address);
  }
  for (size_t rank = 0; rank < job.allocations.size(); ++rank) {
    const state::NodeAllocation& a = job.allocations[rank];
    if (!node.empty() && a.node != node) continue;
    api::LaunchSpec l;
    l.job = job.id;
    l.spec = job.spec;
    l.user = job.req.user;
    l.partition = job.req.partition;
    l.node = a.node;
    l.gpus = a.gpus;
    l.cpus = a.cpus;
    l.memory_mib = a.memory_mib;
    l.share_milli = a.share_milli;
    l.gpu_memory_mib = a.gpu_memory_mib;
    // MIG devices: their parent GPU and instance ids, from the topology the
    // node registered (the agent needs them for its cgroup's /dev/nvidia-caps rules).
    if (auto hw = hardware.find(a.node); !a.mig.empty() && hw != hardware.end()) {
      for (const std::string& uuid : a.mig) {
        api::MigLaunch m;
        m.uuid = uuid;
        for (size_t k = 0; k < hw->second.mig.size(); ++k) {
          if (hw->second.mig[k].uuid != uuid) continue;
          m.gpu = hw->second.mig[k].gpu;
          m.gpu_instance = hw->second.mig_ids[k].first;
          m.compute_instance = hw->second.mig_ids[k].second;
        }
        l.mig.push_back(std::move(m));
      }
    }
    l.nodelist = names;
    l.node_addresses = addresses;
    l.node_rank = static_cast<int>(rank);
    l.master_port =
        MasterPortOf(job, Ports(*options_));  // the start's: the same on a re-dispatch
    l.gpus_per_node = job.req.GpusPerNode();
    l.time_limit = job.req.time_limit;
    l.kill_grace = options_->kill_grace;
    l.start_time = job.start_time;
    l.restart_count = job.requeues;  // SLURM_RESTART_COUNT
    if (!options_->credential_key.empty()) {
      l.credential = JobCredential(options_->credential_key, job.id, job.start_time);
    }
    hub_->Send(a.node, std::move(l));
  }
}

void Fleet::StopPartsLocked(const state::JobRecord& job, RunInfo* info) {
  for (const state::NodeAllocation& a : job.allocations) {
    // Not delivered yet: drop the launch instead of starting and killing it.
    if (hub_->TakeBackLaunch(a.node, job.id)) {
      api::JobExit e;
      e.job = job.id;
      e.kind = api::ExitKind::kCancelled;
      e.end_time = options_->clock->Now();
      --info->parts_left;
      info->ended_on.push_back(a.node);
      if (!info->worst) info->worst = e;
      continue;
    }
    hub_->Send(a.node, api::RunStop{job.id, job.start_time});
  }
}

void Fleet::CancelLocked(state::JobId id, const std::string& reason,
                         std::vector<state::Edit>* edits) {
  const state::JobRecord& job = ledger_->image().jobs.at(id);
  if (job.state == state::JobState::kPending) {
    diagnoses.erase(id);
    edits->push_back(state::JobEnded{id, state::JobState::kCancelled,
                                     options_->clock->Now(), 0, 0, reason});
    return;
  }
  RunInfo& info = runs[id];
  if (!info.Take(RunEvent::kCancelAsked)) return;
  info.cancel_reason = reason;
  StopPartsLocked(job, &info);
  if (info.parts_left <= 0) {
    edits->push_back(EndOf(job, info, options_->clock->Now()));
    runs.erase(id);
  }
}

state::Edit Fleet::RunEndLocked(const state::JobRecord& job, const RunInfo& info,
                                Time end_time) const {
  return RunEnd(job, info, end_time);
}

void Fleet::WakeLocked() {
  dirty = true;
  loop_cv.SignalAll();
}

int64_t Fleet::FenceLeftMsLocked(const std::string& node) const {
  auto n = ledger_->image().nodes.find(node);
  if (n == ledger_->image().nodes.end() || n->second.state != state::NodeState::kDown)
    return -1;
  return FenceLeftMs(hub_->SilentForMs(node),
                     {options_->lease, options_->kill_grace, options_->fence_margin});
}

std::string Fleet::FenceNoteLocked(const state::JobRecord& job) const {
  if (job.state != state::JobState::kRunning) return "";
  auto run = runs.find(job.id);
  for (const state::NodeAllocation& a : job.allocations) {
    if (run != runs.end() &&
        std::find(run->second.ended_on.begin(), run->second.ended_on.end(), a.node) !=
            run->second.ended_on.end()) {
      continue;
    }
    const int64_t left = FenceLeftMsLocked(a.node);
    if (left < 0) continue;
    return FenceNote(a.node, left, job.spec.requeue);
  }
  return "";
}

void Fleet::HoldStaleNodesLocked(sched::ClusterState* s) const {
  for (const auto& [node, jobs] : stale_runs) {
    auto i = base.node_index.find(node);
    if (jobs.empty() || i == base.node_index.end() ||
        i->second >= static_cast<int>(s->nodes.size())) {
      continue;
    }
    sched::Node& n = s->nodes[i->second];
    if (n.name == node && n.state == sched::NodeState::kUp) {
      n.state = sched::NodeState::kDrained;
    }
  }
}

std::string Fleet::StaleNoteLocked(const std::string& node) const {
  auto st = stale_runs.find(node);
  if (st == stale_runs.end() || st->second.empty()) return "";
  std::string jobs;
  size_t i = 0;
  for (state::JobId id : st->second) {
    jobs += (i == 0                       ? ""
             : i + 1 == st->second.size() ? " and "
                                          : ", ") +
            std::to_string(id);
    ++i;
  }
  return "node " + node + " is stopping job" + (st->second.size() > 1 ? "s " : " ") +
         jobs + "'s earlier run" + (st->second.size() > 1 ? "s" : "") +
         "; it takes no new jobs until " +
         (st->second.size() > 1 ? "they have" : "it has") + " exited";
}

std::string Fleet::ReasonLocked(state::JobId id) const {
  if (auto j = ledger_->image().jobs.find(id);
      j != ledger_->image().jobs.end() && j->second.held &&
      j->second.state == state::JobState::kPending) {
    return std::string(sched::ReasonName(sched::Reason::kHeld));  // not in any snapshot
  }
  auto d = diagnoses.find(id);
  return d == diagnoses.end() ? std::string()
                              : std::string(sched::ReasonName(d->second.reason));
}

}  // namespace hachi::server
