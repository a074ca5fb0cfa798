// ClusterViews (views.h): the nodes and partitions as shown, the /metrics gauges, the
// partition loads behind `hachi stats`' likely causes, and GPU-hours (`hachi report`).
// Each copies what it needs under the lock (a snapshot, a few counters) and does the
// rest with the lock released: nothing here runs on the scheduling path.
#include <algorithm>
#include <memory>
#include <set>

#include "sched/eligibility.h"
#include "sched/features.h"
#include "sched/inspect.h"
#include "server/controller_metrics.h"
#include "server/views.h"
#include "topo/analysis.h"

namespace hachi::server {
namespace {

// Healthy GPUs of a node that jobs hold: neither free nor unhealthy (a GPU holding
// shares is not free).
int AllocatedGpus(const sched::Node& n) {
  const GpuSet all = GpuSet::FirstN(n.gpu_count());
  return ((all - n.unhealthy) - n.free_gpus).size();
}

// Same partitions, same order: a job's partition index means the same in both.
bool SamePartitions(const sched::ClusterState& a, const sched::ClusterState& b) {
  if (a.partitions.size() != b.partitions.size()) return false;
  for (size_t i = 0; i < a.partitions.size(); ++i) {
    if (a.partitions[i].name != b.partitions[i].name) return false;
  }
  return true;
}

}  // namespace

ClusterViews::ClusterViews(Ledger* ledger, Fleet* fleet, const AgentHub* hub,
                           UsageService* usage, const PowerService* power,
                           const ClockOffsets* clocks, ControllerMetrics* metrics,
                           const ControllerOptions* options)
    : OnLedger(ledger),
      fleet_(fleet),
      hub_(hub),
      usage_(usage),
      power_(power),
      clocks_(clocks),
      metrics_(metrics),
      options_(options) {}

state::NodeStatus ClusterViews::NodeStatusLocked(const state::NodeRecord& rec,
                                                 const sched::ClusterState& snap) const {
  fleet_->Held(ledger_);
  usage_->Held(ledger_);
  state::NodeStatus st;
  st.record = rec;
  auto hw = fleet_->hardware.find(rec.name);
  if (hw != fleet_->hardware.end() && hw->second.model) {
    st.gpus = hw->second.model->gpu_count();
    st.gpu_model = hw->second.gpu_model;
    st.gpu_memory_mib = hw->second.gpu_memory_mib;
    st.interconnect = std::string(topo::InterconnectClassName(hw->second.interconnect));
  }
  st.gpu_jobs.assign(st.gpus, 0);
  st.gpu_share_milli.assign(st.gpus, 0);
  if (hw != fleet_->hardware.end()) {  // MIG devices, free until a job below holds one
    for (const sched::MigSlot& m : hw->second.mig) {
      st.mig_devices.push_back({m.gpu, m.profile, m.uuid, m.memory_mib, 0});
    }
  }
  auto ni = fleet_->base.node_index.find(rec.name);
  if (ni != fleet_->base.node_index.end()) {
    const sched::Node& n = snap.nodes[ni->second];
    for (int p : n.partitions) st.partitions.push_back(snap.partitions[p].name);
    st.features = sched::NodeFeatures(n);
    st.alloc_cpus = n.cpus - n.free_cpus;
    st.alloc_memory_mib = n.memory_mib - n.free_memory_mib;
  }
  st.clock_offset_ms = clocks_->OffsetMs(rec.name);
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
                                  usage_->GpuUtilLocked(rec.name, g, id, job.start_time));
      }
    }
  }
  st.stray_processes = StrayProcessesLocked(rec.name);
  if (auto seen = fleet_->gpu_processes.find(rec.name);
      seen != fleet_->gpu_processes.end()) {
    st.gpu_sharing_events.assign(seen->second.mps_events.begin(),
                                 seen->second.mps_events.end());
  }
  // Up, but taking no new jobs while its agent stops runs the records ended.
  if (std::string stale = fleet_->StaleNoteLocked(rec.name); !stale.empty()) {
    st.record.state_reason = std::move(stale);
  }
  power_->Held(ledger_);
  if (std::optional<PowerService::NodeView> p = power_->NodeLocked(rec.name)) {
    st.pool = p->pool;
    st.power = p->state;
    // Not on: why, rather than what its record said when it was ("agent silent").
    if (p->state != "on" && p->state != "burn-in") {
      st.record.state_reason = p->note.empty() ? "powered " + p->state : p->note;
    } else if (st.record.state_reason.empty()) {
      st.record.state_reason = p->note;  // on after a suspend that failed
    }
  }
  return st;
}

