#include "server/controller_metrics.h"

#include <string_view>

#include "sched/power.h"

#ifndef HACHI_VERSION
#define HACHI_VERSION "unknown"
#endif

namespace hachi::server {
namespace {

using metrics::Type;
using metrics::Writer;

// Waits from a second to a week: the alert threshold (20 min) sits between buckets.
std::vector<double> WaitBuckets() {
  return {1,    5,    15,   30,    60,    120,   300,    600,   1200,
          1800, 3600, 7200, 14400, 28800, 86400, 172800, 604800};
}

}  // namespace

ControllerMetrics::ControllerMetrics()
    : queue_wait_(registry_.AddHistogram("hachi_queue_wait_seconds",
                                         "Time from submit (or the last release or "
                                         "requeue) to start, observed when a job "
                                         "starts; gpus is the job's total GPU count, "
                                         "\"share\" for a fraction of one GPU.",
                                         WaitBuckets(), {"partition", "gpus"})),
      idle_actions_(registry_.AddCounter(
          "hachi_idle_gpu_actions_total",
          "Running jobs the idle-GPU policy acted on (warned, requeued, cancelled): "
          "every "
          "GPU below the partition's idle_gpu_below for its idle_gpu_after.",
          {"partition", "action"})),
      cycle_(
          registry_
              .AddHistogram("hachi_cycle_duration_seconds",
                            "One scheduling cycle: snapshot, scheduler and plan applier.",
                            metrics::ExponentialBuckets(0.0005, 2, 14))
              .Get()),
      plan_apply_(
          registry_
              .AddHistogram("hachi_plan_apply_seconds",
                            "The plan applier: re-checking a cycle's starts against "
                            "the records, committing them and queueing launches.",
                            metrics::ExponentialBuckets(0.0001, 2, 16))
              .Get()),
      store_commit_(registry_
                        .AddHistogram("hachi_store_commit_seconds",
                                      "A store commit as its caller waits for it, group "
                                      "commit included (SQLite: synchronous=FULL).",
                                      metrics::ExponentialBuckets(0.0001, 2, 16))
                        .Get()) {
  registry_
      .AddGauge("hachi_build_info", "The running server's version; always 1.",
                {"version"})
      .With({HACHI_VERSION})
      .Set(1);
}

void ControllerMetrics::ObserveWait(const std::string& partition, int gpus, bool share,
                                    double seconds) {
  const int key = share ? -1 : gpus;
  metrics::Histogram* h = nullptr;
  {
    MutexLock lock(&wait_mu_);
    auto p = wait_series_.find(partition);
    if (p != wait_series_.end()) {
      auto g = p->second.find(key);
      if (g != p->second.end()) h = g->second;
    }
    if (h == nullptr) {
      h = &queue_wait_.With(
          {partition, share ? std::string("share") : std::to_string(gpus)});
      wait_series_[partition][key] = h;
    }
  }
  h->Observe(seconds);
}

void WriteClusterGauges(const ClusterGauges& g, Writer& w) {
  static constexpr std::string_view kStates[] = {"total", "allocated", "unhealthy"};
  w.Begin(
      "hachi_node_gpus",
      "GPUs of a node: total, allocated to jobs (a shared GPU counts once), unhealthy "
      "(taken out of service by health checks).",
      Type::kGauge);
  for (const ClusterGauges::NodeRow& n : g.nodes) {
    const int v[] = {n.total, n.allocated, n.unhealthy};
    for (int i = 0; i < 3; ++i) w.Sample({{"node", n.node}, {"state", kStates[i]}}, v[i]);
  }
  w.Begin(
      "hachi_partition_gpus",
      "GPUs of a partition's nodes, as hachi_node_gpus; a node in two partitions counts "
      "in both.",
      Type::kGauge);
  for (const ClusterGauges::PartitionRow& p : g.partitions) {
    const int v[] = {p.total, p.allocated, p.unhealthy};
    for (int i = 0; i < 3; ++i) {
      w.Sample({{"partition", p.partition}, {"state", kStates[i]}}, v[i]);
    }
  }
  w.Begin("hachi_fragmented_gpus",
          "Free GPUs of a partition that cannot serve its smallest waiting multi-GPU job "
          "(no such job of that size fits their node now); 0 when none waits.",
          Type::kGauge);
  for (const ClusterGauges::PartitionRow& p : g.partitions) {
    w.Sample({{"partition", p.partition}}, p.fragmented);
  }
  w.Begin("hachi_node_state",
          "1 for the node's state (up, drained, down), 0 for the others.", Type::kGauge);
  for (const ClusterGauges::NodeRow& n : g.nodes) {
    for (std::string_view s : {"up", "drained", "down"}) {
      w.Sample({{"node", n.node}, {"state", s}}, n.state == s ? 1 : 0);
    }
  }
  w.Begin(
      "hachi_node_power_state",
      "Nodes of burst pools: 1 for the node's power state (on, off, resuming, burn-in, "
      "suspending, resume-failed), 0 for the others.",
      Type::kGauge);
  for (const ClusterGauges::NodeRow& n : g.nodes) {
    if (n.power.empty()) continue;
    for (int s = 0; s <= static_cast<int>(sched::PowerState::kBurnIn); ++s) {
      const std::string_view name =
          sched::PowerStateName(static_cast<sched::PowerState>(s));
      w.Sample({{"node", n.node}, {"pool", n.pool}, {"state", name}},
               n.power == name ? 1 : 0);
    }
  }
  w.Begin("hachi_pool_powered_nodes",
          "Nodes of a pool that are powered (resuming, in burn-in, on or suspending); a "
          "fixed pool's all.",
          Type::kGauge);
  for (const sched::PoolPower& p : g.pools) w.Sample({{"pool", p.name}}, p.powered);
  w.Begin("hachi_pool_price_per_gpu_hour", "A pool's price per GPU-hour, as configured.",
          Type::kGauge);
  for (const sched::PoolPower& p : g.pools) {
    w.Sample({{"pool", p.name}}, p.price_per_gpu_hour);
  }
  w.Begin("hachi_pool_powered_gpu_seconds_total",
          "GPU-seconds a burst pool's nodes have been powered (from their resume until "
          "off), since this server started: times hachi_pool_price_per_gpu_hour / 3600, "
          "what the burst capacity cost.",
          Type::kCounter);
  for (const sched::PoolPower& p : g.pools) {
    if (p.burst) w.Sample({{"pool", p.name}}, p.powered_gpu_seconds);
  }
  w.Begin(
      "hachi_agent_heartbeat_age_seconds",
      "Seconds since the node's agent last polled (a poll is the heartbeat; a waiting "
      "long poll counts from when it began). Nodes whose agent never polled this server "
      "are left out.",
      Type::kGauge);
  for (const ClusterGauges::NodeRow& n : g.nodes) {
    if (n.heartbeat_age_s >= 0) w.Sample({{"node", n.node}}, n.heartbeat_age_s);
  }
  w.Begin("hachi_jobs", "Jobs the server knows, by state (finished jobs included).",
          Type::kGauge);
  for (size_t s = 0; s < g.jobs.size(); ++s) {
    w.Sample({{"state", state::JobStateName(static_cast<state::JobState>(s))}},
             static_cast<double>(g.jobs[s]));
  }
  // The shape DCGM exporter users graph, with the job's labels.
  w.Begin("hachi_job_gpu_utilization_percent",
          "SM utilisation of a GPU a running job holds, as its agent last sampled it "
          "(NVML).",
          Type::kGauge);
  for (const ClusterGauges::JobGpuRow& r : g.job_gpus) {
    if (r.util < 0) continue;
    w.Sample({{"job", std::to_string(r.job)},
              {"user", r.user},
              {"account", r.account},
              {"node", r.node},
              {"gpu", std::to_string(r.gpu)}},
             r.util);
  }
  w.Begin("hachi_job_gpu_memory_used_bytes",
          "GPU memory in use on a GPU a running job holds, as its agent last sampled it "
          "(NVML).",
          Type::kGauge);
  for (const ClusterGauges::JobGpuRow& r : g.job_gpus) {
    if (r.mem_mib < 0) continue;
    w.Sample({{"job", std::to_string(r.job)},
              {"user", r.user},
              {"account", r.account},
              {"node", r.node},
              {"gpu", std::to_string(r.gpu)}},
             static_cast<double>(r.mem_mib) * 1048576.0);
  }
  w.Begin(
      "hachi_jobs_idle_gpus",
      "Running jobs whose every GPU has stayed below their partition's idle threshold "
      "for its idle_gpu_after (warned).",
      Type::kGauge);
  w.Sample({}, static_cast<double>(g.idle_jobs));
  w.Begin("hachi_jobs_held", "Pending jobs that are held.", Type::kGauge);
  w.Sample({}, static_cast<double>(g.held));
  w.Begin("hachi_cycles_total", "Scheduling cycles run since the server started.",
          Type::kCounter);
  w.Sample({}, static_cast<double>(g.cycles));
  w.Begin("hachi_submits_total",
          "Jobs submitted since the server started (array tasks each).", Type::kCounter);
  w.Sample({}, static_cast<double>(g.submits));
  w.Begin("hachi_starts_total",
          "Job starts since the server started (requeued runs each).", Type::kCounter);
  w.Sample({}, static_cast<double>(g.starts));
}

}  // namespace hachi::server
