// JobViews (views.h): jobs as they are shown, why one waits (`hachi explain`), and
// what its runs did with their GPUs.
#include <algorithm>
#include <memory>
#include <set>

#include "sched/eligibility.h"
#include "sched/inspect.h"
#include "server/views.h"

namespace hachi::server {
namespace {

std::string NodesText(int n) { return std::to_string(n) + (n == 1 ? " node" : " nodes"); }

std::string GpusText(int n) { return std::to_string(n) + (n == 1 ? " GPU" : " GPUs"); }

}  // namespace

namespace {

// The node groups of an explanation, in a fixed order, with their sentences.
void AddNodeGroups(const sched::NodeBreakdown& b, const state::JobRecord& job,
                   report::JobExplain* e) {
  using sched::NodeVerdict;
  const int need = job.req.Shared() ? 1 : job.req.GpusPerNode();
  auto count = [&](NodeVerdict v) { return b.verdicts[static_cast<int>(v)]; };
  auto largest = [&](NodeVerdict v) { return b.largest_free[static_cast<int>(v)]; };
  auto add = [&](const char* reason, int n, int largest_free, const std::string& why) {
    if (n > 0) e->nodes.push_back({reason, n, largest_free, NodesText(n) + ": " + why});
  };
  add("fits", count(NodeVerdict::kFits), largest(NodeVerdict::kFits),
      job.req.nodes > 1
          ? "would take one part of it now (needs " + NodesText(job.req.nodes) + ")"
          : "would take it now");
  add("busy", count(NodeVerdict::kGpus) - b.other_user, largest(NodeVerdict::kGpus),
      "busy (largest free set " + GpusText(largest(NodeVerdict::kGpus)) + " < " +
          std::to_string(need) + ")");
  add("other_user", b.other_user, -1,
      std::to_string(b.other_user_gpus) +
          (b.other_user_gpus == 1 ? " shared GPU with room holds another user's shares"
                                  : " shared GPUs with room hold other users' shares") +
          " (MPS serves one user per GPU)");
  add("cpus", count(NodeVerdict::kCpus), -1,
      "too few free CPUs (needs " + std::to_string(sched::NodeCpus(job.req)) + ")");
  add("memory", count(NodeVerdict::kMemory), -1,
      "too little free memory (needs " + std::to_string(sched::NodeMemory(job.req)) +
          " MiB)");
  add("isolation", count(NodeVerdict::kIsolation), -1,
      "whole-node and shared jobs do not mix there");
  add("reserved", count(NodeVerdict::kReserved), -1, "reserved for jobs ahead");
  add("window", count(NodeVerdict::kWindow), -1, "in another partition's time window");
  const int drained = b.drained;
  const int down = count(NodeVerdict::kDown) - drained;
  add("drained", drained, -1, "drained");
  add("down", down, -1, "down");
  add("unsuitable", b.unsuitable, -1,
      "unsuitable (GPU model, GPU memory, or fewer than " + GpusText(need) + ")");
  add("not_in_partition", b.not_in_partition, -1,
      "not in partition " + job.req.partition);
}

}  // namespace

JobViews::JobViews(Ledger* ledger, Fleet* fleet, UsageService* usage,
                   const PowerService* power, const ControllerOptions* options)
    : OnLedger(ledger), fleet_(fleet), usage_(usage), power_(power), options_(options) {}

Result<state::JobRecord> JobViews::Job(state::JobId id) const {
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  auto it = ledger_->image().jobs.find(id);
  if (it == ledger_->image().jobs.end()) return NotFound("no job " + std::to_string(id));
  state::JobRecord r = it->second;
  if (auto run = fleet_->runs.find(id);
      run != fleet_->runs.end() && r.state == state::JobState::kRunning) {
    r.gpu_memory_peak_mib = run->second.gpu_memory_peak_mib;
  }
  ShownLocked(&r);
  return r;
}

void JobViews::ShownLocked(state::JobRecord* r) const {
  fleet_->Held(ledger_);
  usage_->Held(ledger_);
  if (r->state == state::JobState::kRunning) {
    if (auto u = usage_->SoFarLocked(r->id)) r->usage = *std::move(u);  // so far
  }
  if (r->state == state::JobState::kPending) {
    std::string reason = fleet_->ReasonLocked(r->id);
    if (!reason.empty()) r->reason = std::move(reason);
  } else if (std::string fence = fleet_->FenceNoteLocked(*r); !fence.empty()) {
    r->reason = std::move(fence);  // `show job`: why a job on a down node is RUNNING
  } else if (std::string idle = usage_->IdleNoteLocked(*r); !idle.empty()) {
    r->reason = std::move(idle);  // warned by its partition's idle policy
  }
}

std::vector<state::JobRecord> JobViews::Jobs(bool include_finished, state::JobId after,
                                             size_t limit) const {
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
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

std::optional<PendingInfo> JobViews::Pending(state::JobId id) const {
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  if (auto j = ledger_->image().jobs.find(id);
      j != ledger_->image().jobs.end() && j->second.held &&
      j->second.state == state::JobState::kPending) {
    return PendingInfo{std::string(sched::ReasonName(sched::Reason::kHeld)), "held"};
  }
  auto d = fleet_->diagnoses.find(id);
  if (d == fleet_->diagnoses.end() || !fleet_->diagnosed) return std::nullopt;
  PendingInfo info{std::string(sched::ReasonName(d->second.reason)),
                   d->second.Format(*fleet_->diagnosed, fleet_->diagnosed_at)};
  power_->Held(ledger_);
  if (std::string power = power_->WaitNoteLocked(id); !power.empty()) {
    info.diagnosis += "; " + power;  // the capacity it waits for is coming
  }
  return info;
}

std::vector<JobBrief> JobViews::ActiveJobBriefs() const {
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
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

void JobViews::HistoryLocked(const state::JobRecord& rec, report::JobExplain* e) const {
  fleet_->Held(ledger_);
  Time eligible = rec.submit_time;
  bool requeued_last = false;
  if (auto el = fleet_->eligible_since.find(rec.id); el != fleet_->eligible_since.end()) {
    eligible = std::max(eligible, el->second.at);
    requeued_last = el->second.requeued;
  }
  // History, from the record (and when the job last became eligible, if since this
  // server started).
  e->history.push_back({rec.submit_time, "submitted",
                        "submitted to partition " + rec.req.partition + " (" +
                            (rec.req.Shared() ? std::string("a GPU share")
                                              : GpusText(rec.req.TotalGpus())) +
                            (rec.req.nodes > 1 ? " on " + NodesText(rec.req.nodes) : "") +
                            ")"});
  if (rec.requeues > 0) {
    e->history.push_back(
        {requeued_last ? eligible : 0, "requeued",
         "requeued " + std::to_string(rec.requeues) +
             (rec.requeues == 1 ? " time" : " times") +
             (rec.state == state::JobState::kPending && !rec.reason.empty()
                  ? " (last: " + rec.reason + ")"
                  : "")});
  }
  if (eligible > rec.submit_time && !requeued_last) {
    e->history.push_back(
        {eligible, "released", "released from hold; its wait counts from here"});
  }
  if (rec.start_time > 0 && rec.state != state::JobState::kPending) {
    std::string on;
    for (const state::NodeAllocation& a : rec.allocations) {
      on += (on.empty() ? "" : ", ") + a.node + " (GPUs " + a.gpus.ToString() + ")";
    }
    const Time from = eligible <= rec.start_time ? eligible : rec.submit_time;
    e->history.push_back(
        {rec.start_time, "started",
         "started on " + on + " after waiting " + FormatDuration(rec.start_time - from)});
    if (rec.state == state::JobState::kRunning && rec.req.time_limit > 0) {
      e->history.push_back({rec.start_time + rec.req.time_limit, "time_limit",
                            "stopped at its time limit " +
                                FormatDuration(rec.req.time_limit) +
                                " unless it ends first"});
    }
  }
  if (state::IsFinal(rec.state)) {
    std::string text = "ended " + e->state;
    if (rec.state == state::JobState::kCompleted ||
        rec.state == state::JobState::kFailed) {
      text += " (exit code " + std::to_string(rec.exit_code) +
              (rec.signal != 0 ? ", signal " + std::to_string(rec.signal) : "") + ")";
    }
    if (!rec.reason.empty()) text += ": " + rec.reason;
    if (rec.start_time > 0 && rec.end_time >= rec.start_time) {
      text += " after running " + FormatDuration(rec.end_time - rec.start_time);
    }
    e->history.push_back({rec.end_time, "ended", std::move(text)});
  }
  // Running on a node that went down: it waits for that node's fence.
  if (std::string fence = fleet_->FenceNoteLocked(rec); !fence.empty()) {
    e->history.push_back({e->as_of, "fence", std::move(fence)});
  }
  usage_->Held(ledger_);
  if (std::string idle = usage_->IdleNoteLocked(rec); !idle.empty()) {
    e->history.push_back({e->as_of, "idle", std::move(idle)});
  }
}

Result<report::JobExplain> JobViews::Explain(state::JobId id) const {
  report::JobExplain e;
  state::JobRecord rec;
  sched::ClusterState snap;
  sched::Job probe;
  std::vector<std::string> stale_notes;  // nodes held for their stale runs
  {
    MutexLock lock(&ledger_->mu());
    fleet_->Held(ledger_);
    auto it = ledger_->image().jobs.find(id);
    if (it == ledger_->image().jobs.end())
      return NotFound("no job " + std::to_string(id));
    rec = it->second;
    e.job = id;
    e.state = std::string(state::JobStateName(rec.state));
    e.as_of = options_->clock->Now();
    e.partition = rec.req.partition;
    e.needed_gpus = rec.req.Shared() ? 1 : rec.req.GpusPerNode();
    e.needed_nodes = std::max(rec.req.nodes, 1);
    e.gpu_share_milli = rec.req.gpu_share_milli;
    HistoryLocked(rec, &e);
    if (rec.state != state::JobState::kPending) return e;

    // Pending: the last cycle's word and numbers.
    if (rec.held) {
      e.reason = std::string(sched::ReasonName(sched::Reason::kHeld));
      e.diagnosis = "held";
    } else if (auto d = fleet_->diagnoses.find(id);
               d != fleet_->diagnoses.end() && fleet_->diagnosed) {
      const sched::Diagnosis& dg = d->second;
      e.reason = std::string(sched::ReasonName(dg.reason));
      e.diagnosis = dg.Format(*fleet_->diagnosed, fleet_->diagnosed_at);
      power_->Held(ledger_);
      if (std::string power = power_->WaitNoteLocked(id); !power.empty()) {
        e.diagnosis += "; " + power;
      }
      e.diagnosed_at = fleet_->diagnosed_at;
      // Positions among the jobs still pending that the cycle ordered (jobs it started
      // are gone from fleet_->diagnoses): 1 + those ahead.
      e.queue_position = e.partition_position = 1;
      for (const auto& [other, od] : fleet_->diagnoses) {
        auto o = ledger_->image().jobs.find(other);
        if (o == ledger_->image().jobs.end() ||
            o->second.state != state::JobState::kPending)
          continue;
        const bool same = o->second.req.partition == rec.req.partition;
        const bool ahead = od.queue_position < dg.queue_position;
        ++e.queue_length;
        e.queue_position += ahead;
        e.partition_length += same;
        e.partition_position += same && ahead;
      }
      if (dg.earliest_start != kNever) {
        e.earliest_start = dg.earliest_start;
        if (dg.earliest_node >= 0 &&
            dg.earliest_node < static_cast<int>(fleet_->diagnosed->nodes.size())) {
          e.earliest_node = fleet_->diagnosed->nodes[dg.earliest_node].name;
        }
        e.blocking_job = dg.blocking_job;
      }
    }
    // Nodes and running jobs are all ExplainNodes reads: not the pending ones.
    std::set<state::JobId> running;
    for (state::JobId a : ledger_->active()) {
      auto j = ledger_->image().jobs.find(a);
      if (j != ledger_->image().jobs.end() &&
          j->second.state == state::JobState::kRunning)
        running.insert(a);
    }
    snap = BuildSnapshot(fleet_->base, ledger_->image(), &running);
    fleet_->HoldStaleNodesLocked(&snap);
    for (const auto& [node, jobs] : fleet_->stale_runs) {
      if (!jobs.empty()) stale_notes.push_back(fleet_->StaleNoteLocked(node));
    }
    probe.id = id;
    probe.req = rec.req;
    probe.partition = snap.PartitionIndex(rec.req.partition);
    probe.submit_time = rec.submit_time;
  }
  // The nodes now, by the scheduler's own node check.
  const sched::NodeBreakdown b = sched::ExplainNodes(snap, probe, e.as_of);
  e.largest_free = b.largest_free_gpus;
  if (b.largest_free_node >= 0)
    e.largest_free_node = snap.nodes[b.largest_free_node].name;
  e.free_gpus = b.free_gpus;
  e.fitting_nodes = b.verdicts[static_cast<int>(sched::NodeVerdict::kFits)];
  AddNodeGroups(b, rec, &e);
  // The nodes held for stale runs count as drained to the scheduler; say why instead.
  if (!stale_notes.empty()) {
    auto drained =
        std::find_if(e.nodes.begin(), e.nodes.end(),
                     [](const report::ExplainNodes& g) { return g.reason == "drained"; });
    if (drained != e.nodes.end()) {
      drained->count -= std::min<int>(drained->count, stale_notes.size());
      drained->text = NodesText(drained->count) + ": drained";
      if (drained->count == 0) e.nodes.erase(drained);
    }
    std::string text = NodesText(static_cast<int>(stale_notes.size())) + ": ";
    for (size_t i = 0; i < stale_notes.size(); ++i) {
      text += (i == 0 ? "" : "; ") + stale_notes[i];
    }
    e.nodes.push_back({"stopping", static_cast<int>(stale_notes.size()), -1, text});
  }
  return e;
}

Result<std::vector<state::JobUsage>> JobViews::Usage(state::JobId id) const {
  return usage_->Runs(id);
}

}  // namespace hachi::server
