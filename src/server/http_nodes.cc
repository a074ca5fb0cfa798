// The handlers of nodes, partitions, statistics, health and metrics
// (server/http_handlers.h; docs/api.md, docs/metrics.md).
#include <time.h>

#include <algorithm>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "api/protocol_json.h"
#include "api/record_json_nlohmann.h"
#include "core/strings.h"
#include "report/gpu_report.h"
#include "report/job_stats.h"
#include "report/priority_report.h"
#include "server/http_auth.h"
#include "server/http_handlers.h"
#include "server/http_loop.h"
#include "server/metrics.h"
#include "server/power_service.h"

namespace hachi::server {
namespace {

using nlohmann::json;

// A report's window, ?from=&to= (Unix seconds): `to` defaults to now, `from` to
// default_from(to); 400 naming the parameter for a bad value or `from` not before `to`.
Result<std::pair<Time, Time>> Window(const httplib::Request& req, Time now,
                                     const std::function<Time(Time to)>& default_from) {
  constexpr int64_t kMaxTime = int64_t{1} << 40;
  Result<int64_t> to = NonNegativeParam(req, "to", now, kMaxTime);
  if (!to.ok()) return to.status();
  Result<int64_t> from =
      NonNegativeParam(req, "from", std::max<Time>(0, default_from(*to)), kMaxTime);
  if (!from.ok()) return from.status();
  if (*from >= *to) {
    return InvalidArgument("?from=" + std::to_string(*from) +
                           ": must be before ?to=" + std::to_string(*to));
  }
  return std::pair<Time, Time>{*from, *to};
}

// The start of `t`'s month, UTC: the default window of what the burst pools cost.
Time MonthStartUtc(Time t) {
  const time_t tt = static_cast<time_t>(t);
  struct tm tm = {};
  gmtime_r(&tt, &tm);
  tm.tm_mday = 1;
  tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
  return static_cast<Time>(timegm(&tm));
}

json PartitionJson(const sched::Partition& p,
                   const std::vector<state::NodeStatus>& nodes) {
  json names = json::array();
  for (const state::NodeStatus& n : nodes) {
    if (std::find(n.partitions.begin(), n.partitions.end(), p.name) !=
        n.partitions.end()) {
      names.push_back(n.record.name);
    }
  }
  return json{
      {"name", p.name},
      {"mode", p.mode == sched::PartitionMode::kWholeNode ? "whole-node" : "shared"},
      {"nodes", names},
      {"min_gpus", p.min_gpus},
      {"max_gpus", p.max_gpus},
      {"default_time", p.default_time},
      {"max_time", p.max_time},
      {"tier", p.tier},
      {"allow_gpu_sharing", p.allow_gpu_sharing},
      {"allow_cpu_jobs", p.allow_cpu_jobs}};
}

// The connection layer's own figures (docs/metrics.md), after the Controller's.
std::string ConnectionMetrics(const HttpLoopStats& st) {
  using metrics::Type;
  metrics::Writer w;
  auto one = [&w](const char* name, Type type, const char* help, int64_t v) {
    w.Begin(name, help, type);
    w.Sample({}, static_cast<double>(v));
  };
  one("hachi_http_connections", Type::kGauge,
      "Open API connections (TCP and Unix socket).", st.connections);
  one("hachi_http_parked_requests", Type::kGauge,
      "Long polls waiting without a thread (agents' work polls, job waits).", st.parked);
  one("hachi_http_requests_total", Type::kCounter, "Requests read whole and handled.",
      st.requests);
  w.Begin("hachi_http_connections_refused_total",
          "Connections refused at accept, by the bound they passed.", Type::kCounter);
  w.Sample({{"reason", "per_peer"}}, static_cast<double>(st.refused_per_peer));
  w.Sample({{"reason", "limit"}}, static_cast<double>(st.refused_full));
  one("hachi_http_deadlines_missed_total", Type::kCounter,
      "Connections cut at a head, body or write deadline.", st.timed_out);
  one("hachi_http_bodies_too_large_total", Type::kCounter,
      "Requests refused (413) for a body past the limit, before reading it.",
      st.too_large);
  one("hachi_http_idle_connections_closed_total", Type::kCounter,
      "Anonymous connections that waited for nothing, closed to make room.",
      st.evicted_idle);
  w.Begin("hachi_http_bodies_refused_total",
          "Request bodies never read: the caller was refused on the head, or its bodies "
          "in flight were over a bound.",
          Type::kCounter);
  w.Sample({{"reason", "caller"}}, static_cast<double>(st.refused_on_head));
  w.Sample({{"reason", "in_flight"}}, static_cast<double>(st.refused_bodies));
  one("hachi_http_user_connections_over_bound_total", Type::kCounter,
      "Connections closed after their reply: their user held too many.",
      st.over_user_bound);
  return w.Take();
}

}  // namespace

void NodeHandlers::Health(const Request&, Response& res) const {
  Reply(res, 200, R"({"ok":true})");
}

// Prometheus scrapes /metrics by default (docs/metrics.md): outside /api/v1, read-only.
void NodeHandlers::Metrics(const Request&, Response& res) const {
  res.status = 200;
  res.set_content(c_->cluster_views().MetricsText() + ConnectionMetrics(loop_->stats()),
                  "text/plain; version=0.0.4; charset=utf-8");
}

std::vector<state::NodeStatus> NodeHandlers::NodesFor(const Request& req) const {
  std::vector<state::NodeStatus> nodes = c_->cluster_views().Nodes();
  const Result<Caller> who = CallerOf(req, *c_);
  if (!who.ok() || !who->admin) {
    for (state::NodeStatus& n : nodes) RedactStrayProcesses(&n);
  }
  return nodes;
}

void NodeHandlers::ListNodes(const Request& req, Response& res) const {
  json nodes = json::array();
  for (const state::NodeStatus& n : NodesFor(req)) nodes.push_back(api::ToJson(n));
  Reply(res, 200, json{{"nodes", nodes}}.dump());
}

void NodeHandlers::GetNode(const Request& req, Response& res) const {
  const std::string name = req.matches[1];
  for (const state::NodeStatus& n : NodesFor(req)) {
    if (n.record.name == name)
      return Reply(res, 200, json{{"node", api::ToJson(n)}}.dump());
  }
  ReplyError(res, NotFound("no node " + name));
}

// {"reason": ...}: the node takes no new jobs.
void NodeHandlers::DrainNode(const Request& req, Response& res) const {
  const std::string name = req.matches[1];
  Result<Caller> who = CallerOf(req, *c_);
  if (!who.ok()) return ReplyError(res, who.status());
  Result<std::string> reason = api::DrainReasonFromJson(req.body);
  if (!reason.ok()) return ReplyError(res, reason.status());
  Status st = c_->nodes().Drain(name, *reason, *who);
  if (!st.ok()) return ReplyError(res, st);
  ReplyOk(res);
}

// {"gpu": N}: only that unhealthy GPU returns to service; {}: the node.
void NodeHandlers::ResumeNode(const Request& req, Response& res) const {
  const std::string name = req.matches[1];
  Result<Caller> who = CallerOf(req, *c_);
  if (!who.ok()) return ReplyError(res, who.status());
  Result<int> gpu = api::ResumeGpuFromJson(req.body);
  if (!gpu.ok()) return ReplyError(res, gpu.status());
  // A burst node whose resume failed: resuming it clears the failure, so that the
  // scheduler may power it up again.
  if (*gpu < 0) {
    Result<bool> reset = c_->power().ResetFailed(name, *who);
    if (!reset.ok()) return ReplyError(res, reset.status());
    if (*reset) return ReplyOk(res);
  }
  Status st = c_->nodes().Resume(name, *gpu, *who);
  if (!st.ok()) return ReplyError(res, st);
  ReplyOk(res);
}

// The config's pools and what their burst nodes are powered (docs/pools.md).
// The config's pools, their nodes powered now, and each burst pool's powered GPU-hours
// and cost over ?from=&to= (default this month, UTC, to now) from the stored spells.
void NodeHandlers::ListPools(const Request& req, Response& res) const {
  const Time now = c_->clock().Now();
  Result<std::pair<Time, Time>> window = Window(req, now, MonthStartUtc);
  if (!window.ok()) return ReplyError(res, window.status());
  const auto [from, to] = *window;
  Result<std::map<std::string, PowerService::PoolCost>> costs =
      c_->power().Costs(from, to);
  if (!costs.ok()) return ReplyError(res, costs.status());
  json pools = json::array();
  for (const sched::PoolPower& p : c_->cluster_views().Pools()) {
    PowerService::PoolCost cost;
    if (auto it = costs->find(p.name); it != costs->end()) cost = it->second;
    pools.push_back(json{{"name", p.name},
                         {"kind", p.burst ? "burst" : "fixed"},
                         {"nodes", p.nodes},
                         {"gpus", p.gpus},
                         {"powered", p.powered},
                         {"price_per_gpu_hour", p.price_per_gpu_hour},
                         {"powered_gpu_hours", cost.gpu_seconds / 3600.0},
                         {"cost", cost.cost}});
  }
  Reply(res, 200, json{{"from", from}, {"to", to}, {"pools", pools}}.dump());
}

void NodeHandlers::ListPartitions(const Request&, Response& res) const {
  const std::vector<state::NodeStatus> nodes = c_->cluster_views().Nodes();
  json parts = json::array();
  for (const sched::Partition& part : c_->cluster_views().Partitions()) {
    parts.push_back(PartitionJson(part, nodes));
  }
  Reply(res, 200,
        json{{"partitions", parts}, {"warnings", c_->cluster_views().Warnings()}}.dump());
}

// Queue waits per partition and GPU count over ?window=SECONDS (default a day); a
// partition whose median wait passes ?alert=SECONDS (default 20 min) is flagged.
void NodeHandlers::Stats(const Request& req, Response& res) const {
  const int window = IntParam(req, "window", 86400, 60, 90 * 86400);
  const int alert = IntParam(req, "alert", 1200, 1, 90 * 86400);
  int gpus = 0;
  for (const state::NodeStatus& n : c_->cluster_views().Nodes()) gpus += n.gpus;
  report::JobStats stats = report::ComputeStats(c_->job_views().Jobs(true),
                                                c_->clock().Now(), window, alert, gpus);
  report::AttachLoads(
      &stats,
      c_->cluster_views().PartitionLoads());  // a flagged partition's likely cause
  json j = json::parse(report::JobStatsToJson(stats));
  const ControllerStats cs = c_->cluster_views().stats();
  j["scheduler"] = {{"cycles", cs.cycles},
                    {"last_cycle_ms", cs.last_cycle_ms},
                    {"max_cycle_ms", cs.max_cycle_ms},
                    {"starts", cs.starts},
                    {"submits", cs.submits}};
  Reply(res, 200, j.dump());
}

// GPU-hours allocated and used over ?from=&to= (Unix seconds; default the last 7 days
// to now) per ?by= account|user|accountuser|partition|nodegroup, and the ?top= (default
// 10) jobs
// that held the most idle GPU-hours (docs/api.md "Report"). Whoever may list the jobs
// may see it: it names accounts and users as the job list does.
void NodeHandlers::Report(const Request& req, Response& res) const {
  Result<std::pair<Time, Time>> window =
      Window(req, c_->clock().Now(), [](Time to) { return to - 7 * 86400; });
  if (!window.ok()) return ReplyError(res, window.status());
  Result<int64_t> top = NonNegativeParam(req, "top", 10, 1000);
  if (!top.ok()) return ReplyError(res, top.status());
  report::ReportQuery q;
  q.from = window->first;
  q.to = window->second;
  q.top = static_cast<int>(*top);
  if (req.has_param("by") && !report::ParseReportBy(req.get_param_value("by"), &q.by)) {
    return ReplyError(res, InvalidArgument("?by=" + Clip(req.get_param_value("by")) +
                                           ": expected account, user, accountuser, "
                                           "partition, nodegroup or pool"));
  }
  Reply(res, 200, report::GpuReportToJson(c_->cluster_views().GpuHours(q)));
}

// Fair share and the pending jobs' priority terms (docs/api.md "Priority"; sshare,
// sprio). Whoever may list the jobs may see it: it names accounts and users as the job
// list does.
void NodeHandlers::Priority(const Request&, Response& res) const {
  Reply(res, 200, report::PriorityReportToJson(c_->fair_share().Report()));
}

}  // namespace hachi::server
