#include "server/web.h"

#include <httplib.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "api/protocol_json.h"
#include "server/controller.h"
#include "server/history.h"
#include "server/http_auth.h"
#include "server/http_handlers.h"
#include "server/http_loop.h"
#include "server/job_log.h"

namespace hachi::server {
namespace {

using nlohmann::json;

void ServeAsset(const httplib::Request& req, httplib::Response& res, const WebAsset& a) {
  const std::string etag(a.etag);
  // The files change only with the binary: a browser revalidates each load (cheap, a
  // 304) and never runs a dashboard older than the server it talks to.
  res.set_header("Cache-Control", "no-cache");
  res.set_header("ETag", etag);
  res.set_header("X-Content-Type-Options", "nosniff");
  // No other site may frame the dashboard (clickjacking a logged-in admin into a
  // cancel or a drain): the CSP directive for browsers that read it, the older header
  // for those that do not.
  res.set_header("Content-Security-Policy", "frame-ancestors 'none'");
  res.set_header("X-Frame-Options", "DENY");
  if (req.get_header_value("If-None-Match") == etag) {
    res.status = 304;
    return;
  }
  res.status = 200;
  res.set_content(a.body.data(), a.body.size(), std::string(a.content_type).c_str());
}

int64_t Int64Param(const httplib::Request& req, const char* name, int64_t fallback,
                   int64_t lo, int64_t hi) {
  if (!req.has_param(name)) return fallback;
  const std::string v = req.get_param_value(name);
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') return fallback;
  return std::clamp<int64_t>(x, lo, hi);
}

}  // namespace

const WebAsset* FindWebAsset(std::string_view name) {
  const std::span<const WebAsset> all = internal::EmbeddedWebAssets();
  auto it =
      std::lower_bound(all.begin(), all.end(), name,
                       [](const WebAsset& a, std::string_view n) { return a.name < n; });
  return it != all.end() && it->name == name ? &*it : nullptr;
}

void WebHandlers::DashboardIndex(const Request& req, Response& res) const {
  const WebAsset* index = FindWebAsset("index.html");
  if (index == nullptr)
    return ReplyError(res, Internal("the dashboard was not embedded"));
  ServeAsset(req, res, *index);
}

void WebHandlers::DashboardFile(const Request& req, Response& res) const {
  const std::string name = req.matches[1];
  const WebAsset* a = FindWebAsset(name);
  if (a == nullptr) return ReplyError(res, NotFound("no dashboard file " + name));
  ServeAsset(req, res, *a);
}

void WebHandlers::History(const Request& req, Response& res) const {
  const HistorySampler* history = dashboard_.history;
  const Time since = Int64Param(req, "since", 0, 0, INT64_MAX);
  res.status = 200;
  res.set_content(history ? HistoryToJson(history->Samples(since), history->interval_s())
                          : HistoryToJson({}, 0),
                  "application/json");
}

void WebHandlers::JobLog(const Request& req, Response& res) const {
  const state::JobId id = std::stoll(req.matches[1]);
  Result<state::JobRecord> job = c_->job_views().Job(id);
  if (!job.ok()) return ReplyError(res, job.status());
  // What a job prints is as private as its environment and script: its owner's and the
  // admins' (Action::kSeeJobDetails, as GET /jobs/ID redacts them).
  Result<Caller> who = CallerOf(req, *c_);
  if (!who.ok()) return ReplyError(res, who.status());
  const Status may =
      c_->authorizer().Authorize(*who, Action::kSeeJobDetails, Resource::Job(*job));
  if (!may.ok()) return ReplyError(res, may);
  const int lines = static_cast<int>(Int64Param(req, "tail", 200, 1, 10000));
  const int64_t bytes = Int64Param(req, "bytes", 64 << 10, 1, kMaxLogTailBytes);
  Result<LogTail> t = ReadJobLogTail(*job, dashboard_.local_nodes, bytes, lines);
  if (!t.ok()) return ReplyError(res, t.status());
  const json j{{"job", id},       {"node", t->node},     {"path", t->path},
               {"size", t->size}, {"offset", t->offset}, {"text", t->text}};
  res.status = 200;
  // Output is whatever the job printed: bytes that are not UTF-8 become U+FFFD.
  res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace),
                  "application/json");
}

}  // namespace hachi::server