std::vector<state::StrayGpuProcess> ClusterViews::StrayProcessesLocked(
    const std::string& node) const {
  fleet_->Held(ledger_);
  std::vector<state::StrayGpuProcess> out;
  auto seen = fleet_->gpu_processes.find(node);
  if (seen == fleet_->gpu_processes.end()) return out;
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

std::vector<state::NodeStatus> ClusterViews::Nodes() const {
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  const sched::ClusterState snap =
      BuildSnapshot(fleet_->base, ledger_->image(), &ledger_->active());
  std::vector<state::NodeStatus> out;
  for (const sched::Node& n : snap.nodes) {
    auto rec = ledger_->image().nodes.find(n.name);
    if (rec != ledger_->image().nodes.end()) {
      out.push_back(NodeStatusLocked(rec->second, snap));
      continue;
    }
    // A burst node never registered: its pool's shape, down until it is up.
    state::NodeRecord off;
    off.name = n.name;
    off.cpus = n.cpus;
    off.memory_mib = n.memory_mib;
    off.state = state::NodeState::kDown;
    state::NodeStatus st = NodeStatusLocked(off, snap);
    st.gpus = n.gpu_count();
    st.gpu_model = n.gpu_model;
    st.gpu_memory_mib = n.gpu_memory_mib;
    st.interconnect = std::string(topo::InterconnectClassName(n.interconnect));
    st.gpu_jobs.assign(st.gpus, 0);
    st.gpu_share_milli.assign(st.gpus, 0);
    st.gpu_util.assign(st.gpus, -1);
    out.push_back(std::move(st));
  }
  for (const auto& [name, rec] : ledger_->image().nodes) {
    if (!fleet_->base.node_index.count(name)) out.push_back(NodeStatusLocked(rec, snap));
  }
  return out;
}

std::vector<sched::PoolPower> ClusterViews::Pools() const {
  MutexLock lock(&ledger_->mu());
  power_->Held(ledger_);
  return power_->PoolsLocked();
}

std::vector<sched::Partition> ClusterViews::Partitions() const {
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  return fleet_->base.state.partitions;
}

std::vector<std::string> ClusterViews::Warnings() const {
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  return fleet_->base.warnings;
}

ControllerStats ClusterViews::stats() const {
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  ControllerStats s = fleet_->stats;
  s.cycle_due = fleet_->dirty;
  return s;
}

ClusterGauges ClusterViews::Gauges() const {
  ClusterGauges g;
  sched::ClusterState snap;
  std::set<state::JobId> running;
  std::shared_ptr<const sched::ClusterState> last;  // the last cycle's snapshot
  {
    MutexLock lock(&ledger_->mu());
    fleet_->Held(ledger_);
    // Every job of the image: finished ones too, which a 50k-job soak keeps (a scan of a
    // map, a few milliseconds at 100k jobs, per scrape).
    for (const auto& [id, job] : ledger_->image().jobs) {
      ++g.jobs[static_cast<size_t>(job.state)];
      if (job.state == state::JobState::kPending && job.held) ++g.held;
      if (job.state == state::JobState::kRunning) running.insert(id);
    }
    // Nodes and what runs on them now, without the pending jobs: copying 100k of those
    // here held the lock as long as a cycle's own snapshot (80-150 ms, measured).
    snap = BuildSnapshot(fleet_->base, ledger_->image(), &running);
    last = fleet_->diagnosed;
    for (const sched::Node& n : snap.nodes) {  // name order (BuildBase)
      ClusterGauges::NodeRow row;
      row.node = n.name;
      row.total = n.gpu_count();
      row.unhealthy = n.unhealthy.size();
      row.allocated = AllocatedGpus(n);
      auto rec = ledger_->image().nodes.find(n.name);
      row.state = rec != ledger_->image().nodes.end()
                      ? std::string(state::NodeStateName(rec->second.state))
                      : "down";  // a burst node never registered
      power_->Held(ledger_);
      if (std::optional<PowerService::NodeView> p = power_->NodeLocked(n.name)) {
        row.pool = p->pool;
        row.power = p->state;
      }
      if (const int64_t silent = hub_->SilentForMs(n.name); silent >= 0) {
        row.heartbeat_age_s = static_cast<double>(silent) / 1000.0;
      }
      g.nodes.push_back(std::move(row));
    }
    power_->Held(ledger_);
    g.pools = power_->PoolsLocked();
    g.cycles = fleet_->stats.cycles;
    g.submits = fleet_->stats.submits;
    g.starts = fleet_->stats.starts;
    usage_->Held(ledger_);
    usage_->GaugesLocked(&g);
  }
  // The waiting jobs as the last cycle saw them (its snapshot is immutable), less those
  // started since; jobs submitted since wait for the next cycle (one is due at once).
  if (last != nullptr && SamePartitions(*last, snap)) {
    for (const sched::Job& j : last->pending) {
      if (running.count(j.id) == 0) snap.pending.push_back(j);
    }
  }
  const std::vector<int> fragmented = sched::FragmentedGpus(snap, options_->clock->Now());
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

std::string ClusterViews::MetricsText() const { return metrics_->registry().Render(); }
std::vector<report::PartitionLoad> ClusterViews::PartitionLoads() const {
  std::vector<report::PendingJob> pending;
  sched::ClusterState snap;
  {
    MutexLock lock(&ledger_->mu());
    fleet_->Held(ledger_);
    std::set<state::JobId> running;  // the snapshot needs nodes and running jobs only
    for (state::JobId id : ledger_->active()) {
      const state::JobRecord& r = ledger_->image().jobs.at(id);
      if (r.state == state::JobState::kRunning) running.insert(id);
      if (r.state != state::JobState::kPending || r.held) continue;
      auto d = fleet_->diagnoses.find(id);
      pending.push_back(
          {r.req.partition, r.req.user, r.req.Shared() ? 0 : r.req.TotalGpus(),
           r.req.Shared() ? 0 : r.req.GpusPerNode(), r.req.time_limit,
           d == fleet_->diagnoses.end() ? sched::Reason::kNone : d->second.reason});
    }
    snap = BuildSnapshot(fleet_->base, ledger_->image(), &running);
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

report::GpuReport ClusterViews::GpuHours(const report::ReportQuery& q) const {
  MutexLock lock(&ledger_->mu());
  fleet_->Held(ledger_);
  std::map<std::string, std::string> groups;
  if (q.by == report::ReportBy::kNodeGroup) {
    for (const auto& [name, hw] : fleet_->hardware) groups[name] = hw.gpu_model;
  }
  // The pools (docs/pools.md): each node's pool, and its price for the cost columns.
  std::map<std::string, double> prices;
  if (options_->config) {
    for (const config::PoolConfig& pool : options_->config->pools) {
      for (const std::string& node : pool.nodes.names) {
        prices[node] = pool.price_per_gpu_hour;
        if (q.by == report::ReportBy::kPool) groups[node] = pool.name;
      }
    }
  }
  usage_->Held(ledger_);
  return usage_->ReportLocked(q, groups, prices);
}

}  // namespace hachi::server
