#include "server/http_api.h"

#include <httplib.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <variant>
#include <vector>

#include "api/ha_headers.h"
#include "api/protocol_json.h"
#include "core/strings.h"
#include "report/gpu_report.h"
#include "report/job_stats.h"
#include "server/http_auth.h"
#include "server/http_handlers.h"
#include "server/http_loop.h"

namespace hachi::server {

using nlohmann::json;

void Reply(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

void ReplyError(httplib::Response& res, const Status& s) {
  Reply(res, api::HttpStatusFor(s.code()), api::ErrorToJson(s));
}

void ReplyOk(httplib::Response& res) { Reply(res, 200, json{{"ok", true}}.dump()); }

Result<state::JobId> JobIdOf(const httplib::Request& req) {
  const std::string s = req.matches[1];
  if (s.size() > 18) return InvalidArgument("job id '" + Clip(s) + "' is too large");
  return static_cast<state::JobId>(std::stoll(s));
}

Result<std::pair<state::JobId, int>> StepIdOf(const httplib::Request& req) {
  Result<state::JobId> id = JobIdOf(req);
  if (!id.ok()) return id.status();
  const std::string step = req.matches[2];
  if (step.size() > 9) return InvalidArgument("step '" + Clip(step) + "' is too large");
  return std::make_pair(*id, std::stoi(step));
}

int IntParam(const httplib::Request& req, const char* name, int fallback, int lo,
             int hi) {
  if (!req.has_param(name)) return fallback;
  const std::string v = req.get_param_value(name);
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') return fallback;
  return static_cast<int>(std::clamp<long>(x, lo, hi));
}

Result<int64_t> NonNegativeParam(const httplib::Request& req, const char* name,
                                 int64_t fallback, int64_t hi) {
  if (!req.has_param(name)) return fallback;
  const std::string v = req.get_param_value(name);
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < 0 || x > hi) {
    return InvalidArgument(std::string("?") + name + "=" + v.substr(0, 40) +
                           ": expected an integer from 0 to " + std::to_string(hi));
  }
  return static_cast<int64_t>(x);
}

namespace {

// Every reply of 400 or more without a body gets the API's error body.
void ErrorBody(const httplib::Request& req, httplib::Response& res) {
  if (!res.body.empty()) return;
  const Status st =
      res.status == 404 ? NotFound("no such endpoint: " + req.method + " " + req.path)
      : res.status == 413
          ? InvalidArgument("request body too large")
          : InvalidArgument("bad request (HTTP " + std::to_string(res.status) + ")");
  res.set_content(api::ErrorToJson(st), "application/json");
}

void ExceptionBody(const httplib::Request&, httplib::Response& res,
                   std::exception_ptr ep) {
  std::string what = "unexpected error";
  try {
    std::rethrow_exception(ep);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  ReplyError(res, Internal(what));
}

// One row of the route table: the method (GET answers HEAD too), the path as a regex
// (its groups reach the handler as req.matches) and the handler, which may be a long
// poll, bound to its concern's handler object (Route).
struct ApiRoute {
  const char* method;
  std::string path;
  HttpRouter::PollHandler handler;
};

template <typename H>
HttpRouter::PollHandler Route(const H* h, void (H::*fn)(const httplib::Request&,
                                                        httplib::Response&) const) {
  return [h, fn](const httplib::Request& req, httplib::Response& res, LongPoll&) {
    (h->*fn)(req, res);
  };
}

template <typename H>
HttpRouter::PollHandler Route(const H* h,
                              void (H::*fn)(const httplib::Request&, httplib::Response&,
                                            LongPoll&) const) {
  return [h, fn](const httplib::Request& req, httplib::Response& res, LongPoll& p) {
    (h->*fn)(req, res, p);
  };
}

}  // namespace

// A standby has no state to show: every request gets 503 and where the leader is, which
// the client follows when that address is one it was given (docs/ha.md).
void HttpServer::StandbyRoutes(HttpRouter& s) {
  const std::function<std::string()> leader = options_.leader;
  s.set_pre_routing_handler([leader](const httplib::Request&, httplib::Response& res) {
    const std::string url = leader ? leader() : "";
    res.set_header(api::kStandbyHeader, "1");
    if (!url.empty()) res.set_header(api::kLeaderHeader, url);
    ReplyError(res, Unavailable(
                        url.empty()
                            ? "this hachi server is a standby; no leader holds "
                              "the lease now (a takeover is under way)"
                            : "this hachi server is a standby; the leader is at " + url));
    return httplib::Server::HandlerResponse::Handled;
  });
}

HttpServer::HttpServer(Controller* controller, HttpOptions options)
    : controller_(controller), options_(std::move(options)) {}

HttpServer::~HttpServer() { Stop(); }

std::string HttpServer::url() const {
  return (tls_ ? "https://" : "http://") + host_ + ":" + std::to_string(port_);
}

// The API, one route a line, first match wins (HttpRouter::Handle). Who may reach a
// route is the gate's first answer (InstallAuthGate: agents/* for agents only, health
// for anyone, else read or write), then the handler's (the Controller's Authorizer).
void HttpServer::Routes(HttpRouter& s) {
  s.set_error_handler(ErrorBody);
  s.set_exception_handler(ExceptionBody);
  if (options_.epoch > 0) {
    s.set_reply_headers(
        {{std::string(api::kEpochHeader), std::to_string(options_.epoch)}});
  }
  if (controller_ == nullptr) return StandbyRoutes(s);
  InstallAuthGate(s, controller_, options_.auth);  // who is asking, before any handler

  const ApiHandlers& h = *handlers_;
  const std::string p = api::kApiPrefix;
  const std::string job = p + R"(/jobs/(\d+))";
  const std::string job_or_task = p + R"(/jobs/(\d+)(?:_(\d+))?)";  // ID, or A_T
  const std::string step = job + R"(/steps/(\d+))";
  const std::string node = p + R"(/nodes/([^/]+))";
  const std::string agent = p + R"(/agents/([^/]+))";
  const std::vector<ApiRoute> routes = {
      // Tokens (http_tokens.cc)
      {"POST", p + "/tokens", Route(&h.tokens, &TokenHandlers::IssueToken)},
      {"GET", p + "/tokens", Route(&h.tokens, &TokenHandlers::ListTokens)},
      {"DELETE", p + R"(/tokens/([0-9a-f]{1,64}))",
       Route(&h.tokens, &TokenHandlers::RevokeToken)},
      // Health and metrics (http_nodes.cc); Prometheus's default path, outside /api/v1
      {"GET", p + "/health", Route(&h.nodes, &NodeHandlers::Health)},
      {"GET", "/metrics", Route(&h.nodes, &NodeHandlers::Metrics)},
      // Jobs (http_jobs.cc)
      {"POST", p + "/jobs", Route(&h.jobs, &JobHandlers::SubmitJob)},
      {"POST", p + "/jobs/test", Route(&h.jobs, &JobHandlers::TestSubmit)},
      {"GET", p + "/jobs", Route(&h.jobs, &JobHandlers::ListJobs)},
      {"GET", job, Route(&h.jobs, &JobHandlers::GetJob)},
      {"POST", job_or_task + "/cancel", Route(&h.jobs, &JobHandlers::CancelJob)},
      {"DELETE", job_or_task, Route(&h.jobs, &JobHandlers::CancelJob)},
      {"POST", job_or_task + "/hold", Route(&h.jobs, &JobHandlers::HoldJob)},
      {"POST", job_or_task + "/release", Route(&h.jobs, &JobHandlers::ReleaseJob)},
      {"POST", job_or_task + "/signal", Route(&h.jobs, &JobHandlers::SignalJob)},
      {"POST", job_or_task + "/requeue", Route(&h.jobs, &JobHandlers::RequeueJob)},
      {"POST", job_or_task + "/update", Route(&h.jobs, &JobHandlers::UpdateJob)},
      {"POST", job + "/complete", Route(&h.jobs, &JobHandlers::CompleteAllocation)},
      {"GET", job + "/usage", Route(&h.jobs, &JobHandlers::JobUsage)},
      // Job steps (http_steps.cc)
      {"POST", job + "/steps", Route(&h.steps, &StepHandlers::CreateStep)},
      {"GET", job + "/steps", Route(&h.steps, &StepHandlers::ListJobSteps)},
      {"GET", p + "/steps", Route(&h.steps, &StepHandlers::ListAllSteps)},
      {"GET", step + "/output", Route(&h.steps, &StepHandlers::StepOutput)},
      {"POST", step + "/input", Route(&h.steps, &StepHandlers::StepInput)},
      {"POST", step + "/signal", Route(&h.steps, &StepHandlers::SignalStep)},
      {"POST", step + "/cancel", Route(&h.steps, &StepHandlers::CancelStep)},
      // Nodes, partitions, statistics (http_nodes.cc)
      {"GET", p + "/nodes", Route(&h.nodes, &NodeHandlers::ListNodes)},
      {"GET", node, Route(&h.nodes, &NodeHandlers::GetNode)},
      {"POST", node + "/drain", Route(&h.nodes, &NodeHandlers::DrainNode)},
      {"POST", node + "/resume", Route(&h.nodes, &NodeHandlers::ResumeNode)},
      {"GET", p + "/partitions", Route(&h.nodes, &NodeHandlers::ListPartitions)},
      {"GET", p + "/pools", Route(&h.nodes, &NodeHandlers::ListPools)},
      {"GET", p + "/stats", Route(&h.nodes, &NodeHandlers::Stats)},
      {"GET", p + "/report", Route(&h.nodes, &NodeHandlers::Report)},
      {"GET", p + "/priority", Route(&h.nodes, &NodeHandlers::Priority)},
      // Agents (http_agents.cc)
      {"POST", p + "/agents/register", Route(&h.agents, &AgentHandlers::RegisterAgent)},
      {"GET", agent + "/work", Route(&h.agents, &AgentHandlers::AgentWork)},
      {"POST", agent + "/health", Route(&h.agents, &AgentHandlers::AgentHealth)},
      {"POST", agent + "/burn-in", Route(&h.agents, &AgentHandlers::AgentBurnIn)},
      {"POST", agent + "/steps", Route(&h.agents, &AgentHandlers::AgentSteps)},
      {"POST", agent + "/exits", Route(&h.agents, &AgentHandlers::AgentExits)},
      // The dashboard and its data (web.cc)
      {"GET", "/", Route(&h.web, &WebHandlers::DashboardIndex)},
      {"GET", R"(/web/(.*))", Route(&h.web, &WebHandlers::DashboardFile)},
      {"GET", p + "/history", Route(&h.web, &WebHandlers::History)},
      {"GET", p + R"(/jobs/(\d{1,18})/log)", Route(&h.web, &WebHandlers::JobLog)},
  };
  for (const ApiRoute& r : routes) s.Add(r.method, r.path, r.handler);
}

Status HttpServer::Start() {
  if (started_) return Status::Ok();
  HttpLoopOptions lo = options_.connections;
  lo.max_body_bytes = options_.max_body_bytes;
  lo.workers = options_.threads;
  router_ = std::make_unique<HttpRouter>();
  loop_ = std::make_unique<HttpLoop>(router_.get(), lo);
  if (controller_ != nullptr) {
    handlers_ =
        std::make_unique<ApiHandlers>(controller_, loop_.get(), options_.dashboard);
  }
  Routes(*router_);
  if (!options_.listen.empty()) {
    const size_t colon = options_.listen.rfind(':');
    if (colon == std::string::npos) {
      return InvalidArgument("--listen '" + options_.listen + "': expected HOST:PORT");
    }
    host_ = options_.listen.substr(0, colon);
    const std::string port_text = options_.listen.substr(colon + 1);
    char* end = nullptr;
    const long want = std::strtol(port_text.c_str(), &end, 10);
    if (port_text.empty() || *end != '\0' || want < 0 || want > 65535) {
      return InvalidArgument("--listen '" + options_.listen +
                             "': the port must be a number from 0 to 65535");
    }
    if (options_.tls_cert.empty() != options_.tls_key.empty()) {
      return InvalidArgument("--tls-cert and --tls-key go together");
    }
    if (!options_.tls_cert.empty()) {
      HACHI_RETURN_IF_ERROR(loop_->UseTls(options_.tls_cert, options_.tls_key));
      tls_ = true;
    }
    // [::1] style hosts: getaddrinfo wants the address without brackets.
    std::string host = host_;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    Result<int> port = loop_->ListenTcp(host, static_cast<int>(want));
    if (!port.ok()) return port.status();
    port_ = *port;
  }
  if (!options_.unix_socket.empty()) {
    HACHI_RETURN_IF_ERROR(loop_->ListenUnix(options_.unix_socket));
  }
  HACHI_RETURN_IF_ERROR(loop_->Start());
  HttpLoop* loop = loop_.get();
  if (controller_ != nullptr) {
    controller_->SetNotifier([loop](const std::string& topic) { loop->Notify(topic); });
  }
  started_ = true;
  return Status::Ok();
}

void HttpServer::Stop() {
  if (!loop_) return;
  if (started_ && controller_ != nullptr) controller_->SetNotifier(nullptr);
  loop_->Stop();
}

HttpLoopStats HttpServer::connection_stats() const {
  return loop_ ? loop_->stats() : HttpLoopStats{};
}

}  // namespace hachi::server
