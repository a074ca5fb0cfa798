#include "server/burn_in_service.h"

#include <iostream>

#include "server/burn_in.h"

namespace hachi::server {

BurnInService::BurnInService(Ledger* ledger, AgentHub* agents,
                             const config::ClusterConfig* config, const Clock* clock)
    : OnLedger(ledger), agents_(agents), config_(config), clock_(clock) {}

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

std::vector<std::string> BurnInService::ChecksLocked(const std::string& node) const {
  auto it = nodes_.find(node);
  const bool simulated = it != nodes_.end() && it->second.simulated;
  static const config::ClusterConfig kDefaults;
  return config::BurnInChecksFor(config_ != nullptr ? *config_ : kDefaults, node,
                                 simulated);
}

Duration BurnInService::Timeout() const {
  return config_ != nullptr ? config_->burn_in.timeout : config::BurnInConfig().timeout;
}

std::optional<api::BurnInWork> BurnInService::OnRegisterLocked(
    const api::AgentRegistration& reg, const state::NodeRecord* old,
    state::NodeRecord* rec) {
  if (old != nullptr) {
    rec->burn_in_passed = old->burn_in_passed;
    rec->burn_in_run = old->burn_in_run;
    rec->burn_in = old->burn_in;
    rec->burn_in_gpus = old->burn_in_gpus;
  }
  Result<std::string> fp = BurnInFingerprint(reg.gpu_driver, reg.topology_json, reg.node);
  const std::string fingerprint = fp.ok() ? *fp : "";
  nodes_[reg.node] = {fingerprint, reg.simulated};
  deadline_.erase(reg.node);
  const std::vector<std::string> checks = ChecksLocked(reg.node);
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
  const Time now = clock_->Now();
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
  deadline_[reg.node] = now + Timeout() + kBurnInReportSlack;
  return api::BurnInWork{rec->burn_in_run, checks, gpus.Indices(), Timeout()};
}

Result<std::vector<state::Edit>> BurnInService::StartLocked(
    const state::NodeRecord& rec, GpuSet gpus, std::optional<api::BurnInWork>* work) {
  const std::vector<std::string> checks = ChecksLocked(rec.name);
  if (checks.empty()) return std::vector<state::Edit>{};
  const Time now = clock_->Now();
  const int run = rec.burn_in_run + 1;
  deadline_[rec.name] = now + Timeout() + kBurnInReportSlack;
  *work = api::BurnInWork{run, checks, gpus.Indices(), Timeout()};
  return BurnInHold(rec, gpus, run, state::BurnInPhase::kRunning,
                    BurnInRunningReason(checks, gpus), now);
}

Status BurnInService::Report(const std::string& node, const api::BurnInReport& r) {
  if (!agents_->IsOpen(node)) return NotFound("agent " + node + " is not registered");
  agents_->Touch(node);
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  auto it = ledger_->image().nodes.find(node);
  if (it == ledger_->image().nodes.end()) return NotFound("no node " + node);
  const state::NodeRecord& rec = it->second;
  if (r.run != rec.burn_in_run || rec.burn_in != state::BurnInPhase::kRunning) {
    return Status::Ok();  // a run superseded since (a resume, a new registration)
  }
  return FinishLocked(rec, r.passed, r.check, r.reason);
}

Status BurnInService::FinishLocked(const state::NodeRecord& rec, bool passed,
                                   const std::string& check, const std::string& why) {
  const Time now = clock_->Now();
  deadline_.erase(rec.name);
  std::vector<state::Edit> edits;
  const GpuSet gpus = rec.burn_in_gpus;
  std::string fingerprint = rec.burn_in_passed;
  if (auto known = nodes_.find(rec.name);
      passed && gpus.empty() && known != nodes_.end()) {
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
  return ledger_->Commit(std::move(edits));  // wakes the scheduling loop
}

bool BurnInService::UnprovenLocked(const state::NodeRecord& rec) const {
  auto known = nodes_.find(rec.name);
  return known != nodes_.end() && rec.burn_in_passed != known->second.fingerprint;
}

void BurnInService::CheckLateLocked(Time now) {
  std::vector<std::string> late;
  for (const auto& [node, deadline] : deadline_) {
    if (now >= deadline) late.push_back(node);
  }
  for (const std::string& node : late) {
    auto it = ledger_->image().nodes.find(node);
    // A node that went down took its run with it: its next registration starts one.
    if (it == ledger_->image().nodes.end() ||
        it->second.burn_in != state::BurnInPhase::kRunning ||
        it->second.state == state::NodeState::kDown) {
      deadline_.erase(node);
      continue;
    }
    // The agent never answered (an agent without burn-in, or one wedged in a check).
    Status s = FinishLocked(
        it->second, false, "burn-in",
        "no report from the agent within " + std::to_string(Timeout()) + " s");
    if (!s.ok())
      std::cerr << "hachi server: burn-in of " << node << ": " << s.message() << "\n";
  }
}

}  // namespace hachi::server
