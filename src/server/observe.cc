// Controller: what it tells about itself — the /metrics gauges, the partition loads
// behind `hachi stats`' likely causes, and a job's explanation (`hachi explain`). Each
// copies what it needs under the lock (a snapshot, a few counters) and does the rest
// with the lock released: nothing here runs on the scheduling path.
#include <algorithm>
#include <memory>
#include <set>

#include "sched/eligibility.h"
#include "sched/inspect.h"
#include "server/controller.h"
#include "server/controller_metrics.h"

namespace hachi::server {
namespace {

// Healthy GPUs of a node that jobs hold: neither free nor unhealthy (a GPU holding
// shares is not free).
int AllocatedGpus(const sched::Node& n) {
  const GpuSet all = GpuSet::FirstN(n.gpu_count());
  return ((all - n.unhealthy) - n.free_gpus).size();
}

std::string NodesText(int n) { return std::to_string(n) + (n == 1 ? " node" : " nodes"); }

std::string GpusText(int n) { return std::to_string(n) + (n == 1 ? " GPU" : " GPUs"); }

// Same partitions, same order: a job's partition index means the same in both.
bool SamePartitions(const sched::ClusterState& a, const sched::ClusterState& b) {
  if (a.partitions.size() != b.partitions.size()) return false;
  for (size_t i = 0; i < a.partitions.size(); ++i) {
    if (a.partitions[i].name != b.partitions[i].name) return false;
  }
  return true;
}

}  // namespace

ClusterGauges Controller::Gauges() const {
  ClusterGauges g;
  sched::ClusterState snap;
  std::set<state::JobId> running;
  std::shared_ptr<const sched::ClusterState> last;  // the last cycle's snapshot
  {
    MutexLock lock(&ledger_->mu());
    // Every job of the image: finished ones too, which a 50k-job soak keeps (a scan of a
    // map, a few milliseconds at 100k jobs, per scrape).
    for (const auto& [id, job] : ledger_->image().jobs) {
      ++g.jobs[static_cast<size_t>(job.state)];
      if (job.state == state::JobState::kPending && job.held) ++g.held;
      if (job.state == state::JobState::kRunning) running.insert(id);
    }
    // Nodes and what runs on them now, without the pending jobs: copying 100k of those
    // here held the lock as long as a cycle's own snapshot (80-150 ms, measured).
    snap = BuildSnapshot(base_, ledger_->image(), &running);
    last = diagnosed_;
    for (const sched::Node& n : snap.nodes) {  // name order (BuildBase)
      ClusterGauges::NodeRow row;
      row.node = n.name;
      row.total = n.gpu_count();
      row.unhealthy = n.unhealthy.size();
      row.allocated = AllocatedGpus(n);
      auto rec = ledger_->image().nodes.find(n.name);
      if (rec != ledger_->image().nodes.end())
        row.state = std::string(state::NodeStateName(rec->second.state));
      if (const int64_t silent = agents_.SilentForMs(n.name); silent >= 0) {
        row.heartbeat_age_s = static_cast<double>(silent) / 1000.0;
      }
      g.nodes.push_back(std::move(row));
    }
    g.cycles = stats_.cycles;
    g.submits = stats_.submits;
    g.starts = stats_.starts;
    usage_.Held(ledger_.get());
    usage_.GaugesLocked(&g);
  }
  // The waiting jobs as the last cycle saw them (its snapshot is immutable), less those
  // started since; jobs submitted since wait for the next cycle (one is due at once).
  if (last != nullptr && SamePartitions(*last, snap)) {
    for (const sched::Job& j : last->pending) {
      if (running.count(j.id) == 0) snap.pending.push_back(j);
    }
  }
  const std::vector<int> fragmented = sched::FragmentedGpus(snap, options_.clock->Now());
  for (size_t p = 0; p < snap.partitions.size(); ++p) {
    ClusterGauges::PartitionRow row;
    row.partition = snap.partitions[p].name;
    for (int i : snap.partitions[p].nodes) {
      if (i < 0 || i >= static_cast<int>(g.nodes.size())) continue;
      row.total += g.nodes[i].total;
      row.allocated += g.nodes[i].allocated;
      row.unhealthy += g.nodes[i].unhealthy;
    }
    row.fragmented = fragmented[p];
    g.partitions.push_back(std::move(row));
  }
  return g;
}

std::string Controller::MetricsText() const { return metrics_->registry().Render(); }

std::vector<report::PartitionLoad> Controller::PartitionLoads() const {
  std::vector<report::PendingJob> pending;
  sched::ClusterState snap;
  {
    MutexLock lock(&ledger_->mu());
    std::set<state::JobId> running;  // the snapshot needs nodes and running jobs only
    for (state::JobId id : ledger_->active()) {
      const state::JobRecord& r = ledger_->image().jobs.at(id);
      if (r.state == state::JobState::kRunning) running.insert(id);
      if (r.state != state::JobState::kPending || r.held) continue;
      auto d = diagnoses_.find(id);
      pending.push_back(
          {r.req.partition, r.req.user, r.req.Shared() ? 0 : r.req.TotalGpus(),
           r.req.Shared() ? 0 : r.req.GpusPerNode(), r.req.time_limit,
           d == diagnoses_.end() ? sched::Reason::kNone : d->second.reason});
    }
    snap = BuildSnapshot(base_, ledger_->image(), &running);
  }
  std::vector<report::PartitionLoad> loads;
  for (const sched::Partition& p : snap.partitions) {
    report::PartitionLoad l;
    l.partition = p.name;
    for (int i : p.nodes) {
      if (i < 0 || i >= static_cast<int>(snap.nodes.size())) continue;
      const sched::Node& n = snap.nodes[i];
      ++l.nodes;
      if (n.state != sched::NodeState::kUp) continue;
      ++l.nodes_up;
      l.gpus += n.gpu_count() - n.unhealthy.size();
      l.allocated_gpus += AllocatedGpus(n);
      const int free = n.free_gpus.size();
      l.free_gpus += free;
      if (free > l.largest_free) {
        l.largest_free = free;
        l.largest_free_node = n.name;
      }
    }
    loads.push_back(std::move(l));
  }
  report::AddPending(&loads, pending);
  return loads;
}

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

Result<report::JobExplain> Controller::Explain(state::JobId id) const {
  report::JobExplain e;
  state::JobRecord rec;
  sched::ClusterState snap;
  sched::Job probe;
  std::vector<std::string> stale_notes;  // nodes held for their stale runs
  {
    MutexLock lock(&ledger_->mu());
    auto it = ledger_->image().jobs.find(id);
    if (it == ledger_->image().jobs.end())
      return NotFound("no job " + std::to_string(id));
    rec = it->second;
    e.job = id;
    e.state = std::string(state::JobStateName(rec.state));
    e.as_of = options_.clock->Now();
    e.partition = rec.req.partition;
    e.needed_gpus = rec.req.Shared() ? 1 : rec.req.GpusPerNode();
    e.needed_nodes = std::max(rec.req.nodes, 1);
    e.gpu_share_milli = rec.req.gpu_share_milli;
    Time eligible = rec.submit_time;
    bool requeued_last = false;
    if (auto el = eligible_since_.find(id); el != eligible_since_.end()) {
      eligible = std::max(eligible, el->second.at);
      requeued_last = el->second.requeued;
    }
    // History, from the record (and when the job last became eligible, if since this
    // server started).
    e.history.push_back(
        {rec.submit_time, "submitted",
         "submitted to partition " + rec.req.partition + " (" +
             (rec.req.Shared() ? std::string("a GPU share")
                               : GpusText(rec.req.TotalGpus())) +
             (rec.req.nodes > 1 ? " on " + NodesText(rec.req.nodes) : "") + ")"});
    if (rec.requeues > 0) {
      e.history.push_back(
          {requeued_last ? eligible : 0, "requeued",
           "requeued " + std::to_string(rec.requeues) +
               (rec.requeues == 1 ? " time" : " times") +
               (rec.state == state::JobState::kPending && !rec.reason.empty()
                    ? " (last: " + rec.reason + ")"
                    : "")});
    }
    if (eligible > rec.submit_time && !requeued_last) {
      e.history.push_back(
          {eligible, "released", "released from hold; its wait counts from here"});
    }
    if (rec.start_time > 0 && rec.state != state::JobState::kPending) {
      std::string on;
      for (const state::NodeAllocation& a : rec.allocations) {
        on += (on.empty() ? "" : ", ") + a.node + " (GPUs " + a.gpus.ToString() + ")";
      }
      const Time from = eligible <= rec.start_time ? eligible : rec.submit_time;
      e.history.push_back({rec.start_time, "started",
                           "started on " + on + " after waiting " +
                               FormatDuration(rec.start_time - from)});
      if (rec.state == state::JobState::kRunning && rec.req.time_limit > 0) {
        e.history.push_back({rec.start_time + rec.req.time_limit, "time_limit",
                             "stopped at its time limit " +
                                 FormatDuration(rec.req.time_limit) +
                                 " unless it ends first"});
      }
    }
    if (state::IsFinal(rec.state)) {
      std::string text = "ended " + e.state;
      if (rec.state == state::JobState::kCompleted ||
          rec.state == state::JobState::kFailed) {
        text += " (exit code " + std::to_string(rec.exit_code) +
                (rec.signal != 0 ? ", signal " + std::to_string(rec.signal) : "") + ")";
      }
      if (!rec.reason.empty()) text += ": " + rec.reason;
      if (rec.start_time > 0 && rec.end_time >= rec.start_time) {
        text += " after running " + FormatDuration(rec.end_time - rec.start_time);
      }
      e.history.push_back({rec.end_time, "ended", std::move(text)});
    }
    // Running on a node that went down: it waits for that node's fence.
    if (std::string fence = FenceNoteLocked(rec); !fence.empty()) {
      e.history.push_back({e.as_of, "fence", std::move(fence)});
    }
    usage_.Held(ledger_.get());
    if (std::string idle = usage_.IdleNoteLocked(rec); !idle.empty()) {
      e.history.push_back({e.as_of, "idle", std::move(idle)});
    }
    if (rec.state != state::JobState::kPending) return e;

    // Pending: the last cycle's word and numbers.
    if (rec.held) {
      e.reason = std::string(sched::ReasonName(sched::Reason::kHeld));
      e.diagnosis = "held";
    } else if (auto d = diagnoses_.find(id); d != diagnoses_.end() && diagnosed_) {
      const sched::Diagnosis& dg = d->second;
      e.reason = std::string(sched::ReasonName(dg.reason));
      e.diagnosis = dg.Format(*diagnosed_, diagnosed_at_);
      e.diagnosed_at = diagnosed_at_;
      // Positions among the jobs still pending that the cycle ordered (jobs it started
      // are gone from diagnoses_): 1 + those ahead.
      e.queue_position = e.partition_position = 1;
      for (const auto& [other, od] : diagnoses_) {
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
            dg.earliest_node < static_cast<int>(diagnosed_->nodes.size())) {
          e.earliest_node = diagnosed_->nodes[dg.earliest_node].name;
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
    snap = BuildSnapshot(base_, ledger_->image(), &running);
    HoldStaleNodesLocked(&snap);
    for (const auto& [node, jobs] : stale_runs_) {
      if (!jobs.empty()) stale_notes.push_back(StaleNoteLocked(node));
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

}  // namespace hachi::server
