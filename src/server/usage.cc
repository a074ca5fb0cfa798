// The controller's side of job usage (server/usage_service.h keeps the runs): acting
// on the idle-GPU policy's verdicts, which stops runs, and the reads that need the
// controller's view of the nodes.
#include <iostream>

#include "server/controller.h"
#include "server/controller_metrics.h"

namespace hachi::server {

void Controller::CheckIdleLocked(Time now) {
  usage_.Held(ledger_.get());
  std::vector<state::Edit> edits;
  for (const UsageService::IdleVerdict& v : usage_.DueIdleLocked(now)) {
    const state::JobId id = v.job;
    const std::string& note = v.note;
    auto job = ledger_->image().jobs.find(id);  // running: DueIdleLocked says so
    metrics_->IdleAction(job->second.req.partition, config::IdleActionName(v.action));
    std::cerr << "hachi server: job " << id << ": " << note << ": "
              << config::IdleActionName(v.action) << "\n";
    if (v.action == config::IdleAction::kWarn) continue;
    RunInfo& info = runs_[id];
    // Stopping already (cancelled, or asked to requeue): a requeue would be refused.
    if (!Transition(info.state, RunEvent::kRequeueAsked).ok()) continue;
    if (v.action == config::IdleAction::kCancel) {
      CancelOneLocked(id, "cancelled: " + note, &edits);
    } else {
      info.Take(RunEvent::kRequeueAsked);
      info.requeue_reason = "requeued: " + note;
      StopPartsLocked(job->second, &info);
      if (info.parts_left <= 0) {  // no part was delivered yet: requeued at once
        edits.push_back(state::JobRequeued{id, info.requeue_reason});
        runs_.erase(id);
      }
    }
  }
  if (!edits.empty()) {
    Status s = ledger_->Commit(std::move(edits));
    if (!s.ok()) std::cerr << "hachi server: idle policy: " << s.message() << "\n";
  }
}

void Controller::FlushUsage() { usage_.Flush(); }

Result<std::vector<state::JobUsage>> Controller::Usage(state::JobId id) {
  return usage_.Runs(id);
}

report::GpuReport Controller::GpuHours(const report::ReportQuery& q) const {
  MutexLock lock(&ledger_->mu());
  std::map<std::string, std::string> groups;
  if (q.by == report::ReportBy::kNodeGroup) {
    for (const auto& [name, hw] : hardware_) groups[name] = hw.gpu_model;
  }
  usage_.Held(ledger_.get());
  return usage_.ReportLocked(q, groups);
}

}  // namespace hachi::server
