// JobService: signals, requeues and updates of jobs (scancel --signal, scontrol
// requeue; docs/api.md "Signal and requeue").
#include <map>
#include <set>
#include <string>
#include <vector>

#include "api/job_errors.h"
#include "api/protocol_json.h"
#include "server/auth.h"
#include "server/job_service.h"

namespace hachi::server {

Status JobService::Signal(state::JobId id, int signal, api::SignalScope scope,
                          const Caller& who, int task) {
  if (signal < 1 || signal > 64) {
    return InvalidArgument(std::to_string(signal) + " is not a signal");
  }
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  bool whole_array = false;
  Result<std::vector<state::JobId>> ids = TargetsLocked(id, task, &whole_array);
  if (!ids.ok()) return ids.status();
  std::vector<const state::JobRecord*> running;
  size_t ended = 0;
  for (state::JobId t : *ids) {
    const state::JobRecord& job = ledger_->image().jobs.at(t);
    HACHI_RETURN_IF_ERROR(
        authorizer_->Authorize(who, Action::kSignal, Resource::Job(job)));
    if (job.state == state::JobState::kRunning) running.push_back(&job);
    if (state::IsFinal(job.state)) ++ended;
  }
  if (running.empty()) {
    // Ended: the cancel's refusal, which clients tell apart (scancel --signal is silent
    // for it, as Slurm's); pending or held: not yet running, busy.
    if (ended == ids->size()) {
      return whole_array ? api::ArrayAlreadyEnded(id, ids->size())
                         : api::JobAlreadyEnded(ledger_->image().jobs.at(ids->front()));
    }
    if (whole_array) {
      return Busy("array " + std::to_string(id) +
                  " has no running task; only running jobs can be signalled");
    }
    const state::JobRecord& job = ledger_->image().jobs.at(ids->front());
    return Busy("job " + std::to_string(job.id) + " is " +
                std::string(state::JobStateName(job.state)) +
                "; only running jobs can be signalled");
  }
  for (const state::JobRecord* job : running) {
    // The batch shell runs on the first node (rank 0), as Slurm's batch step does.
    for (const state::NodeAllocation& a : job->allocations) {
      hub_->Send(a.node, api::JobSignal{job->id, signal, scope});
      if (scope == api::SignalScope::kBatch) break;
    }
  }
  return Status::Ok();
}

Status JobService::Requeue(state::JobId id, const Caller& who, int task) {
  MutexLock writer(
      &ledger_->writer_mu());  // held throughout: no other writer changes the jobs
  std::vector<state::JobId> finished;
  std::vector<state::JobId> finished_array;  // each one's JobSpec::array_job_id
  std::vector<state::JobId> running;
  const std::string reason = "requeued by " + (who.user.empty() ? "?" : who.user);
  {
    MutexLock lock(&ledger_->mu());
    fleet_->Held(ledger_);
    bool whole_array = false;
    Result<std::vector<state::JobId>> ids = TargetsLocked(id, task, &whole_array);
    if (!ids.ok()) return ids.status();
    for (state::JobId t : *ids) {  // every task checked before any is touched
      const state::JobRecord& job = ledger_->image().jobs.at(t);
      HACHI_RETURN_IF_ERROR(
          authorizer_->Authorize(who, Action::kRequeue, Resource::Job(job)));
      if (job.state == state::JobState::kPending) {
        if (whole_array) continue;
        return Busy("job " + std::to_string(t) +
                    " is PENDING; only running or finished jobs can be requeued");
      }
      if (job.state == state::JobState::kRunning) {
        auto r = fleet_->runs.find(t);
        if (r != fleet_->runs.end() && r->second.cancelling()) {
          if (whole_array) continue;
          return Busy("job " + std::to_string(t) +
                      " is being cancelled; it cannot be requeued");
        }
        running.push_back(t);
      } else {
        finished.push_back(t);
        finished_array.push_back(job.spec.array_job_id);
      }
    }
    if (running.empty() && finished.empty()) {
      return Busy("array " + std::to_string(id) +
                  " has no running or finished task to requeue");
    }
    // Running: stopped as a preempted job is, and requeued when every part reported.
    std::vector<state::Edit> now;  // runs none of whose parts had been picked up
    for (state::JobId t : running) {
      const state::JobRecord& job = ledger_->image().jobs.at(t);
      RunInfo& info = fleet_->runs[t];
      if (!info.Take(RunEvent::kRequeueAsked)) continue;  // asked already
      info.requeue_reason = reason;
      for (const state::NodeAllocation& a : job.allocations) {
        // Not delivered yet: take the launch back rather than start and stop it (the
        // agent would run a launch and a cancel of one batch in the wrong order).
        if (hub_->TakeBackLaunch(a.node, t)) {
          --info.parts_left;
          info.ended_on.push_back(a.node);
          continue;
        }
        hub_->Send(a.node, api::RunStop{t, job.start_time});
      }
      if (info.parts_left <= 0) {
        now.push_back(fleet_->RunEndLocked(job, info, options_->clock->Now()));
        fleet_->runs.erase(t);
      }
    }
    if (!now.empty()) HACHI_RETURN_IF_ERROR(ledger_->Commit(std::move(now)));
  }
  if (finished.empty()) return Status::Ok();
  // Finished: their environment was dropped from memory when they ended
  // (the ledger compacts them); the store still has it. Read without mu(), so API
  // reads go on; writer_mu() keeps the records as checked.
  // An array's tasks share one payload in the store: read once, and shared again in
  // memory (and so counted once by the pending bound), not one copy per task.
  std::vector<std::shared_ptr<const state::JobPayload>> payloads;
  std::map<state::JobId, std::shared_ptr<const state::JobPayload>> by_array;
  for (size_t i = 0; i < finished.size(); ++i) {
    const state::JobId t = finished[i], array = finished_array[i];
    if (auto it = by_array.find(array); array != 0 && it != by_array.end()) {
      payloads.push_back(it->second);
      continue;
    }
    Result<std::shared_ptr<const state::JobPayload>> p = ledger_->LoadPayload(t);
    if (!p.ok()) {
      return Status(p.status().code(), "job " + std::to_string(t) +
                                           ": cannot requeue: " + p.status().message());
    }
    if (array != 0) by_array[array] = *p;
    payloads.push_back(std::move(*p));
  }
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  std::vector<state::Edit> edits;
  for (size_t i = 0; i < finished.size(); ++i) {
    // Back before the commit, so the pending bound counts this payload (a failed
    // commit leaves a finished job holding its environment again: harmless).
    ledger_->RestorePayload(finished[i], payloads[i]);
    edits.push_back(state::JobRequeued{finished[i], reason});
  }
  HACHI_RETURN_IF_ERROR(ledger_->Commit(std::move(edits)));
  fleet_->WakeLocked();
  return Status::Ok();
}

namespace {

// Whether job `from`'s dependencies lead back to `to` through the unfinished jobs of
// `image` (an update that would make two jobs wait on each other forever). Each job is
// visited once, with a stack of its own rather than the thread's: a chain may be as long
// as the queue.
bool DependsOn(const state::StateImage& image, state::JobId from, state::JobId to) {
  std::set<state::JobId> seen;
  std::vector<state::JobId> next = {from};
  while (!next.empty()) {
    const state::JobId j = next.back();
    next.pop_back();
    if (j == to) return true;
    if (!seen.insert(j).second) continue;
    auto it = image.jobs.find(j);
    if (it == image.jobs.end() || state::IsFinal(it->second.state)) continue;
    for (const sched::Dependency& d : it->second.req.dependencies) {
      if (d.kind != sched::DependencyKind::kSingleton) next.push_back(d.job);
    }
  }
  return false;
}

}  // namespace

Status JobService::Update(state::JobId id, const api::JobUpdate& update,
                          const Caller& who, int task) {
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  if (fleet_->base_dirty) HACHI_RETURN_IF_ERROR(fleet_->RebuildBaseLocked());
  bool whole_array = false;
  Result<std::vector<state::JobId>> ids = TargetsLocked(id, task, &whole_array);
  if (!ids.ok()) return ids.status();
  std::vector<state::Edit> edits;
  std::vector<state::JobId> new_limits;  // running jobs whose agents are told
  for (state::JobId t : *ids) {          // every task checked before any is changed
    const state::JobRecord& job = ledger_->image().jobs.at(t);
    HACHI_RETURN_IF_ERROR(
        authorizer_->Authorize(who, Action::kUpdate, Resource::Job(job)));
    const std::string name = "job " + std::to_string(t);
    if (state::IsFinal(job.state)) {
      if (whole_array) continue;
      return Busy(name + " has already finished (" +
                  std::string(state::JobStateName(job.state)) +
                  "); it cannot be updated");
    }
    sched::JobRequest req = job.req;
    HACHI_RETURN_IF_ERROR(api::ApplyRequestPatch(update.req_patch, &req));
    req.user = job.req.user;  // never changes (JobUpdateFromJson refuses it too)
    if (req.account.empty()) req.account = job.req.user;
    if (req.time_limit < 0) req.time_limit = MaxTimeLocked(req.partition);  // UNLIMITED
    const bool request_changed = !(req == job.req);
    const bool limit_changed = req.time_limit != job.req.time_limit;
    if (job.state == state::JobState::kRunning &&
        !state::RunningRequestMayBecome(job.req, req)) {
      if (whole_array) continue;
      return Busy(name +
                  " is RUNNING: only its time limit, name and comment can change now "
                  "(its agents hold the resources it started with)");
    }
    if (request_changed) {
      // Slurm's rules: a user may shorten a job, only an admin lengthen it; a negative
      // nice is an admin's; a new account or partition must be one the caller may use.
      // A limit of 0 is none: from none to any limit is a shortening.
      if (job.req.time_limit > 0 &&
          (req.time_limit == 0 || req.time_limit > job.req.time_limit)) {
        HACHI_RETURN_IF_ERROR(
            authorizer_->Authorize(who, Action::kRaiseTimeLimit, Resource::Job(job)));
      }
      if (req.nice < 0 && req.nice != job.req.nice) {
        HACHI_RETURN_IF_ERROR(authorizer_->Authorize(who, Action::kNegativeNice, {}));
      }
      if (req.account != job.req.account || req.partition != job.req.partition) {
        HACHI_RETURN_IF_ERROR(authorizer_->Authorize(
            who, Action::kSubmit, Resource::Submit(req.account, req.partition)));
      }
      Result<sched::Job> valid = ValidateJobLocked(req, t);
      if (!valid.ok()) {
        return Status(valid.status().code(), name + ": " + valid.status().message());
      }
      req = valid->req;
      for (const sched::Dependency& d : req.dependencies) {
        if (d.kind != sched::DependencyKind::kSingleton &&
            DependsOn(ledger_->image(), d.job, t)) {
          return InvalidArgument(name + ": a dependency on job " + std::to_string(d.job) +
                                 " would make a cycle (job " + std::to_string(d.job) +
                                 " waits on " + name + ")");
        }
      }
    }
    state::JobUpdated e{t, req, update.name.value_or(job.spec.name),
                        update.comment.value_or(job.spec.comment)};
    if (!request_changed && e.name == job.spec.name && e.comment == job.spec.comment) {
      continue;  // nothing to change
    }
    state::JobSpec renamed = job.spec;  // the name and comment checked as a submit's
    renamed.name = e.name;
    renamed.comment = e.comment;
    HACHI_RETURN_IF_ERROR(CheckJobSpec(renamed));
    edits.push_back(std::move(e));
    if (job.state == state::JobState::kRunning && limit_changed) new_limits.push_back(t);
  }
  if (edits.empty()) {
    if (whole_array) {
      return Busy("array " + std::to_string(id) +
                  " has no task this update could change (they ended, or run)");
    }
    return Status::Ok();
  }
  for (const state::Edit& e : edits)
    fleet_->diagnoses.erase(std::get<state::JobUpdated>(e).id);
  HACHI_RETURN_IF_ERROR(ledger_->Commit(std::move(edits)));
  // Durable first, then the agents: a re-dispatch (DispatchLocked) carries the new
  // limit from the record, and an agent that registers again is told it (Register).
  for (state::JobId t : new_limits) {
    const state::JobRecord& job = ledger_->image().jobs.at(t);
    if (job.state != state::JobState::kRunning) continue;  // ended while committing
    for (const state::NodeAllocation& a : job.allocations) {
      hub_->Send(a.node, api::AgentWork::Limit{t, job.start_time, job.req.time_limit});
    }
  }
  return Status::Ok();
}

}  // namespace hachi::server
