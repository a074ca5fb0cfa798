// JobService (job_service.h): submits, cancels, holds, and what each user has pending.
// Signals, requeues and updates are in job_control.cc; sbatch --test-only in
// test_submit.cc.
#include <string>

#include "api/job_errors.h"
#include "api/request_limits.h"
#include "api/submit_checks.h"
#include "core/bytes.h"
#include "core/strings.h"
#include "sched/dependencies.h"
#include "server/job_service.h"

namespace hachi::server {

JobService::JobService(Ledger* ledger, Fleet* fleet, AgentHub* hub,
                       const Authorizer* authorizer, const ControllerOptions* options)
    : OnLedger(ledger),
      fleet_(fleet),
      hub_(hub),
      authorizer_(authorizer),
      options_(options) {}

void JobService::LoadLocked() {
  const Time now = options_->clock->Now();
  for (const auto& [id, job] : ledger_->image().jobs) {
    if (!job.submit_key.empty()) {
      submit_keys_.Load(job.spec.uid, job.submit_key, id, job.submit_time, now);
    }
    if (!state::IsFinal(job.state)) TrackPendingLocked(id);
  }
}

void JobService::TrackPendingLocked(state::JobId id) {
  fleet_->Held(ledger_);
  auto it = ledger_->image().jobs.find(id);
  const bool pending =
      it != ledger_->image().jobs.end() && it->second.state == state::JobState::kPending;
  const bool counted = pending_counted_.count(id) > 0;
  if (pending == counted) return;
  if (it == ledger_->image().jobs.end()) {  // never: the image keeps every job
    pending_counted_.erase(id);
    return;
  }
  const state::JobRecord& job = it->second;  // counted jobs are never removed
  PendingUse& use = pending_use_[job.req.user];
  const state::JobPayload* payload = job.spec.payload.get();
  if (pending) {
    pending_counted_.insert(id);
    ++use.jobs;
    if (payload != nullptr && use.payloads[payload]++ == 0) use.bytes += payload->bytes();
  } else {
    pending_counted_.erase(id);
    --use.jobs;
    if (payload != nullptr) {
      auto p = use.payloads.find(payload);
      if (p != use.payloads.end() && --p->second == 0) {
        use.bytes -= payload->bytes();
        use.payloads.erase(p);
      }
    }
  }
}

void JobService::Applied(const std::vector<state::Edit>& edits) {
  ledger_->mu().AssertHeld();
  for (const state::Edit& e : edits) {
    const state::JobId id = EditJob(e);
    if (id != 0) TrackPendingLocked(id);
  }
}

Status JobService::CheckSubmit(const SubmitRequest& request, const Caller& who) const {
  // Who may submit, under which account, to which partition: a refusal is a 401/403
  // before anything about the job itself is looked at.
  HACHI_RETURN_IF_ERROR(authorizer_->Authorize(
      who, Action::kSubmit,
      Resource::Submit(request.req.account, request.req.partition)));
  // The checks the client ran too (api/submit_checks.h): sizes, paths, environment.
  HACHI_RETURN_IF_ERROR(api::CheckSubmitRequest(request));
  if (request.req.nice < 0) {  // a negative --nice raises priority: admins only
    HACHI_RETURN_IF_ERROR(authorizer_->Authorize(who, Action::kNegativeNice, {}));
  }
  return Status::Ok();
}

Result<sched::JobRequest> JobService::CompleteRequestLocked(const SubmitRequest& request,
                                                            const Caller& who) const {
  fleet_->Held(ledger_);
  sched::JobRequest req = request.req;
  // Names are text in the API (docs/api.md, "Bytes that are not UTF-8"): a user name
  // that is not UTF-8 would make every listing of the job unreadable to clients.
  if (!IsValidUtf8(who.user)) {
    return InvalidArgument("user: the name of uid " + std::to_string(who.uid) +
                           " is not valid UTF-8");
  }
  req.user = who.user;
  if (req.account.empty()) req.account = who.user;
  if (req.time_limit < 0) req.time_limit = MaxTimeLocked(req.partition);  // UNLIMITED
  return req;
}

Duration JobService::MaxTimeLocked(const std::string& partition) const {
  fleet_->Held(ledger_);
  const int p = partition.empty() ? 0 : fleet_->base.state.PartitionIndex(partition);
  return p >= 0 && p < static_cast<int>(fleet_->base.state.partitions.size())
             ? fleet_->base.state.partitions[p].max_time
             : 0;
}

Result<sched::Job> JobService::ValidateJobLocked(const sched::JobRequest& req,
                                                 state::JobId first_id) const {
  fleet_->Held(ledger_);
  Result<sched::Job> valid = sched::ValidateRequest(fleet_->base.state, req);
  if (!valid.ok()) return valid.status();
  sched::ApplyDefaultMemory(fleet_->base.state, &*valid);  // no --mem: a bounded default
  sched::ApplyDefaultCpus(fleet_->base.state, &*valid);    // no -c: the GPUs' share
  HACHI_RETURN_IF_ERROR(sched::CheckDependencies(first_id, req.dependencies));
  for (const sched::Dependency& d : req.dependencies) {
    if (d.kind == sched::DependencyKind::kSingleton) continue;  // names no job
    if (ledger_->image().jobs.find(d.job) == ledger_->image().jobs.end()) {
      return InvalidArgument("dependency on job " + std::to_string(d.job) +
                             ", which does not exist");
    }
  }
  return valid;
}

Result<std::vector<state::JobId>> JobService::Submit(const SubmitRequest& request,
                                                     const Caller& who) {
  HACHI_RETURN_IF_ERROR(CheckSubmit(request, who));
  std::vector<state::Edit> edits;
  std::vector<state::JobId> ids;
  struct {
    std::string user;
    int64_t jobs = 0, bytes = 0;
  } reserved;
  {
    MutexLock lock(&ledger_->mu());
    fleet_->Held(ledger_);
    if (fleet_->stopping) return Unavailable("the server is stopping");
    if (fleet_->base_dirty) HACHI_RETURN_IF_ERROR(fleet_->RebuildBaseLocked());
    Result<sched::JobRequest> completed = CompleteRequestLocked(request, who);
    if (!completed.ok()) return completed.status();
    const sched::JobRequest& req = *completed;
    const Time now = options_->clock->Now();
    if (!request.idempotency_key.empty()) {
      if (const SubmitKeys::Entry* e =
              submit_keys_.Find(who.uid, request.idempotency_key, now)) {
        if (!e->stored) {
          return Unavailable(
              "a submit with this idempotency key is still being stored; retry");
        }
        for (int i = 0; i < e->count; ++i) ids.push_back(e->first + i);
        return ids;  // a retry: the first submit's jobs, nothing new
      }
    }
    const state::JobId first = ledger_->next_id();
    Result<sched::Job> valid = ValidateJobLocked(req, first);
    if (!valid.ok()) return valid.status();
    const int count =
        request.array_tasks.empty() ? 1 : static_cast<int>(request.array_tasks.size());
    // What the user may have pending (ControllerOptions::max_pending_*): the array's
    // payload counts once, as it is kept once.
    PendingUse& use = pending_use_[req.user];
    const int64_t bytes = request.spec.payload ? request.spec.payload->bytes() : 0;
    const int64_t max_jobs = options_->max_pending_jobs_per_user;
    const int64_t max_bytes = options_->max_pending_bytes_per_user;
    if (max_jobs > 0 && use.jobs + use.reserved_jobs + count > max_jobs) {
      return Busy("user " + req.user + " has " +
                  std::to_string(use.jobs + use.reserved_jobs) +
                  " jobs pending and may have at most " + std::to_string(max_jobs) +
                  " (the server's --max-pending-jobs); this submit would add " +
                  std::to_string(count));
    }
    if (max_bytes > 0 && use.bytes + use.reserved_bytes + bytes > max_bytes) {
      return Busy("user " + req.user + " has " +
                  std::to_string(use.bytes + use.reserved_bytes) +
                  " bytes of scripts, environments and arguments pending and may have at "
                  "most " +
                  std::to_string(max_bytes) +
                  " (the server's --max-pending-bytes); this submit would add " +
                  std::to_string(bytes));
    }
    use.reserved_jobs += count;
    use.reserved_bytes += bytes;
    reserved = {req.user, count, bytes};
    ledger_->ReserveIds(count);
    if (!request.idempotency_key.empty()) {
      submit_keys_.Reserve(who.uid, request.idempotency_key, first, count, now);
    }
    for (int i = 0; i < count; ++i) {
      state::JobRecord r;
      r.id = first + i;
      r.req = valid->req;
      r.spec = request.spec;
      r.spec.uid = who.uid;
      r.spec.gid = who.gid;
      if (!request.array_tasks.empty()) {
        r.spec.array_job_id = first;
        r.spec.array_task_id = request.array_tasks[i];
        r.spec.array_max_running = request.array_max_running;
      }
      r.held = request.hold;
      r.submit_time = now;
      r.submit_key = request.idempotency_key;
      ids.push_back(r.id);
      edits.push_back(state::JobSubmitted{std::move(r)});
    }
  }
  // Outside both locks: concurrent submits share one transaction (group commit). Not
  // under the writer's lock either: new jobs change nothing another writer has checked.
  HACHI_RETURN_IF_ERROR(ledger_->CommitNew(edits, [&](bool committed) {
    ledger_->mu().AssertHeld();
    fleet_->Held(ledger_);
    PendingUse& use = pending_use_[reserved.user];
    use.reserved_jobs -= reserved.jobs;  // counted by Applied from here
    use.reserved_bytes -= reserved.bytes;
    if (committed) fleet_->stats.submits += static_cast<int64_t>(ids.size());
    if (request.idempotency_key.empty()) return;
    if (committed) {
      submit_keys_.Stored(who.uid, request.idempotency_key);
    } else {
      submit_keys_.Forget(who.uid, request.idempotency_key);
    }
  }));
  return ids;
}

Result<std::vector<state::JobId>> JobService::TargetsLocked(state::JobId id, int task,
                                                            bool* whole_array) const {
  fleet_->Held(ledger_);
  *whole_array = false;
  auto it = ledger_->image().jobs.find(id);
  if (it == ledger_->image().jobs.end()) return NotFound("no job " + std::to_string(id));
  const bool is_array = it->second.spec.array_job_id == id;
  if (task < 0 && !is_array) return std::vector<state::JobId>{id};
  if (!is_array) {
    return NotFound("job " + std::to_string(id) + " is not an array, so it has no task " +
                    std::to_string(task));
  }
  // An array's tasks have consecutive ids from the array's (Submit).
  std::vector<state::JobId> ids;
  for (; it != ledger_->image().jobs.end() && it->second.spec.array_job_id == id; ++it) {
    if (task < 0 || it->second.spec.array_task_id == task) ids.push_back(it->first);
  }
  if (ids.empty()) {
    return NotFound("array " + std::to_string(id) + " has no task " +
                    std::to_string(task));
  }
  *whole_array = task < 0;
  return ids;
}

Status JobService::Cancel(state::JobId id, const Caller& who, int task) {
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  bool whole_array = false;
  Result<std::vector<state::JobId>> ids = TargetsLocked(id, task, &whole_array);
  if (!ids.ok()) return ids.status();
  // Every task is checked before any is touched: all of them or none.
  std::vector<state::JobId> live;
  for (state::JobId t : *ids) {
    const state::JobRecord& job = ledger_->image().jobs.at(t);
    HACHI_RETURN_IF_ERROR(
        authorizer_->Authorize(who, Action::kCancel, Resource::Job(job)));
    if (!state::IsFinal(job.state)) live.push_back(t);
  }
  if (live.empty()) {
    if (whole_array) return api::ArrayAlreadyEnded(id, ids->size());
    return api::JobAlreadyEnded(ledger_->image().jobs.at(ids->front()));
  }
  const std::string reason = "cancelled by " + (who.user.empty() ? "?" : who.user);
  std::vector<state::Edit> edits;
  for (state::JobId t : live) fleet_->CancelLocked(t, reason, &edits);
  if (edits.empty()) return Status::Ok();
  return ledger_->Commit(std::move(edits));
}

Status JobService::Hold(state::JobId id, bool hold, const Caller& who, int task,
                        bool user_hold) {
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  bool whole_array = false;
  Result<std::vector<state::JobId>> ids = TargetsLocked(id, task, &whole_array);
  if (!ids.ok()) return ids.status();
  const bool by_admin = hold && who.admin && !user_hold;
  std::vector<state::Edit> edits;
  bool any_pending = false;
  for (state::JobId t : *ids) {
    const state::JobRecord& job = ledger_->image().jobs.at(t);
    HACHI_RETURN_IF_ERROR(authorizer_->Authorize(
        who, hold ? Action::kHold : Action::kRelease, Resource::Job(job)));
    if (job.state != state::JobState::kPending) {
      if (whole_array) continue;  // an array's tasks that run or ended are left alone
      return InvalidArgument("job " + std::to_string(t) + " is " +
                             std::string(state::JobStateName(job.state)) +
                             "; only pending jobs can be " +
                             (hold ? "held" : "released"));
    }
    any_pending = true;
    if (!hold && job.held_by_admin && !who.admin) {
      return PermissionDenied("job " + std::to_string(t) +
                              " was held by an administrator; only an administrator "
                              "can release it");
    }
    // As Slurm: an administrator's hold makes the hold theirs and their uhold makes it
    // the user's; a user's hold leaves an administrator's as it is.
    const bool changes = hold ? !job.held || (job.held_by_admin != by_admin &&
                                              (who.admin || !job.held_by_admin))
                              : job.held;
    if (changes) {
      edits.push_back(state::JobHeld{t, hold, by_admin});
    }
  }
  if (!any_pending) {
    return InvalidArgument("array " + std::to_string(id) +
                           " has no pending task; only pending jobs can be " +
                           (hold ? "held" : "released"));
  }
  if (edits.empty()) return Status::Ok();
  return ledger_->Commit(std::move(edits));
}

}  // namespace hachi::server
