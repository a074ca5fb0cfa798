// Controller: burn-in (issue 19, docs/burn-in.md). Where a registration, a resume and an
// agent's report move a node or its GPUs in and out of service by their checks.
#include "server/burn_in.h"

#include <iostream>

#include "config/cluster_config.h"
#include "core/sha256.h"
#include "server/controller.h"
#include "topo/topology_file.h"

namespace hachi::server {

Result<std::string> BurnInFingerprint(const std::string& gpu_driver,
                                      const std::string& topology_json,
                                      const std::string& node) {
  Result<topo::Topology> t = topo::ParseTopologyJson(topology_json, node);
  if (!t.ok()) return t.status();
  // One line per fact, in a fixed order: what the hardware is, not how we spell it.
  std::string canon = "driver " + gpu_driver + "\n";
  for (const topo::Gpu& g : t->gpus()) {
    canon += "gpu " + std::to_string(g.index) + " " + g.uuid + " " + g.model + " " +
             std::to_string(g.memory_mib) + " " + g.pci_bus_id + "\n";
  }
  for (int a = 0; a < t->gpu_count(); ++a) {
    for (int b = 0; b < t->gpu_count(); ++b) {
      if (a != b) canon += t->link(a, b).Label() + (b + 1 == t->gpu_count() ? "\n" : " ");
    }
  }
  return Sha256Hex(canon).substr(0, 16);
}

std::string BurnInCheckNames(const std::vector<std::string>& checks) {
  std::string out;
  for (const std::string& c : checks) {
    if (!out.empty()) out += ", ";
    out += c.substr(0, c.find(' '));
  }
  return out;
}

std::string BurnInRunningReason(const std::vector<std::string>& checks, GpuSet gpus) {
  std::string out = "burn-in: running " + BurnInCheckNames(checks);
  if (!gpus.empty()) {
    out += std::string(gpus.size() > 1 ? " (GPUs " : " (GPU ") + gpus.ToString() + ")";
  }
  return out;
}

std::string BurnInFailedReason(const std::string& check, const std::string& why) {
  return "burn-in failed: " + check.substr(0, check.find(' ')) + ": " + why;
}

// ---- the Controller's side ----

namespace {

// The edits that hold `rec` out of service for burn-in run `run` in `phase`, `reason`
// shown: the node (state burn-in) when `gpus` is empty, else those GPUs (unhealthy).
std::vector<state::Edit> BurnInHold(const state::NodeRecord& rec, GpuSet gpus, int run,
                                    state::BurnInPhase phase, const std::string& reason,
                                    Time now) {
  std::vector<state::Edit> edits;
  edits.push_back(
      state::NodeBurnInChanged{rec.name, rec.burn_in_passed, run, phase, gpus});
  if (gpus.empty()) {
    edits.push_back(
        state::NodeStateChanged{rec.name, state::NodeState::kBurnIn, reason, now});
  } else {
    state::NodeHealthChanged h{rec.name, rec.unhealthy | gpus, rec.unhealthy_reasons};
    for (int g : gpus.Indices()) h.reasons[g] = reason;
    edits.push_back(std::move(h));
  }
  return edits;
}

}  // namespace

std::vector<std::string> Controller::BurnInChecksLocked(const std::string& node) const {
  auto it = burn_in_nodes_.find(node);
  const bool simulated = it != burn_in_nodes_.end() && it->second.simulated;
  static const config::ClusterConfig kDefaults;
  return config::BurnInChecksFor(options_.config ? *options_.config : kDefaults, node,
                                 simulated);
}

Duration Controller::BurnInTimeout() const {
  return options_.config ? options_.config->burn_in.timeout
                         : config::BurnInConfig().timeout;
}

std::optional<api::BurnInWork> Controller::BurnInOnRegisterLocked(
    const AgentRegistration& reg, const state::NodeRecord* old, state::NodeRecord* rec) {
  if (old != nullptr) {
    rec->burn_in_passed = old->burn_in_passed;
    rec->burn_in_run = old->burn_in_run;
    rec->burn_in = old->burn_in;
    rec->burn_in_gpus = old->burn_in_gpus;
  }
  Result<std::string> fp = BurnInFingerprint(reg.gpu_driver, reg.topology_json, reg.node);
  const std::string fingerprint = fp.ok() ? *fp : "";
  burn_in_nodes_[reg.node] = {fingerprint, reg.simulated};
  burn_in_deadline_.erase(reg.node);
  const std::vector<std::string> checks = BurnInChecksLocked(reg.node);
  if (rec->burn_in_passed == kBurnInAdopt) rec->burn_in_passed = fingerprint;
  if (checks.empty()) {
    // None to run (simulated, or burn-in off): nothing holds the node. GPUs that were
    // being burned in stay out until an admin resumes them.
    if (rec->burn_in_gpus.empty()) rec->burn_in = state::BurnInPhase::kNone;
    if (rec->state == state::NodeState::kBurnIn) {
      rec->state = state::NodeState::kUp;
      rec->state_reason.clear();
    }
    return std::nullopt;
  }
  // An admin's drain outlives burn-in: the checks run when it is resumed.
  if (rec->state == state::NodeState::kDrained) return std::nullopt;
  const Time now = options_.clock->Now();
  GpuSet gpus;
  if (rec->burn_in_passed != fingerprint) {
    rec->burn_in_gpus = GpuSet();  // the whole node's run covers its GPUs
  } else if (rec->burn_in != state::BurnInPhase::kNone && !rec->burn_in_gpus.empty()) {
    gpus = rec->burn_in_gpus;  // a GPU's run the agent's restart cut short
  } else {
    return std::nullopt;
  }
  ++rec->burn_in_run;
  rec->burn_in = state::BurnInPhase::kRunning;
  const std::string reason = BurnInRunningReason(checks, gpus);
  if (gpus.empty()) {
    rec->state = state::NodeState::kBurnIn;
    rec->state_reason = reason;
    rec->state_since = now;
  } else {
    for (int g : gpus.Indices()) rec->unhealthy_reasons[g] = reason;
  }
  burn_in_deadline_[reg.node] = now + BurnInTimeout() + kBurnInReportSlack;
  return api::BurnInWork{rec->burn_in_run, checks, gpus.Indices(), BurnInTimeout()};
}

Result<std::vector<state::Edit>> Controller::StartBurnInLocked(
    const state::NodeRecord& rec, GpuSet gpus, std::optional<api::BurnInWork>* work) {
  const std::vector<std::string> checks = BurnInChecksLocked(rec.name);
  if (checks.empty()) return std::vector<state::Edit>{};
  const Time now = options_.clock->Now();
  const int run = rec.burn_in_run + 1;
  burn_in_deadline_[rec.name] = now + BurnInTimeout() + kBurnInReportSlack;
  *work = api::BurnInWork{run, checks, gpus.Indices(), BurnInTimeout()};
  return BurnInHold(rec, gpus, run, state::BurnInPhase::kRunning,
                    BurnInRunningReason(checks, gpus), now);
}

Status Controller::ReportBurnIn(const std::string& node, const api::BurnInReport& r) {
  if (!agents_.IsOpen(node)) return NotFound("agent " + node + " is not registered");
  agents_.Touch(node);
  MutexLock writer(&writer_mu_);
  MutexLock lock(&mu_);
  auto it = image_.nodes.find(node);
  if (it == image_.nodes.end()) return NotFound("no node " + node);
  const state::NodeRecord& rec = it->second;
  if (r.run != rec.burn_in_run || rec.burn_in != state::BurnInPhase::kRunning) {
    return Status::Ok();  // a run superseded since (a resume, a new registration)
  }
  return FinishBurnInLocked(rec, r.passed, r.check, r.reason);
}

Status Controller::FinishBurnInLocked(const state::NodeRecord& rec, bool passed,
                                      const std::string& check, const std::string& why) {
  const Time now = options_.clock->Now();
  burn_in_deadline_.erase(rec.name);
  std::vector<state::Edit> edits;
  const GpuSet gpus = rec.burn_in_gpus;
  std::string fingerprint = rec.burn_in_passed;
  if (auto known = burn_in_nodes_.find(rec.name);
      passed && gpus.empty() && known != burn_in_nodes_.end()) {
    fingerprint = known->second.fingerprint;
  }
  if (passed) {
    edits.push_back(state::NodeBurnInChanged{rec.name, fingerprint, rec.burn_in_run,
                                             state::BurnInPhase::kNone, GpuSet()});
    if (gpus.empty()) {
      if (rec.state == state::NodeState::kBurnIn) {
        edits.push_back(
            state::NodeStateChanged{rec.name, state::NodeState::kUp, "", now});
      }
    } else {
      state::NodeHealthChanged h{rec.name, rec.unhealthy - gpus, rec.unhealthy_reasons};
      for (int g : gpus.Indices()) h.reasons.erase(g);
      edits.push_back(std::move(h));
    }
    std::cerr << "hachi server: node " << rec.name << ": burn-in passed"
              << (gpus.empty() ? "" : " (GPUs " + gpus.ToString() + ")") << "\n";
  } else {
    const std::string reason = BurnInFailedReason(check, why);
    edits =
        BurnInHold(rec, gpus, rec.burn_in_run, state::BurnInPhase::kFailed, reason, now);
    if (gpus.empty() && rec.state == state::NodeState::kDrained) {
      edits.resize(1);  // an admin drained it meanwhile: the drain stays, with its reason
    }
    std::cerr << "hachi server: node " << rec.name << ": " << reason << "\n";
  }
  dirty_ = true;
  loop_cv_.SignalAll();
  return CommitAndApply(std::move(edits));
}

void Controller::CheckBurnInLocked(Time now) {
  std::vector<std::string> late;
  for (const auto& [node, deadline] : burn_in_deadline_) {
    if (now >= deadline) late.push_back(node);
  }
  for (const std::string& node : late) {
    auto it = image_.nodes.find(node);
    // A node that went down took its run with it: its next registration starts one.
    if (it == image_.nodes.end() || it->second.burn_in != state::BurnInPhase::kRunning ||
        it->second.state == state::NodeState::kDown) {
      burn_in_deadline_.erase(node);
      continue;
    }
    // The agent never answered (an agent without burn-in, or one wedged in a check).
    Status s = FinishBurnInLocked(
        it->second, false, "burn-in",
        "no report from the agent within " + std::to_string(BurnInTimeout()) + " s");
    if (!s.ok())
      std::cerr << "hachi server: burn-in of " << node << ": " << s.message() << "\n";
  }
}

}  // namespace hachi::server
