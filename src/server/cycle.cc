// SchedulingLoop (scheduling_loop.h): the scheduling loop and the plan applier (DESIGN.md
// §4.5: one writer). A cycle takes a snapshot under the locks, runs sched/ without them
// (submits, reports, cancels go on meanwhile), then re-checks every start against the
// records as they are now (sched::PlanApplier, the checks `hachi sim` applies too),
// commits the starts in one transaction and hands the launches to the agents.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <set>
#include <unordered_map>

#include "sched/apply.h"
#include "server/auth.h"
#include "server/controller_metrics.h"
#include "server/master_ports.h"
#include "server/scheduling_loop.h"

namespace hachi::server {
namespace {

// The MASTER_PORT range the options give (master_ports.h decides within it).
PortRange Ports(const ControllerOptions& o) {
  return {o.master_port_base, o.master_port_count};
}

}  // namespace

SchedulingLoop::SchedulingLoop(Ledger* ledger, Fleet* fleet, AgentHub* hub,
                               NodeService* nodes, BurnInService* burn_in,
                               UsageService* usage, FairShareService* fair_share,
                               PowerService* power, ControllerMetrics* metrics,
                               const ControllerOptions* options,
                               std::unique_ptr<sched::Scheduler> scheduler)
    : OnLedger(ledger),
      fleet_(fleet),
      hub_(hub),
      nodes_(nodes),
      burn_in_(burn_in),
      usage_(usage),
      fair_share_(fair_share),
      power_(power),
      metrics_(metrics),
      options_(options),
      scheduler_(std::move(scheduler)) {}

SchedulingLoop::~SchedulingLoop() { Join(); }

void SchedulingLoop::Start() {
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  if (loop_.joinable() || fleet_->stopping) return;
  loop_ = std::thread([this] { Loop(); });
}

void SchedulingLoop::Join() {
  if (loop_.joinable()) loop_.join();
}

void SchedulingLoop::Applied(const std::vector<state::Edit>& edits) {
  ledger_->mu().AssertHeld();
  fleet_->Held(ledger_);
  bool schedulable = false;  // a held job's submit gives a cycle nothing to do
  for (const state::Edit& e : edits) {
    const auto* submitted = std::get_if<state::JobSubmitted>(&e);
    if (submitted == nullptr || !submitted->record.held) schedulable = true;
    const state::JobId id = EditJob(e);
    if (id == 0) continue;
    if (!ledger_->active().count(id)) fleet_->eligible_since.erase(id);
    // Released or requeued: its next queue wait counts from now
    // (hachi_queue_wait_seconds).
    if (const auto* r = std::get_if<state::JobRequeued>(&e)) {
      fleet_->eligible_since[r->id] = {options_->clock->Now(), true};
    } else if (const auto* h = std::get_if<state::JobHeld>(&e);
               h != nullptr && !h->held) {
      fleet_->eligible_since[h->id] = {options_->clock->Now(), false};
    }
  }
  if (schedulable) fleet_->WakeLocked();
}

void SchedulingLoop::Loop() {
  auto trimmed = std::chrono::steady_clock::now();
  int64_t freed = 0;  // bytes of finished jobs' environments dropped since the last trim
  // When the running jobs' usage was last written: by the Clock, as every decision is
  // (a test moving a FakeClock sees the flush at the next cycle).
  Time usage_flushed = options_->clock->Now();
  // Payloads freed past this (a big array cancelled or ended) are given back at once.
  constexpr int64_t kTrimBytes = int64_t{64} << 20;
  for (;;) {
    bool trim_now = false;
    {
      MutexLock lock(&ledger_->mu());
      fleet_->Held(ledger_);
      const auto deadline = std::chrono::steady_clock::now() +
                            std::chrono::milliseconds(options_->cycle_interval_ms);
      while (!fleet_->dirty && !fleet_->stopping) {
        if (!fleet_->loop_cv.WaitUntil(deadline) &&
            std::chrono::steady_clock::now() >= deadline) {
          break;
        }
      }
      if (fleet_->stopping) return;
      freed += ledger_->TakeFreedBytes();
      trim_now = freed >= kTrimBytes;
      if (trim_now) freed = 0;
    }
    RunCycle();
    if (const Time now = options_->clock->Now();
        options_->usage_flush_s > 0 && now - usage_flushed >= options_->usage_flush_s) {
      usage_->Flush();
      power_->Flush();  // the burst nodes' powered spells, moved on
      usage_flushed = now;
    }
    // Big replies (GET /jobs?all=1 of 50k jobs: ~120 MB of JSON) leave freed memory in
    // malloc's arenas, never returned: the soak test saw RSS of 1.5-3 GB holding 55 MB of
    // live data (docs/soak.md). Give it back every half minute.
    if (const auto now = std::chrono::steady_clock::now();
        trim_now || now - trimmed > std::chrono::seconds(30)) {
      malloc_trim(0);
      trimmed = now;
    }
  }
}

void SchedulingLoop::RunCycle() {
  MutexLock cycle(&cycle_mu_);
  {
    MutexLock lock(&ledger_->mu());
    fleet_->Held(ledger_);
    if (fleet_->stopping && loop_.joinable() &&
        std::this_thread::get_id() != loop_.get_id())
      return;
  }
  Cycle();
}

void SchedulingLoop::Cycle() {
  const auto cycle_start = std::chrono::steady_clock::now();
  const Time now = options_->clock->Now();
  std::shared_ptr<sched::ClusterState> snap;
  uint64_t generation = 0;
  {
    MutexLock writer(&ledger_->writer_mu());  // the checks may end jobs
    MutexLock lock(&ledger_->mu());
    snap = SnapshotLocked(now, &generation);
  }
  // No lock but cycle_mu_: the API, the agents and every writer go on meanwhile.
  const auto t0 = std::chrono::steady_clock::now();
  const sched::Plan plan = scheduler_->Schedule(*snap, now);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
          .count();
  // A scheduler bug (the allocator failed a choice): the job waits with reason
  // Internal, and the operator hears of it — once per new message, not every cycle.
  for (const std::string& e : plan.errors) {
    if (std::find(last_plan_errors_.begin(), last_plan_errors_.end(), e) ==
        last_plan_errors_.end()) {
      std::cerr << "hachi server: scheduler internal error: " << e << "\n";
    }
  }
  last_plan_errors_ = plan.errors;
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  ++fleet_->stats.cycles;
  fleet_->stats.last_cycle_ms = ms;
  fleet_->stats.max_cycle_ms = std::max(fleet_->stats.max_cycle_ms, ms);
  fleet_->stats.internal_errors += static_cast<int64_t>(plan.errors.size());
  if (generation != fleet_->base_generation) {  // nodes or partitions changed meanwhile
    fleet_->dirty = true;
    return;
  }
  const auto apply_start = std::chrono::steady_clock::now();
  ApplyPlanLocked(plan, snap, now);
  PowerLocked(plan, *snap, now);
  EndPastDeadlineLocked(now);  // --deadline
  const auto end = std::chrono::steady_clock::now();
  metrics_->plan_apply().Observe(
      std::chrono::duration<double>(end - apply_start).count());
  metrics_->cycle().Observe(std::chrono::duration<double>(end - cycle_start).count());
}

std::shared_ptr<sched::ClusterState> SchedulingLoop::SnapshotLocked(
    Time now, uint64_t* generation) {
  fleet_->Held(ledger_);
  fleet_->dirty = false;
  CheckLocked(now);
  if (fleet_->base_dirty) {
    Status s = fleet_->RebuildBaseLocked();
    if (!s.ok()) fleet_->base.warnings.push_back("config not applied: " + s.message());
  }
  *generation = fleet_->base_generation;
  auto snap = std::make_shared<sched::ClusterState>(
      BuildSnapshot(fleet_->base, ledger_->image(), &ledger_->active()));
  fleet_->HoldStaleNodesLocked(snap.get());  // their GPUs are still in use
  power_->Held(ledger_);
  power_->MaskLocked(snap.get());  // burst nodes not on take no job
  fair_share_->Held(ledger_);
  fair_share_->FillLocked(&snap->fairshare);  // the accounts' usage as of now
  // The workload FGD's measure weighs placements by: refreshed every half minute, not
  // per submit, so the scheduler's fragmentation memo stays warm between cycles.
  if (workload_.empty() || now - workload_at_ >= 30) {
    workload_ = RecentWorkload(ledger_->image());
    workload_at_ = now;
  }
  snap->workload = workload_;
  for (sched::Job& j : snap->running) {
    auto r = fleet_->runs.find(j.id);
    if (r != fleet_->runs.end()) j.preempt_kill_at = r->second.preempt_kill_at;
  }
  return snap;
}

void SchedulingLoop::CheckLocked(Time now) {
  // The bridges tell the analysis that the services' names for the locks are the ones
  // held: in a function of its own, as Cycle takes the locks again later.
  nodes_->WriterHeld(ledger_);
  nodes_->Held(ledger_);
  nodes_->CheckAgentsLocked(now);  // silent agents, passed fences
  burn_in_->WriterHeld(ledger_);
  burn_in_->Held(ledger_);
  burn_in_->CheckLateLocked(now);  // runs whose agent never reported
  CheckIdleLocked(now);            // the idle-GPU policy
}

void SchedulingLoop::ApplyPlanLocked(const sched::Plan& plan,
                                     std::shared_ptr<const sched::ClusterState> snap,
                                     Time now) {
  fleet_->Held(ledger_);
  fleet_->diagnoses.clear();
  fleet_->diagnoses.reserve(plan.pending.size());
  for (const sched::Diagnosis& d : plan.pending) fleet_->diagnoses.emplace(d.job, d);
  fleet_->diagnosed = std::move(snap);
  fleet_->diagnosed_at = now;
  if (plan.starts.empty()) {
    ApplyPreemptionsLocked(plan, now);
    return;
  }
  // Re-check against the records as they are now: since the snapshot, jobs may have
  // been cancelled or held, nodes drained or lost (ends only free resources). Only the
  // nodes the starts name are booked: the applier looks at no other (the plan was made
  // on this base's generation, so its node indices are the base's).
  std::vector<bool> touched(fleet_->base.state.nodes.size(), false);
  for (const sched::Start& st : plan.starts) {
    for (const sched::Allocation& a : st.allocations) {
      if (a.node >= 0 && static_cast<size_t>(a.node) < touched.size())
        touched[a.node] = true;
    }
  }
  sched::ClusterState cur =
      BuildNodeSnapshot(fleet_->base, ledger_->image(), ledger_->active(), touched);
  fleet_->HoldStaleNodesLocked(
      &cur);  // an agent may have come back with stale runs meanwhile
  std::vector<state::Edit> edits;
  PortsInUse ports;  // filled at the first start: most cycles start nothing
  bool ports_known = false;
  for (const sched::Start& st : plan.starts) {
    auto it = ledger_->image().jobs.find(st.job);
    if (it == ledger_->image().jobs.end() ||
        it->second.state != state::JobState::kPending || it->second.held) {
      continue;
    }
    const state::JobRecord& rec = it->second;
    sched::Job probe;
    probe.id = rec.id;
    probe.req = rec.req;
    probe.partition = cur.PartitionIndex(rec.req.partition);
    // Its MASTER_PORT, on its rank-0 node, before anything is booked: with every port
    // of the range held there it does not start (it waits for one to free, as for
    // GPUs; a running job's end wakes the next cycle). Not fleet_->dirty: nothing would
    // change by trying again at once.
    if (st.allocations.empty() || st.allocations[0].node < 0 ||
        static_cast<size_t>(st.allocations[0].node) >= cur.nodes.size()) {
      continue;  // the applier's own check would refuse it too
    }
    if (!ports_known) {
      ports = MasterPortsInUse(ledger_->image(), ledger_->active(), Ports(*options_));
      ports_known = true;
    }
    const std::string& rank0 = cur.nodes[st.allocations[0].node].name;
    const std::string key = PortKey(ledger_->image(), rank0);
    std::set<int>& held = ports[key];
    // Ports a process outside Hachi held there lately are skipped too.
    std::set<int> skip = held;
    if (auto f = fleet_->foreign_ports.find(key); f != fleet_->foreign_ports.end()) {
      std::erase_if(f->second, [&](const auto& p) { return now - p.second > 3600; });
      for (const auto& [p, at] : f->second) skip.insert(p);
    }
    const int port = LowestFreePort(skip, Ports(*options_));
    if (port == 0) {
      if (port_starved_.insert(st.job).second) {  // said once per job, not every cycle
        std::cerr << "hachi server: job " << st.job << " not started on " << rank0
                  << ": every MASTER_PORT of " << options_->master_port_base << "-"
                  << options_->master_port_base + options_->master_port_count - 1
                  << " is held by a running job there\n";
      }
      continue;
    }
    // The one applier's checks (sched/apply.h), all parts or none; `cur` then holds
    // this start for the next ones.
    sched::PlanApplier applier(&cur);
    if (!applier.Apply(probe, st).ok()) {
      fleet_->dirty = true;  // try again next cycle with fresh state
      continue;
    }
    held.insert(port);
    port_starved_.erase(st.job);
    state::JobStarted started;
    started.id = st.job;
    started.master_port = port;
    // The start time is also the run's id (agents and exit reports tell runs apart by
    // it): a requeued job restarted within the second of its last start gets the next
    // second, or the old run's exit would end the new one.
    started.start_time = std::max(now, rec.start_time + 1);
    for (const sched::Allocation& a : st.allocations) {
      started.allocations.push_back(
          state::NodeAllocation{cur.nodes[a.node].name, a.gpus, a.cpus, a.memory_mib,
                                a.share_milli, a.gpu_memory_mib, a.mig});
    }
    edits.push_back(std::move(started));
  }
  std::vector<state::JobId> ids;
  for (const state::Edit& e : edits) ids.push_back(std::get<state::JobStarted>(e).id);
  if (!ledger_->Commit(std::move(edits)).ok()) {
    fleet_->dirty = true;  // nothing started; the next cycle tries again
    return;
  }
  for (state::JobId id : ids) {
    const state::JobRecord& job = ledger_->image().jobs.at(id);
    RunInfo& info = fleet_->runs[id];
    info = RunInfo{};
    info.parts_left = static_cast<int>(job.allocations.size());
    fleet_->diagnoses.erase(id);
    fleet_->DispatchLocked(job);
    Time eligible = job.submit_time;
    if (auto e = fleet_->eligible_since.find(id); e != fleet_->eligible_since.end()) {
      eligible = std::max(eligible, e->second.at);
    }
    metrics_->ObserveWait(
        job.req.partition, job.req.TotalGpus(), job.req.Shared(),
        static_cast<double>(std::max<Time>(0, job.start_time - eligible)));
  }
  fleet_->stats.starts += static_cast<int64_t>(ids.size());
  ApplyPreemptionsLocked(plan, now);
}

void SchedulingLoop::ApplyPreemptionsLocked(const sched::Plan& plan, Time now) {
  fleet_->Held(ledger_);
  // Preemptions: the victims are told now (SIGTERM, then SIGKILL after the agent's
  // grace) and requeued or cancelled when they report their exit.
  for (const sched::Preemption& p : plan.preemptions) {
    auto it = ledger_->image().jobs.find(p.job);
    if (it == ledger_->image().jobs.end() ||
        it->second.state != state::JobState::kRunning)
      continue;
    RunInfo& info = fleet_->runs[p.job];
    const bool requeue = p.mode == sched::PreemptMode::kRequeue;
    if (!info.Take(requeue ? RunEvent::kPreemptRequeue : RunEvent::kPreemptCancel)) {
      continue;  // preempted or cancelled already
    }
    info.preempt_kill_at = std::max(p.kill_at, now);
    if (!requeue) {
      info.cancel_reason =
          "preempted" + (p.for_job ? " by job " + std::to_string(p.for_job)
                                   : std::string(" by a time window"));
    }
    for (const state::NodeAllocation& a : it->second.allocations) {
      hub_->Send(a.node, api::RunStop{p.job, it->second.start_time});
    }
  }
}

void SchedulingLoop::PowerLocked(const sched::Plan& plan, const sched::ClusterState& snap,
                                 Time now) {
  // The bridges, as in CheckLocked.
  power_->WriterHeld(ledger_);
  power_->Held(ledger_);
  power_->PlanLocked(snap, plan, now);  // burst nodes up for the waiting, idle ones down
}

void SchedulingLoop::EndPastDeadlineLocked(Time now) {
  fleet_->Held(ledger_);
  std::vector<state::Edit> edits;
  for (state::JobId id : ledger_->active()) {
    auto it = ledger_->image().jobs.find(id);
    if (it == ledger_->image().jobs.end()) continue;
    const state::JobRecord& r = it->second;
    if (r.state != state::JobState::kPending || r.req.deadline <= 0) continue;
    if (now + r.req.time_limit <= r.req.deadline) continue;
    state::JobEnded end;
    end.id = id;
    end.state = state::JobState::kDeadline;
    end.end_time = now;
    end.reason = "DeadLine: its time limit " + FormatDuration(r.req.time_limit) +
                 " no longer fits before its --deadline";
    edits.push_back(std::move(end));
  }
  if (edits.empty()) return;
  if (!ledger_->Commit(std::move(edits)).ok())
    fleet_->dirty = true;  // tried again next cycle
}

void SchedulingLoop::CheckIdleLocked(Time now) {
  fleet_->Held(ledger_);
  usage_->Held(ledger_);
  std::vector<state::Edit> edits;
  for (const UsageService::IdleVerdict& v : usage_->DueIdleLocked(now)) {
    const state::JobId id = v.job;
    const std::string& note = v.note;
    auto job = ledger_->image().jobs.find(id);  // running: DueIdleLocked says so
    metrics_->IdleAction(job->second.req.partition, config::IdleActionName(v.action));
    std::cerr << "hachi server: job " << id << ": " << note << ": "
              << config::IdleActionName(v.action) << "\n";
    if (v.action == config::IdleAction::kWarn) continue;
    RunInfo& info = fleet_->runs[id];
    // Stopping already (cancelled, or asked to requeue): a requeue would be refused.
    if (!Transition(info.state, RunEvent::kRequeueAsked).ok()) continue;
    if (v.action == config::IdleAction::kCancel) {
      fleet_->CancelLocked(id, "cancelled: " + note, &edits);
    } else {
      info.Take(RunEvent::kRequeueAsked);
      info.requeue_reason = "requeued: " + note;
      fleet_->StopPartsLocked(job->second, &info);
      if (info.parts_left <= 0) {  // no part was delivered yet: requeued at once
        edits.push_back(state::JobRequeued{id, info.requeue_reason});
        fleet_->runs.erase(id);
      }
    }
  }
  if (!edits.empty()) {
    Status s = ledger_->Commit(std::move(edits));
    if (!s.ok()) std::cerr << "hachi server: idle policy: " << s.message() << "\n";
  }
}

}  // namespace hachi::server
