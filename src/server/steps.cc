// StepService (step_service.h): srun inside an allocation. It records
// each step (StepStarted, StepEnded), hands its nodes' parts to their agents through
// the hub, and relays the tasks' output from the agents to srun through StepStreams.
#include <algorithm>
#include <iostream>

#include "server/step_layout.h"
#include "server/step_service.h"

namespace hachi::server {
namespace {

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string StepName(state::JobId job, int step) {
  return std::to_string(job) + "." + std::to_string(step);
}

// A step's end from its tasks' exits: COMPLETED when every task exited 0; CANCELLED
// when one was stopped by us (srun's Ctrl-C, -K, scancel); OUT_OF_MEMORY; else FAILED
// with the highest exit code (srun's exit status), or the signal of one killed by one.
state::StepEnded StepEndOf(const state::StepKey& key,
                           const std::vector<api::TaskExit>& exits, Time now) {
  state::StepEnded end;
  end.key = key;
  end.end_time = now;
  end.state = state::JobState::kCompleted;
  bool cancelled = false, failed = false, oom = false;
  for (const api::TaskExit& e : exits) {
    switch (e.kind) {
      case api::ExitKind::kExited:
        end.exit_code = std::max(end.exit_code, e.exit_code);
        failed = failed || e.exit_code != 0;
        break;
      case api::ExitKind::kSignaled:
        failed = true;
        if (end.signal == 0) end.signal = e.signal;
        break;
      case api::ExitKind::kCancelled:
      case api::ExitKind::kTimeLimit:
        cancelled = true;
        if (e.signal != 0 && end.signal == 0) end.signal = e.signal;
        break;
      case api::ExitKind::kOutOfMemory:
        oom = true;
        break;
      case api::ExitKind::kLaunchFailed:
      case api::ExitKind::kLost:
        failed = true;
        end.exit_code = std::max(end.exit_code, 2);
        if (end.reason.empty()) end.reason = e.message;
        break;
    }
  }
  if (oom) {
    end.state = state::JobState::kOutOfMemory;
  } else if (cancelled) {
    end.state = state::JobState::kCancelled;
  } else if (failed) {
    end.state = state::JobState::kFailed;
  }
  return end;
}

}  // namespace

StepService::StepService(Ledger* ledger, Fleet* fleet, AgentHub* hub,
                         const Authorizer* authorizer, const ControllerOptions* options)
    : OnLedger(ledger),
      fleet_(fleet),
      hub_(hub),
      authorizer_(authorizer),
      options_(options),
      streams_(StepStreams::kMaxHeld, options->clock) {}

void StepService::SetNotifier(std::function<void(const std::string&)> notify) {
  MutexLock lock(&ledger_->mu());
  notify_ = std::move(notify);
}

void StepService::Extend(std::vector<state::Edit>* edits) {
  ledger_->mu().AssertHeld();
  EndStepsOfJobsLocked(edits);  // a run's steps end with it
}

void StepService::Applied(const std::vector<state::Edit>& edits) {
  ledger_->mu().AssertHeld();
  StepsEndedLocked(edits);
}

Result<state::StepRecord> StepService::CreateStep(state::JobId id,
                                                  const api::StepRequest& req,
                                                  const Caller& who) {
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  auto it = ledger_->image().jobs.find(id);
  if (it == ledger_->image().jobs.end()) return NotFound("no job " + std::to_string(id));
  const state::JobRecord& job = it->second;
  HACHI_RETURN_IF_ERROR(
      authorizer_->Authorize(who, Action::kRunStep, Resource::Job(job)));
  if (job.state != state::JobState::kRunning) {
    return Busy("job " + std::to_string(id) + " is " +
                std::string(state::JobStateName(job.state)) +
                "; a step runs only in a running job");
  }
  if (auto run = fleet_->runs.find(id);
      run != fleet_->runs.end() && run->second.cancelling()) {
    return Busy("job " + std::to_string(id) + " is being cancelled");
  }
  HACHI_RETURN_IF_ERROR(streams_.RoomForStep(id));
  Result<StepLayout> layout = LayOutStep(job, req);
  if (!layout.ok()) return layout.status();
  const int nodes = static_cast<int>(layout->nodes.size());
  const int ntasks = layout->ntasks;
  const std::vector<int>& per_node = layout->per_node;
  state::StepRecord rec;
  rec.job = id;
  rec.job_start = job.start_time;
  rec.step = state::NextStepNumber(ledger_->image(), id, job.start_time);
  rec.name = req.name.empty() ? BaseName(req.argv[0]) : req.name;
  rec.user = who.user;
  rec.ntasks = ntasks;
  rec.state = state::JobState::kRunning;
  rec.start_time = std::max(options_->clock->Now(), job.start_time);
  rec.nodes = layout->nodes;
  rec.cpus = layout->cpus;
  rec.gpus = layout->gpus;
  HACHI_RETURN_IF_ERROR(ledger_->Commit({state::StepStarted{rec}}));
  const state::StepKey key{id, rec.job_start, rec.step};
  streams_.Open(key, rec.nodes, req.kill_on_bad_exit, req.pty);
  int rank = 0;
  for (int i = 0; i < nodes; ++i) {
    api::StepLaunch l;
    l.job = id;
    l.job_start = rec.job_start;
    l.step = rec.step;
    l.argv = req.argv;
    l.env = req.env;
    l.workdir = req.workdir;
    l.name = rec.name;
    l.nodes = rec.nodes;
    l.node_index = i;
    for (int t = 0; t < per_node[static_cast<size_t>(i)]; ++t) l.tasks.push_back(rank++);
    l.ntasks = ntasks;
    l.tasks_per_node = per_node;
    l.cpus_per_task = req.cpus_per_task;
    l.gpus_per_task = req.gpus_per_task;
    l.stdout_pattern = req.stdout_pattern;
    l.stderr_pattern = req.stderr_pattern;
    l.pty = req.pty;
    l.rows = req.rows;
    l.cols = req.cols;
    l.kill_grace = options_->kill_grace;
    hub_->Send(rec.nodes[static_cast<size_t>(i)], std::move(l));
  }
  return ledger_->image().steps.at(key);
}

Result<state::StepRecord> StepService::StepOf(state::JobId id, int step,
                                              const Caller& who, Time run) const {
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  auto it = ledger_->image().jobs.find(id);
  if (it == ledger_->image().jobs.end()) return NotFound("no job " + std::to_string(id));
  HACHI_RETURN_IF_ERROR(
      authorizer_->Authorize(who, Action::kRunStep, Resource::Job(it->second)));
  auto s = ledger_->image().steps.find({id, run > 0 ? run : it->second.start_time, step});
  if (s == ledger_->image().steps.end()) {
    return NotFound("no step " + StepName(id, step) +
                    (run > 0 ? " in the job's run that started at " + std::to_string(run)
                             : std::string(" in the job's current run")));
  }
  return s->second;
}

Result<state::StepRecord> StepService::RunningStepOf(state::JobId id, int step,
                                                     const Caller& who) const {
  Result<state::StepRecord> rec = StepOf(id, step, who);
  if (!rec.ok()) return rec.status();
  if (rec->state != state::JobState::kRunning) {
    return Busy("step " + StepName(id, step) + " is " +
                std::string(state::JobStateName(rec->state)));
  }
  return rec;
}

Result<api::StepOutput> StepService::ReadStepOutput(state::JobId id, int step,
                                                    int64_t from, const Caller& who,
                                                    bool observe, Time run) {
  Result<state::StepRecord> rec = StepOf(id, step, who, run);
  if (!rec.ok()) return rec.status();
  const state::StepKey key{id, rec->job_start, step};
  StepStreams::Read r = streams_.ReadFrom(key, from, 1 << 20, observe);
  api::StepOutput out;
  out.step = *rec;
  out.from = r.known ? r.from : from;
  out.next = r.known ? r.next : from;
  out.lost = r.lost;
  out.chunks = std::move(r.chunks);
  const bool ended = rec->state != state::JobState::kRunning;
  // Done once the record says it ended, nothing more is held for the reader, and no
  // node has more to send: a step ended by its job's end or requeue still gets what
  // its tasks wrote before (an agent sends its last word once it has read their pipes
  // to the end, within the kill grace), else the reader would leave without it. A node
  // that never says more (its agent lost) is waited for the kill grace and 2 s more.
  const auto grace = std::chrono::seconds(options_->kill_grace + 2);
  const bool drained = !r.known || r.all_done || r.ended_for >= grace;
  out.done = ended && out.chunks.empty() && drained;
  if (out.done) {
    out.exits = std::move(r.exits);
    if (!observe) streams_.Delivered(key);  // srun's reading ends the stream
  }
  return out;
}

Status StepService::SignalStep(state::JobId id, int step, int signal, bool cancel,
                               const Caller& who) {
  if (!cancel && (signal < 1 || signal > 64)) {
    return InvalidArgument(std::to_string(signal) + " is not a signal");
  }
  Result<state::StepRecord> rec = RunningStepOf(id, step, who);
  if (!rec.ok()) return rec.status();
  for (const std::string& node : rec->nodes) {
    hub_->Send(node, api::StepSignal{id, rec->job_start, step, signal, cancel});
  }
  return Status::Ok();
}

Status StepService::StepInput(state::JobId id, int step, api::StepInput input,
                              const Caller& who) {
  Result<state::StepRecord> rec = RunningStepOf(id, step, who);
  if (!rec.ok()) return rec.status();
  if (!streams_.IsPty({id, rec->job_start, step})) {
    return InvalidArgument("step " + StepName(id, step) +
                           " has no terminal (srun --pty); its tasks read /dev/null");
  }
  input.job = id;
  input.job_start = rec->job_start;
  input.step = step;
  hub_->Send(rec->nodes.front(), std::move(input));
  return Status::Ok();
}

std::vector<state::StepRecord> StepService::Steps(state::JobId id) const {
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  std::vector<state::StepRecord> out;
  auto lo = ledger_->image().steps.lower_bound({id == 0 ? 0 : id, 0, 0});
  for (auto it = lo; it != ledger_->image().steps.end(); ++it) {
    if (id != 0 && it->first.job != id) break;
    out.push_back(it->second);
  }
  return out;
}

Result<std::vector<api::StepAck>> StepService::ReportSteps(
    const std::string& node, const api::StepReports& reports) {
  if (!hub_->IsOpen(node)) return NotFound("agent " + node + " is not registered");
  hub_->Touch(node);
  std::vector<api::StepAck> acks;
  std::vector<state::StepKey> finished;
  for (const api::StepReport& r : reports.steps) {
    const state::StepKey key{r.job, r.job_start, r.step};
    api::StepAck ack{r.job, r.job_start, r.step, 0, false};
    std::vector<std::string> nodes;
    {
      MutexLock lock(&ledger_->mu());
      fleet_->Held(ledger_);
      auto s = ledger_->image().steps.find(key);
      const bool here = s != ledger_->image().steps.end() &&
                        std::find(s->second.nodes.begin(), s->second.nodes.end(), node) !=
                            s->second.nodes.end();
      if (!here || s->second.state != state::JobState::kRunning) {
        ack.gone = true;  // ended (the job's end, a lost node), or never ours
      } else {
        nodes = s->second.nodes;
      }
    }
    if (ack.gone) {
      // Output that comes after the step ended still reaches a reader that waits; the
      // agent drops it all on `gone`, so what the bound refuses is marked lost.
      if (streams_.Has(key)) streams_.Add(key, node, r, {}, /*last_word=*/true);
      acks.push_back(ack);
      continue;
    }
    const StepStreams::Added added = streams_.Add(key, node, r, nodes);
    ack.next = added.next;
    acks.push_back(ack);
    if (added.bad_exit && added.kill_on_bad_exit) {
      // -K: a failing task stops the step's others.
      for (const std::string& n : nodes) {
        hub_->Send(n, api::StepSignal{r.job, r.job_start, r.step, 0, true});
      }
    }
    if (added.all_done) finished.push_back(key);
    MutexLock lock(&ledger_->mu());
    fleet_->Held(ledger_);
    if (notify_) notify_(StepTopic(r.job, r.step));
  }
  if (!finished.empty()) {
    MutexLock writer(&ledger_->writer_mu());
    MutexLock lock(&ledger_->mu());
    fleet_->Held(ledger_);
    std::vector<state::Edit> edits;
    const Time now = options_->clock->Now();
    for (const state::StepKey& key : finished) {
      auto s = ledger_->image().steps.find(key);
      if (s == ledger_->image().steps.end() ||
          s->second.state != state::JobState::kRunning)
        continue;
      state::StepEnded end = StepEndOf(key, streams_.Exits(key), now);
      end.end_time = std::max(end.end_time, s->second.start_time);
      edits.push_back(std::move(end));
    }
    HACHI_RETURN_IF_ERROR(ledger_->Commit(std::move(edits)));
  }
  return acks;
}

void StepService::EndStepsOfJobsLocked(std::vector<state::Edit>* edits) const {
  fleet_->Held(ledger_);
  // The steps still running in a run that this batch ends or requeues end with it.
  std::vector<state::Edit> more;
  const Time now = options_->clock->Now();
  for (const state::Edit& e : *edits) {
    state::JobId id = 0;
    state::JobState as = state::JobState::kCancelled;
    std::string why;
    if (const auto* end = std::get_if<state::JobEnded>(&e)) {
      id = end->id;
      if (end->state == state::JobState::kTimeout ||
          end->state == state::JobState::kNodeFail ||
          end->state == state::JobState::kOutOfMemory) {
        as = end->state;
      }
      why = "job " + std::to_string(id) + " ended (" +
            std::string(state::JobStateName(end->state)) + ")";
    } else if (const auto* rq = std::get_if<state::JobRequeued>(&e)) {
      id = rq->id;
      why = "job " + std::to_string(id) + " was requeued";
    } else {
      continue;
    }
    auto job = ledger_->image().jobs.find(id);
    if (job == ledger_->image().jobs.end() ||
        job->second.state != state::JobState::kRunning)
      continue;
    for (const state::StepKey& key :
         state::RunningSteps(ledger_->image(), id, job->second.start_time)) {
      const bool listed =
          std::any_of(edits->begin(), edits->end(), [&](const state::Edit& x) {
            const auto* se = std::get_if<state::StepEnded>(&x);
            return se != nullptr && se->key == key;
          });
      if (listed) continue;
      state::StepEnded se;
      se.key = key;
      se.state = as;
      se.end_time = std::max(now, ledger_->image().steps.at(key).start_time);
      se.reason = why;
      more.push_back(std::move(se));
    }
  }
  // Before the job's own end: a step ends only in a running job's run.
  edits->insert(edits->begin(), more.begin(), more.end());
}

void StepService::StepsEndedLocked(const std::vector<state::Edit>& edits) {
  fleet_->Held(ledger_);
  bool any = false;
  for (const state::Edit& e : edits) {
    const auto* se = std::get_if<state::StepEnded>(&e);
    if (se == nullptr) continue;
    any = true;
    streams_.End(se->key);
    if (notify_) notify_(StepTopic(se->key.job, se->key.step));
  }
  // Only when a step ended: the scheduling cycle's commits pay nothing here.
  if (any) streams_.Sweep(std::chrono::minutes(2));
}

std::vector<state::Edit> StepService::LostStepsLocked(
    const AgentRegistration& reg) const {
  fleet_->Held(ledger_);
  // Steps the records run on this node that its agent does not: its agent restarted (a
  // step never outlives its agent), or their launch was dropped with the old session.
  std::vector<state::Edit> edits;
  const Time now = options_->clock->Now();
  for (const auto& [key, s] : ledger_->image().steps) {
    if (s.state != state::JobState::kRunning) continue;
    if (std::find(s.nodes.begin(), s.nodes.end(), reg.node) == s.nodes.end()) continue;
    if (std::find(reg.steps.begin(), reg.steps.end(), key) != reg.steps.end()) continue;
    state::StepEnded end;
    end.key = key;
    end.state = state::JobState::kFailed;
    end.exit_code = 1;
    end.end_time = std::max(now, s.start_time);
    end.reason = "its agent on " + reg.node + " registered again without it (the agent " +
                 "restarted, or the step's start was lost)";
    edits.push_back(std::move(end));
  }
  return edits;
}

Status StepService::CompleteAllocation(state::JobId id, int exit_code,
                                       const Caller& who) {
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  auto it = ledger_->image().jobs.find(id);
  if (it == ledger_->image().jobs.end()) return NotFound("no job " + std::to_string(id));
  const state::JobRecord& job = it->second;
  HACHI_RETURN_IF_ERROR(authorizer_->Authorize(who, Action::kCancel, Resource::Job(job)));
  if (!job.spec.interactive) {
    return InvalidArgument("job " + std::to_string(id) +
                           " is not an interactive allocation (salloc); scancel ends it");
  }
  if (job.state != state::JobState::kRunning) {
    return Busy("job " + std::to_string(id) + " is " +
                std::string(state::JobStateName(job.state)));
  }
  RunInfo& info = fleet_->runs[id];
  if (!info.Take(RunEvent::kAllocationCompleted)) return Status::Ok();
  info.allocation_exit = exit_code;
  fleet_->StopPartsLocked(job, &info);
  std::vector<state::Edit> edits;
  if (info.parts_left <= 0) {
    edits.push_back(fleet_->RunEndLocked(job, info, options_->clock->Now()));
    fleet_->runs.erase(id);
  }
  return ledger_->Commit(std::move(edits));
}

}  // namespace hachi::server
