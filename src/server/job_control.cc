// Controller: signals and requeues of jobs (issue 17: scancel --signal, scontrol
// requeue; docs/api.md "Signal and requeue").
#include <string>
#include <vector>

#include "server/controller.h"

namespace hachi::server {

Status Controller::Signal(state::JobId id, int signal, bool batch_only, const Caller& who,
                          int task) {
  if (signal < 1 || signal > 64) {
    return InvalidArgument(std::to_string(signal) + " is not a signal");
  }
  MutexLock lock(&mu_);
  bool whole_array = false;
  Result<std::vector<state::JobId>> ids = TargetsLocked(id, task, &whole_array);
  if (!ids.ok()) return ids.status();
  std::vector<const state::JobRecord*> running;
  for (state::JobId t : *ids) {
    const state::JobRecord& job = image_.jobs.at(t);
    HACHI_RETURN_IF_ERROR(
        authorizer_.Authorize(who, Action::kSignal, Resource::Job(job)));
    if (job.state == state::JobState::kRunning) running.push_back(&job);
  }
  if (running.empty()) {
    if (whole_array) {
      return Busy("array " + std::to_string(id) +
                  " has no running task; only running jobs can be signalled");
    }
    const state::JobRecord& job = image_.jobs.at(ids->front());
    return Busy("job " + std::to_string(job.id) + " is " +
                std::string(state::JobStateName(job.state)) +
                "; only running jobs can be signalled");
  }
  for (const state::JobRecord* job : running) {
    // The batch shell runs on the first node (rank 0), as Slurm's batch step does.
    for (const state::NodeAllocation& a : job->allocations) {
      agents_.Signal(a.node, api::JobSignal{job->id, signal, batch_only});
      if (batch_only) break;
    }
  }
  return Status::Ok();
}

Status Controller::Requeue(state::JobId id, const Caller& who, int task) {
  MutexLock writer(&writer_mu_);  // held throughout: no other writer changes the jobs
  std::vector<state::JobId> finished;
  std::vector<state::JobId> running;
  const std::string reason = "requeued by " + (who.user.empty() ? "?" : who.user);
  {
    MutexLock lock(&mu_);
    bool whole_array = false;
    Result<std::vector<state::JobId>> ids = TargetsLocked(id, task, &whole_array);
    if (!ids.ok()) return ids.status();
    for (state::JobId t : *ids) {  // every task checked before any is touched
      const state::JobRecord& job = image_.jobs.at(t);
      HACHI_RETURN_IF_ERROR(
          authorizer_.Authorize(who, Action::kRequeue, Resource::Job(job)));
      if (job.state == state::JobState::kPending) {
        if (whole_array) continue;
        return Busy("job " + std::to_string(t) +
                    " is PENDING; only running or finished jobs can be requeued");
      }
      if (job.state == state::JobState::kRunning) {
        auto r = runs_.find(t);
        if (r != runs_.end() && r->second.cancel_requested) {
          if (whole_array) continue;
          return Busy("job " + std::to_string(t) +
                      " is being cancelled; it cannot be requeued");
        }
        running.push_back(t);
      } else {
        finished.push_back(t);
      }
    }
    if (running.empty() && finished.empty()) {
      return Busy("array " + std::to_string(id) +
                  " has no running or finished task to requeue");
    }
    // Running: stopped as a preempted job is, and requeued when every part reported.
    std::vector<state::Edit> now;  // runs none of whose parts had been picked up
    for (state::JobId t : running) {
      const state::JobRecord& job = image_.jobs.at(t);
      RunInfo& info = runs_[t];
      if (info.requeue_on_exit) continue;  // asked already
      info.requeue_on_exit = true;
      info.requeue_reason = reason;
      for (const state::NodeAllocation& a : job.allocations) {
        // Not delivered yet: take the launch back rather than start and stop it (the
        // agent would run a launch and a cancel of one batch in the wrong order).
        if (agents_.TakeBackLaunch(a.node, t)) {
          --info.parts_left;
          info.ended_on.push_back(a.node);
          continue;
        }
        agents_.Cancel(a.node, t);
      }
      if (info.parts_left <= 0) {
        now.push_back(RunEndLocked(job, info, options_.clock->Now()));
        runs_.erase(t);
      }
    }
    if (!now.empty()) HACHI_RETURN_IF_ERROR(CommitAndApply(std::move(now)));
  }
  if (finished.empty()) return Status::Ok();
  // Finished: their environment was dropped from memory when they ended
  // (CompactFinishedLocked); the store still has it. Read without mu_, so API reads go
  // on; writer_mu_ keeps the records as checked.
  std::vector<std::shared_ptr<const state::JobPayload>> payloads;
  for (state::JobId t : finished) {
    Result<std::shared_ptr<const state::JobPayload>> p = store_->LoadPayload(t);
    if (!p.ok()) {
      return Status(p.status().code(), "job " + std::to_string(t) +
                                           ": cannot requeue: " + p.status().message());
    }
    payloads.push_back(std::move(*p));
  }
  MutexLock lock(&mu_);
  std::vector<state::Edit> edits;
  for (size_t i = 0; i < finished.size(); ++i) {
    // Back before the commit, so the pending bound counts this payload (a failed
    // commit leaves a finished job holding its environment again: harmless).
    image_.jobs.at(finished[i]).spec.payload = payloads[i];
    edits.push_back(state::JobRequeued{finished[i], reason});
  }
  HACHI_RETURN_IF_ERROR(CommitAndApply(std::move(edits)));
  dirty_ = true;
  loop_cv_.SignalAll();
  return Status::Ok();
}

}  // namespace hachi::server
