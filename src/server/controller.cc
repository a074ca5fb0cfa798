// Controller: construction, jobs and nodes (agents.cc: registration, exits and lost
// nodes; cycle.cc: the scheduling loop and the plan applier; tokens.cc: tokens;
// observe.cc: metrics and explanations).
#include "server/controller.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <iostream>

#include "api/request_limits.h"
#include "core/bytes.h"
#include "core/strings.h"
#include "sched/dependencies.h"
#include "sched/features.h"
#include "sched/gpu_share.h"
#include "server/auth.h"
#include "server/controller_metrics.h"
#include "topo/analysis.h"

namespace hachi::server {

Controller::Controller(ControllerOptions options, std::unique_ptr<Ledger> ledger)
    : options_(std::move(options)),
      ledger_(std::move(ledger)),
      agents_(options_.clock),
      streams_(8 << 20, options_.clock),
      burn_in_(ledger_.get(), &agents_, options_.config ? &*options_.config : nullptr,
               options_.clock),
      tokens_(ledger_.get(), &authorizer_, options_.clock, options_.credential_key),
      usage_(ledger_.get(), options_.config ? &*options_.config : nullptr,
             options_.clock) {}

Controller::~Controller() { Stop(); }

Result<std::unique_ptr<Controller>> Controller::Create(
    ControllerOptions options, std::unique_ptr<state::Store> store) {
  options.sched.explain = true;  // pending reasons for every job
  if (options.clock == nullptr) options.clock = RealClock();
  if (options.lease <= 0) options.lease = options.agent_timeout;
  if (options.fence_margin < 0) options.fence_margin = 0;
  Result<std::unique_ptr<sched::Scheduler>> scheduler =
      sched::Scheduler::Create(options.sched);
  if (!scheduler.ok()) return scheduler.status();
  Result<std::unique_ptr<Ledger>> ledger = Ledger::Open(std::move(store));
  if (!ledger.ok()) return ledger.status();
  std::unique_ptr<Controller> c(new Controller(std::move(options), std::move(*ledger)));
  c->ledger_->AddObserver(c.get());
  c->ledger_->AddObserver(&c->usage_);
  // Metrics before any thread: the store reports each commit's latency (it knows no
  // metrics), and a scrape asks the controller for its gauges.
  c->metrics_ = std::make_unique<ControllerMetrics>();
  c->ledger_->SetCommitObserver(
      [m = c->metrics_.get()](double seconds) { m->store_commit().Observe(seconds); });
  c->metrics_->registry().AddCollector(
      [raw = c.get()](metrics::Writer& w) { WriteClusterGauges(raw->Gauges(), w); });
  // Nothing else runs yet; the locks are taken so the analysis sees the contract kept.
  MutexLock cycle(&c->cycle_mu_);
  MutexLock lock(&c->ledger_->mu());
  c->scheduler_ = std::move(*scheduler);
  Result<Authorizer> authorizer =
      Authorizer::FromConfig(c->options_.config ? &*c->options_.config : nullptr);
  if (!authorizer.ok()) return authorizer.status();
  c->authorizer_ = std::move(*authorizer);
  c->usage_.Held(c->ledger_.get());
  c->usage_.ResumeLocked();  // the running jobs' usage so far
  const Time now = c->options_.clock->Now();
  for (const auto& [id, job] : c->ledger_->image().jobs) {
    if (!job.submit_key.empty()) {
      c->submit_keys_.Load(job.spec.uid, job.submit_key, id, job.submit_time, now);
    }
    if (!state::IsFinal(job.state)) c->TrackPendingLocked(id);
  }
  for (const auto& [name, rec] : c->ledger_->image().nodes) {
    Result<NodeHardware> hw = CompileNodeHardware(rec);
    if (hw.ok()) c->hardware_[name] = std::move(*hw);
    // Until its agent registers again the node is not trusted: the server may have
    // been down longer than the agent timeout. Its jobs are reconciled at Register,
    // or ended when the agent stays silent (CheckAgentsLocked).
    c->agents_.Touch(name);
  }
  for (const auto& [id, job] : c->ledger_->image().jobs) {
    if (job.state != state::JobState::kRunning) continue;
    RunInfo& info = c->runs_[id];
    info.parts_left = static_cast<int>(job.allocations.size());
  }
  HACHI_RETURN_IF_ERROR(c->RebuildBaseLocked());
  return c;
}

void Controller::Start() {
  MutexLock lock(&ledger_->mu());
  if (loop_.joinable() || stopping_) return;
  loop_ = std::thread([this] { Loop(); });
}

bool Controller::stopping() const {
  MutexLock lock(&ledger_->mu());
  return stopping_;
}

void Controller::SetNotifier(std::function<void(const std::string&)> notify) {
  agents_.SetNotifier(notify);
  ledger_->SetNotifier(notify);
  MutexLock lock(&ledger_->mu());
  notify_ = std::move(notify);
}

void Controller::Stop() {
  {
    MutexLock lock(&ledger_->mu());
    stopping_ = true;
    loop_cv_.SignalAll();
    for (state::JobId id : ledger_->active()) ledger_->NotifyJob(id);
  }
  agents_.Stop();
  if (loop_.joinable()) loop_.join();
  FlushUsage();  // what the running jobs did so far, for the next server
}

Status Controller::RebuildBaseLocked() {
  Result<BaseCluster> base = BuildBase(ledger_->image(), hardware_,
                                       options_.config ? &*options_.config : nullptr);
  if (!base.ok()) return base.status();
  base_ = std::move(*base);
  base_dirty_ = false;
  ++base_generation_;
  return Status::Ok();
}

void Controller::TrackPendingLocked(state::JobId id) {
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

// ---- The write path's hooks (Ledger::Observer) ----

void Controller::Extend(std::vector<state::Edit>* edits) {
  ledger_->mu().AssertHeld();
  EndStepsOfJobsLocked(edits);  // a run's steps end with it
}

void Controller::Applied(const std::vector<state::Edit>& edits) {
  ledger_->mu().AssertHeld();
  bool schedulable = false;  // a held job's submit gives a cycle nothing to do
  for (const state::Edit& e : edits) {
    const auto* submitted = std::get_if<state::JobSubmitted>(&e);
    if (submitted == nullptr || !submitted->record.held) schedulable = true;
    const state::JobId id = submitted != nullptr
                                ? submitted->record.id
                                : std::visit(
                                      [](const auto& x) -> state::JobId {
                                        if constexpr (requires { x.id; }) {
                                          return x.id;
                                        } else {
                                          return 0;  // a node's or a token's edit
                                        }
                                      },
                                      e);
    if (id == 0) continue;
    TrackPendingLocked(id);
    if (!ledger_->active().count(id)) eligible_since_.erase(id);
    // Released or requeued: its next queue wait counts from now
    // (hachi_queue_wait_seconds).
    if (const auto* r = std::get_if<state::JobRequeued>(&e)) {
      eligible_since_[r->id] = {options_.clock->Now(), true};
    } else if (const auto* h = std::get_if<state::JobHeld>(&e);
               h != nullptr && !h->held) {
      eligible_since_[h->id] = {options_.clock->Now(), false};
    }
  }
  StepsEndedLocked(edits);
  if (schedulable) {
    dirty_ = true;
    loop_cv_.SignalAll();
  }
}

// ---- Jobs ----

Status Controller::CheckSubmit(const SubmitRequest& request, const Caller& who) const {
  // Who may submit, under which account, to which partition: a refusal is a 401/403
  // before anything about the job itself is looked at.
  HACHI_RETURN_IF_ERROR(authorizer_.Authorize(
      who, Action::kSubmit,
      Resource::Submit(request.req.account, request.req.partition)));
  // The checks the client ran too (api/submit_checks.h): sizes, paths, environment.
  HACHI_RETURN_IF_ERROR(api::CheckSubmitRequest(request));
  if (request.req.nice < 0) {  // a negative --nice raises priority: admins only
    HACHI_RETURN_IF_ERROR(authorizer_.Authorize(who, Action::kNegativeNice, {}));
  }
  return Status::Ok();
}

Result<sched::JobRequest> Controller::CompleteRequestLocked(const SubmitRequest& request,
                                                            const Caller& who) const {
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

Duration Controller::MaxTimeLocked(const std::string& partition) const {
  const int p = partition.empty() ? 0 : base_.state.PartitionIndex(partition);
  return p >= 0 && p < static_cast<int>(base_.state.partitions.size())
             ? base_.state.partitions[p].max_time
             : 0;
}

Result<sched::Job> Controller::ValidateJobLocked(const sched::JobRequest& req,
                                                 state::JobId first_id) const {
  Result<sched::Job> valid = sched::ValidateRequest(base_.state, req);
  if (!valid.ok()) return valid.status();
  sched::ApplyDefaultMemory(base_.state, &*valid);  // no --mem: a bounded default
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

Result<std::vector<state::JobId>> Controller::Submit(const SubmitRequest& request,
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
    if (stopping_) return Unavailable("the server is stopping");
    if (base_dirty_) HACHI_RETURN_IF_ERROR(RebuildBaseLocked());
    Result<sched::JobRequest> completed = CompleteRequestLocked(request, who);
    if (!completed.ok()) return completed.status();
    const sched::JobRequest& req = *completed;
    const Time now = options_.clock->Now();
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
    const int64_t max_jobs = options_.max_pending_jobs_per_user;
    const int64_t max_bytes = options_.max_pending_bytes_per_user;
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
                  " bytes of scripts and environments pending and may have at most " +
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
    PendingUse& use = pending_use_[reserved.user];
    use.reserved_jobs -= reserved.jobs;  // counted by Applied from here
    use.reserved_bytes -= reserved.bytes;
    if (committed) stats_.submits += static_cast<int64_t>(ids.size());
    if (request.idempotency_key.empty()) return;
    if (committed) {
      submit_keys_.Stored(who.uid, request.idempotency_key);
    } else {
      submit_keys_.Forget(who.uid, request.idempotency_key);
    }
  }));
  return ids;
}

Result<std::vector<state::JobId>> Controller::TargetsLocked(state::JobId id, int task,
                                                            bool* whole_array) const {
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

Status Controller::Cancel(state::JobId id, const Caller& who, int task) {
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  bool whole_array = false;
  Result<std::vector<state::JobId>> ids = TargetsLocked(id, task, &whole_array);
  if (!ids.ok()) return ids.status();
  // Every task is checked before any is touched: all of them or none.
  std::vector<state::JobId> live;
  for (state::JobId t : *ids) {
    const state::JobRecord& job = ledger_->image().jobs.at(t);
    HACHI_RETURN_IF_ERROR(
        authorizer_.Authorize(who, Action::kCancel, Resource::Job(job)));
    if (!state::IsFinal(job.state)) live.push_back(t);
  }
  if (live.empty()) {
    if (whole_array) {
      return InvalidArgument("array " + std::to_string(id) + ": all its " +
                             std::to_string(ids->size()) + " tasks already ended");
    }
    const state::JobRecord& job = ledger_->image().jobs.at(ids->front());
    return InvalidArgument("job " + std::to_string(job.id) + " already ended (" +
                           std::string(state::JobStateName(job.state)) + ")");
  }
  const std::string reason = "cancelled by " + (who.user.empty() ? "?" : who.user);
  std::vector<state::Edit> edits;
  for (state::JobId t : live) CancelOneLocked(t, reason, &edits);
  if (edits.empty()) return Status::Ok();
  return ledger_->Commit(std::move(edits));
}

void Controller::CancelOneLocked(state::JobId id, const std::string& reason,
                                 std::vector<state::Edit>* edits) {
  const state::JobRecord& job = ledger_->image().jobs.at(id);
  if (job.state == state::JobState::kPending) {
    diagnoses_.erase(id);
    edits->push_back(state::JobEnded{id, state::JobState::kCancelled,
                                     options_.clock->Now(), 0, 0, reason});
    return;
  }
  RunInfo& info = runs_[id];
  if (!info.Take(RunEvent::kCancelAsked)) return;
  info.cancel_reason = reason;
  StopPartsLocked(job, &info);
  if (info.parts_left <= 0) {
    edits->push_back(EndOf(job, info, options_.clock->Now()));
    runs_.erase(id);
  }
}

void Controller::StopPartsLocked(const state::JobRecord& job, RunInfo* info) {
  for (const state::NodeAllocation& a : job.allocations) {
    // Not delivered yet: drop the launch instead of starting and killing it.
    if (agents_.TakeBackLaunch(a.node, job.id)) {
      api::JobExit e;
      e.job = job.id;
      e.kind = api::ExitKind::kCancelled;
      e.end_time = options_.clock->Now();
      --info->parts_left;
      info->ended_on.push_back(a.node);
      if (!info->worst) info->worst = e;
      continue;
    }
    agents_.Cancel(a.node, job.id);
  }
}

Status Controller::Hold(state::JobId id, bool hold, const Caller& who, int task) {
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  bool whole_array = false;
  Result<std::vector<state::JobId>> ids = TargetsLocked(id, task, &whole_array);
  if (!ids.ok()) return ids.status();
  std::vector<state::Edit> edits;
  bool any_pending = false;
  for (state::JobId t : *ids) {
    const state::JobRecord& job = ledger_->image().jobs.at(t);
    HACHI_RETURN_IF_ERROR(authorizer_.Authorize(
        who, hold ? Action::kHold : Action::kRelease, Resource::Job(job)));
    if (job.state != state::JobState::kPending) {
      if (whole_array) continue;  // an array's tasks that run or ended are left alone
      return InvalidArgument("job " + std::to_string(t) + " is " +
                             std::string(state::JobStateName(job.state)) +
                             "; only pending jobs can be " +
                             (hold ? "held" : "released"));
    }
    any_pending = true;
    if (job.held != hold) edits.push_back(state::JobHeld{t, hold});
  }
  if (!any_pending) {
    return InvalidArgument("array " + std::to_string(id) +
                           " has no pending task; only pending jobs can be " +
                           (hold ? "held" : "released"));
  }
  if (edits.empty()) return Status::Ok();
  return ledger_->Commit(std::move(edits));
}

Result<state::JobRecord> Controller::Job(state::JobId id) const {
  MutexLock lock(&ledger_->mu());
  auto it = ledger_->image().jobs.find(id);
  if (it == ledger_->image().jobs.end()) return NotFound("no job " + std::to_string(id));
  state::JobRecord r = it->second;
  if (auto run = runs_.find(id);
      run != runs_.end() && r.state == state::JobState::kRunning) {
    r.gpu_memory_peak_mib = run->second.gpu_memory_peak_mib;
  }
  ShownLocked(&r);
  return r;
}

void Controller::ShownLocked(state::JobRecord* r) const {
  usage_.Held(ledger_.get());
  if (r->state == state::JobState::kRunning) {
    if (auto u = usage_.SoFarLocked(r->id)) r->usage = *std::move(u);  // so far
  }
  if (r->state == state::JobState::kPending) {
    std::string reason = ReasonLocked(r->id);
    if (!reason.empty()) r->reason = std::move(reason);
  } else if (std::string fence = FenceNoteLocked(*r); !fence.empty()) {
    r->reason = std::move(fence);  // `show job`: why a job on a down node is RUNNING
  } else if (std::string idle = usage_.IdleNoteLocked(*r); !idle.empty()) {
    r->reason = std::move(idle);  // warned by its partition's idle policy
  }
}

std::vector<state::JobRecord> Controller::Jobs(bool include_finished, state::JobId after,
                                               size_t limit) const {
  MutexLock lock(&ledger_->mu());
  std::vector<state::JobRecord> out;
  for (auto it = ledger_->image().jobs.upper_bound(after);
       it != ledger_->image().jobs.end(); ++it) {
    const state::JobRecord& r = it->second;
    if (limit > 0 && out.size() >= limit) break;
    if (!include_finished && state::IsFinal(r.state)) continue;
    out.push_back(r);
    ShownLocked(&out.back());
  }
  return out;
}

std::string Controller::ReasonLocked(state::JobId id) const {
  if (auto j = ledger_->image().jobs.find(id);
      j != ledger_->image().jobs.end() && j->second.held &&
      j->second.state == state::JobState::kPending) {
    return std::string(sched::ReasonName(sched::Reason::kHeld));  // not in any snapshot
  }
  auto d = diagnoses_.find(id);
  return d == diagnoses_.end() ? std::string()
                               : std::string(sched::ReasonName(d->second.reason));
}

std::optional<PendingInfo> Controller::Pending(state::JobId id) const {
  MutexLock lock(&ledger_->mu());
  if (auto j = ledger_->image().jobs.find(id);
      j != ledger_->image().jobs.end() && j->second.held &&
      j->second.state == state::JobState::kPending) {
    return PendingInfo{std::string(sched::ReasonName(sched::Reason::kHeld)), "held"};
  }
  auto d = diagnoses_.find(id);
  if (d == diagnoses_.end() || !diagnosed_) return std::nullopt;
  return PendingInfo{std::string(sched::ReasonName(d->second.reason)),
                     d->second.Format(*diagnosed_, diagnosed_at_)};
}

std::vector<JobBrief> Controller::ActiveJobBriefs() const {
  MutexLock lock(&ledger_->mu());
  std::vector<JobBrief> out;
  out.reserve(ledger_->active().size());
  for (state::JobId id : ledger_->active()) {
    auto it = ledger_->image().jobs.find(id);
    if (it == ledger_->image().jobs.end()) continue;
    const state::JobRecord& r = it->second;
    out.push_back(JobBrief{id, r.req.partition, r.state, r.held, r.submit_time,
                           r.start_time, r.req.TotalGpus()});
  }
  return out;
}

// ---- Nodes ----

state::NodeStatus Controller::NodeStatusLocked(const state::NodeRecord& rec,
                                               const sched::ClusterState& snap) const {
  usage_.Held(ledger_.get());
  state::NodeStatus st;
  st.record = rec;
  auto hw = hardware_.find(rec.name);
  if (hw != hardware_.end() && hw->second.model) {
    st.gpus = hw->second.model->gpu_count();
    st.gpu_model = hw->second.gpu_model;
    st.gpu_memory_mib = hw->second.gpu_memory_mib;
    st.interconnect = std::string(topo::InterconnectClassName(hw->second.interconnect));
  }
  st.gpu_jobs.assign(st.gpus, 0);
  st.gpu_share_milli.assign(st.gpus, 0);
  if (hw != hardware_.end()) {  // MIG devices, free until a job below holds one
    for (const sched::MigSlot& m : hw->second.mig) {
      st.mig_devices.push_back({m.gpu, m.profile, m.uuid, m.memory_mib, 0});
    }
  }
  auto ni = base_.node_index.find(rec.name);
  if (ni != base_.node_index.end()) {
    const sched::Node& n = snap.nodes[ni->second];
    for (int p : n.partitions) st.partitions.push_back(snap.partitions[p].name);
    st.features = sched::NodeFeatures(n);
    st.alloc_cpus = n.cpus - n.free_cpus;
    st.alloc_memory_mib = n.memory_mib - n.free_memory_mib;
  }
  st.gpu_util.assign(st.gpus, -1);
  for (const auto& [id, job] : ledger_->image().jobs) {
    if (job.state != state::JobState::kRunning) continue;
    for (const state::NodeAllocation& a : job.allocations) {
      if (a.node != rec.name) continue;
      if (!a.mig.empty()) {  // MIG devices: their GPUs are not the job's whole
        for (state::NodeMigDevice& m : st.mig_devices) {
          if (std::find(a.mig.begin(), a.mig.end(), m.uuid) != a.mig.end()) m.job = id;
        }
        continue;
      }
      for (int g = 0; g < st.gpus; ++g) {
        if (!a.gpus.contains(g)) continue;
        if (st.gpu_jobs[g] == 0) st.gpu_jobs[g] = id;
        st.gpu_share_milli[g] += a.share_milli;
        // The latest figure of this run on this GPU (the shares of one GPU all see the
        // device's figure).
        st.gpu_util[g] = std::max(st.gpu_util[g],
                                  usage_.GpuUtilLocked(rec.name, g, id, job.start_time));
      }
    }
  }
  st.stray_processes = StrayProcessesLocked(rec.name);
  if (auto seen = gpu_processes_.find(rec.name); seen != gpu_processes_.end()) {
    st.gpu_sharing_events.assign(seen->second.mps_events.begin(),
                                 seen->second.mps_events.end());
  }
  // Up, but taking no new jobs while its agent stops runs the records ended.
  if (std::string stale = StaleNoteLocked(rec.name); !stale.empty()) {
    st.record.state_reason = std::move(stale);
  }
  return st;
}

std::vector<state::StrayGpuProcess> Controller::StrayProcessesLocked(
    const std::string& node) const {
  std::vector<state::StrayGpuProcess> out;
  auto seen = gpu_processes_.find(node);
  if (seen == gpu_processes_.end()) return out;
  for (const api::GpuProcessReport& p : seen->second.processes) {
    // Its own: a process of a job running on this node with this GPU in its allocation.
    auto job = ledger_->image().jobs.find(p.job);
    const bool owned =
        p.job != 0 && job != ledger_->image().jobs.end() &&
        job->second.state == state::JobState::kRunning &&
        std::any_of(job->second.allocations.begin(), job->second.allocations.end(),
                    [&](const state::NodeAllocation& a) {
                      return a.node == node && a.gpus.contains(p.gpu);
                    });
    if (owned) continue;
    auto since = seen->second.since.find({p.gpu, p.pid});
    out.push_back(
        state::StrayGpuProcess{p.gpu, p.pid, p.used_mib, p.user, p.command, p.job,
                               since != seen->second.since.end() ? since->second : 0});
  }
  return out;
}

std::vector<state::NodeStatus> Controller::Nodes() const {
  MutexLock lock(&ledger_->mu());
  const sched::ClusterState snap =
      BuildSnapshot(base_, ledger_->image(), &ledger_->active());
  std::vector<state::NodeStatus> out;
  for (const auto& [name, rec] : ledger_->image().nodes)
    out.push_back(NodeStatusLocked(rec, snap));
  return out;
}

Status Controller::Drain(const std::string& node, const std::string& reason,
                         const Caller& who) {
  HACHI_RETURN_IF_ERROR(authorizer_.Authorize(who, Action::kDrain, Resource::Node(node)));
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  auto it = ledger_->image().nodes.find(node);
  if (it == ledger_->image().nodes.end()) return NotFound("no node " + node);
  if (it->second.state == state::NodeState::kDown) {
    return InvalidArgument("node " + node + " is down; drain it when it is back");
  }
  return ledger_->Commit({state::NodeStateChanged{node, state::NodeState::kDrained,
                                                  reason.empty() ? "drained" : reason,
                                                  options_.clock->Now()}});
}

Status Controller::Resume(const std::string& node, int gpu, const Caller& who) {
  HACHI_RETURN_IF_ERROR(
      authorizer_.Authorize(who, Action::kResume, Resource::Node(node)));
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  burn_in_.Held(ledger_.get());
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
      Result<std::vector<state::Edit>> edits = burn_in_.StartLocked(rec, gpus, &work);
      if (!edits.ok()) return edits.status();
      if (work) {
        HACHI_RETURN_IF_ERROR(ledger_->Commit(*std::move(edits)));
        agents_.BurnIn(node, *std::move(work));
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
  const bool unproven = burn_in_.UnprovenLocked(rec);
  std::vector<state::Edit> edits;
  if ((burning_in || (drained && unproven)) && !burn_in_.ChecksLocked(node).empty()) {
    Result<std::vector<state::Edit>> start = burn_in_.StartLocked(rec, GpuSet(), &work);
    if (!start.ok()) return start.status();
    edits = *std::move(start);
    if (!rec.unhealthy.empty())
      edits.push_back(state::NodeHealthChanged{node, GpuSet(), {}});
  } else if (!rec.unhealthy.empty() && !burning_in &&
             !burn_in_.ChecksLocked(node).empty()) {
    if (drained) {
      edits.push_back(state::NodeStateChanged{node, state::NodeState::kUp, "",
                                              options_.clock->Now()});
    }
    Result<std::vector<state::Edit>> start =
        burn_in_.StartLocked(rec, rec.unhealthy, &work);
    if (!start.ok()) return start.status();
    for (state::Edit& e : *start) edits.push_back(std::move(e));
  } else {
    if (drained || burning_in) {
      edits.push_back(state::NodeStateChanged{node, state::NodeState::kUp, "",
                                              options_.clock->Now()});
    }
    if (!rec.unhealthy.empty())
      edits.push_back(state::NodeHealthChanged{node, GpuSet(), {}});
    if (rec.burn_in != state::BurnInPhase::kNone) {
      edits.push_back(state::NodeBurnInChanged{node, rec.burn_in_passed, rec.burn_in_run,
                                               state::BurnInPhase::kNone, GpuSet()});
    }
  }
  HACHI_RETURN_IF_ERROR(ledger_->Commit(std::move(edits)));
  if (work) agents_.BurnIn(node, *std::move(work));
  return Status::Ok();
}

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

Status Controller::ReportHealth(const std::string& node, const api::AgentHealth& health) {
  agents_.Touch(node);
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  auto it = ledger_->image().nodes.find(node);
  if (it == ledger_->image().nodes.end()) return NotFound("no node " + node);
  const state::NodeRecord& rec = it->second;
  auto hw = hardware_.find(node);
  const int gpus = hw == hardware_.end() ? 0 : hw->second.model->gpu_count();
  const Time now = options_.clock->Now();
  if (health.has_processes) {
    for (const api::GpuProcessReport& p : health.processes) {
      if (p.gpu >= gpus) {
        return InvalidArgument("health: node " + node + " has " + std::to_string(gpus) +
                               " GPUs; a process on GPU " + std::to_string(p.gpu));
      }
    }
    NodeProcesses& seen = gpu_processes_[node];
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
      auto run = runs_.find(entry.first.first);
      if (job == ledger_->image().jobs.end() || run == runs_.end() ||
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
  }
  usage_.Held(ledger_.get());
  usage_.AddSamplesLocked(node, health.usage);
  state::NodeHealthChanged health_edit{node, rec.unhealthy, rec.unhealthy_reasons};
  GpuSet newly_bad;
  std::string node_fault;          // the first node-wide event's message
  std::map<int, std::string> why;  // GPU -> the event that took it out
  for (const api::GpuHealthEvent& e : health.events) {
    if (StartsWith(e.kind, "mps-")) {  // shown with the node, the last few
      std::deque<std::string>& log = gpu_processes_[node].mps_events;
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
  std::vector<std::pair<std::string, state::JobId>> stops;
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
    RunInfo& info = runs_[id];
    if (!info.Take(RunEvent::kRequeueAsked)) continue;  // stopping already
    info.requeue_reason = reason;
    for (const state::NodeAllocation& a : job.allocations) stops.emplace_back(a.node, id);
  }
  HACHI_RETURN_IF_ERROR(ledger_->Commit(std::move(edits)));
  for (const auto& [n, id] : stops) agents_.Cancel(n, id);
  return Status::Ok();
}

std::vector<sched::Partition> Controller::Partitions() const {
  MutexLock lock(&ledger_->mu());
  return base_.state.partitions;
}

std::vector<std::string> Controller::Warnings() const {
  MutexLock lock(&ledger_->mu());
  return base_.warnings;
}

ControllerStats Controller::stats() const {
  MutexLock lock(&ledger_->mu());
  return stats_;
}

}  // namespace hachi::server
