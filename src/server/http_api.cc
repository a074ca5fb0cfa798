#include "server/http_api.h"

#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/protocol_json.h"
#include "api/record_json_nlohmann.h"
#include "server/http_auth.h"
#include "state/job_stats.h"

namespace hachi::server {
namespace {

using nlohmann::json;

void Reply(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

void ReplyError(httplib::Response& res, const Status& s) {
  Reply(res, api::HttpStatusFor(s.code()), api::ErrorToJson(s));
}

Result<state::JobId> JobIdOf(const httplib::Request& req) {
  const std::string s = req.matches[1];
  if (s.size() > 18) return InvalidArgument("job id '" + s + "' is too large");
  return static_cast<state::JobId>(std::stoll(s));
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

// ?name= as an integer in [0, hi]; `fallback` when absent. Anything else is a 400 that
// names the parameter (a mistyped page size must not silently list everything).
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
      {"allow_gpu_sharing", p.allow_gpu_sharing}};
}

// cpp-httplib binds with SO_REUSEPORT, so a second server on the same port would share
// it silently; a plain bind first tells whether someone listens there already.
bool PortFree(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) {
    return true;  // let the real bind report it
  }
  bool free = true;
  const int fd =
      ::socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
  if (fd >= 0) {
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    free = ::bind(fd, res->ai_addr, res->ai_addrlen) == 0;
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return free;
}

// httplib's stop() does nothing until the listen thread has marked the server running,
// so a Stop() right after Start() would leave that thread listening and hang the join.
// Start returns only once the server runs (or its thread ended).
void WaitUntilRunning(const httplib::Server& s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!s.is_running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

HttpServer::HttpServer(Controller* controller, HttpOptions options)
    : controller_(controller), options_(std::move(options)) {}

HttpServer::~HttpServer() { Stop(); }

std::string HttpServer::url() const {
  return (tls_ ? "https://" : "http://") + host_ + ":" + std::to_string(port_);
}

void HttpServer::Routes(httplib::Server& s) {
  Controller* c = controller_;
  const std::string p = api::kApiPrefix;
  s.set_payload_max_length(options_.max_body_bytes);
  // Replies are small: without TCP_NODELAY, Nagle + the client's delayed ACK add 40 ms
  // to a reply written in two pieces (headers, body).
  s.set_tcp_nodelay(true);
  // Stop() waits for idle keep-alive connections to time out: keep that short. httplib
  // closes a connection after 5 requests by default, which made busy clients reconnect
  // all the time (and sometimes lose a request to the race): no practical limit.
  s.set_keep_alive_timeout(1);
  s.set_keep_alive_max_count(1 << 20);
  // SO_REUSEADDR, not httplib's default SO_REUSEPORT: with REUSEPORT a second server
  // could bind the same port and share its connections, and the TIME_WAIT sockets a busy
  // server leaves would refuse a restart's bind for a minute (both seen;
  // http_api_test.cc).
  s.set_socket_options([](socket_t sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  const int threads = options_.threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const Status st =
        res.status == 404 ? NotFound("no such endpoint: " + req.method + " " + req.path)
        : res.status == 413
            ? InvalidArgument("request body too large")
            : InvalidArgument("bad request (HTTP " + std::to_string(res.status) + ")");
    res.set_content(api::ErrorToJson(st), "application/json");
  });
  s.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unexpected error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        ReplyError(res, Internal(what));
      });

  // Who is asking, before any handler (server/http_auth.h).
  InstallAuthGate(s, c, options_.auth);
  AddTokenRoutes(s, c);

  s.Get(p + "/health", [](const httplib::Request&, httplib::Response& res) {
    Reply(res, 200, R"({"ok":true})");
  });
  // Prometheus scrapes /metrics by default (docs/metrics.md): outside /api/v1, read-only.
  s.Get("/metrics", [c](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    res.set_content(c->MetricsText(), "text/plain; version=0.0.4; charset=utf-8");
  });

  // ---- Jobs ----
  s.Post(p + "/jobs", [c](const httplib::Request& req, httplib::Response& res) {
    Result<api::SubmitRequest> r = api::SubmitRequestFromJson(req.body);
    if (!r.ok()) return ReplyError(res, r.status());
    Result<Caller> who = CallerOf(req, *c);
    if (!who.ok()) return ReplyError(res, who.status());
    Result<std::vector<state::JobId>> ids = c->Submit(*r, *who);
    if (!ids.ok()) return ReplyError(res, ids.status());
    Reply(res, 201, json{{"job_ids", *ids}}.dump());
  });
  s.Get(p + "/jobs", [c](const httplib::Request& req, httplib::Response& res) {
    const bool all = req.has_param("all") && req.get_param_value("all") != "0";
    // A page: ids above ?after=, at most ?limit= (docs/api.md); "next_after" says where
    // the next page starts while there may be more.
    Result<int64_t> after = NonNegativeParam(req, "after", 0, int64_t{1} << 62);
    if (!after.ok()) return ReplyError(res, after.status());
    Result<int64_t> limit = NonNegativeParam(req, "limit", 0, 100000);
    if (!limit.ok()) return ReplyError(res, limit.status());
    std::vector<state::JobRecord> page =
        c->Jobs(all, *after, static_cast<size_t>(*limit));
    // Everyone sees every job; only its owner and admins its environment and script.
    const Result<Caller> who = CallerOf(req, *c);
    const Authorizer& authorizer = c->authorizer();
    json jobs = json::array();
    for (state::JobRecord& r : page) {
      if (!who.ok() || !authorizer.Allows(*who, Action::kSeeJobDetails, Resource::Job(r)))
        RedactJobDetails(&r);
      jobs.push_back(api::ToJson(r));
    }
    json j{{"jobs", std::move(jobs)}};
    if (*limit > 0 && static_cast<int64_t>(page.size()) == *limit) {
      j["next_after"] = page.back().id;
    }
    Reply(res, 200, j.dump());
  });
  s.Get(p + R"(/jobs/(\d+))", [c](const httplib::Request& req, httplib::Response& res) {
    Result<state::JobId> id = JobIdOf(req);
    if (!id.ok()) return ReplyError(res, id.status());
    Result<state::JobRecord> job = c->Job(*id);
    if (job.ok() && req.has_param("wait_from")) {
      state::JobState known;
      if (!state::ParseJobState(req.get_param_value("wait_from"), &known)) {
        return ReplyError(res, InvalidArgument("wait_from: unknown job state '" +
                                               req.get_param_value("wait_from") + "'"));
      }
      job = c->WaitJob(*id, known, IntParam(req, "wait_ms", 10000, 0, 60000));
    }
    if (!job.ok()) return ReplyError(res, job.status());
    const Result<Caller> who = CallerOf(req, *c);
    if (!who.ok() ||
        !c->authorizer().Allows(*who, Action::kSeeJobDetails, Resource::Job(*job))) {
      RedactJobDetails(&*job);
    }
    json j{{"job", api::ToJson(*job)}};
    if (std::optional<PendingInfo> info = c->Pending(*id))
      j["diagnosis"] = info->diagnosis;
    // docs/api.md, "Explain". Not on long polls (`hachi run` waiting for its job): at
    // 100k pending jobs an explanation holds the lock ~30 ms, and nobody reads it there.
    if (!req.has_param("wait_from")) {
      if (Result<state::JobExplain> e = c->Explain(*id); e.ok()) {
        j["explain"] = json::parse(state::JobExplainToJson(*e));
      }
    }
    Reply(res, 200, j.dump());
  });
  auto job_action = [c](const char* action) {
    return [c, action](const httplib::Request& req, httplib::Response& res) {
      Result<state::JobId> id = JobIdOf(req);
      if (!id.ok()) return ReplyError(res, id.status());
      const std::string a = action;
      Result<Caller> who = CallerOf(req, *c);
      if (!who.ok()) return ReplyError(res, who.status());
      Status st = a == "cancel" ? c->Cancel(*id, *who)
                  : a == "hold" ? c->Hold(*id, true, *who)
                                : c->Hold(*id, false, *who);
      if (!st.ok()) return ReplyError(res, st);
      Reply(res, 200, json{{"ok", true}}.dump());
    };
  };
  s.Post(p + R"(/jobs/(\d+)/cancel)", job_action("cancel"));
  s.Delete(p + R"(/jobs/(\d+))", job_action("cancel"));
  s.Post(p + R"(/jobs/(\d+)/hold)", job_action("hold"));
  s.Post(p + R"(/jobs/(\d+)/release)", job_action("release"));

  // ---- Nodes, partitions ----
  s.Get(p + "/nodes", [c](const httplib::Request&, httplib::Response& res) {
    json nodes = json::array();
    for (const state::NodeStatus& n : c->Nodes()) nodes.push_back(api::ToJson(n));
    Reply(res, 200, json{{"nodes", nodes}}.dump());
  });
  s.Get(p + R"(/nodes/([^/]+))",
        [c](const httplib::Request& req, httplib::Response& res) {
          const std::string name = req.matches[1];
          for (const state::NodeStatus& n : c->Nodes()) {
            if (n.record.name == name)
              return Reply(res, 200, json{{"node", api::ToJson(n)}}.dump());
          }
          ReplyError(res, NotFound("no node " + name));
        });
  s.Post(p + R"(/nodes/([^/]+)/(drain|resume))",
         [c](const httplib::Request& req, httplib::Response& res) {
           const std::string name = req.matches[1];
           Result<Caller> who = CallerOf(req, *c);
           if (!who.ok()) return ReplyError(res, who.status());
           Status st;
           if (req.matches[2] == "drain") {
             Result<std::string> reason = api::DrainReasonFromJson(req.body);
             if (!reason.ok()) return ReplyError(res, reason.status());
             st = c->Drain(name, *reason, *who);
           } else {
             // {"gpu": N}: only that unhealthy GPU returns to service.
             Result<int> gpu = api::ResumeGpuFromJson(req.body);
             if (!gpu.ok()) return ReplyError(res, gpu.status());
             st = c->Resume(name, *gpu, *who);
           }
           if (!st.ok()) return ReplyError(res, st);
           Reply(res, 200, json{{"ok", true}}.dump());
         });
  s.Get(p + "/partitions", [c](const httplib::Request&, httplib::Response& res) {
    const std::vector<state::NodeStatus> nodes = c->Nodes();
    json parts = json::array();
    for (const sched::Partition& part : c->Partitions()) {
      parts.push_back(PartitionJson(part, nodes));
    }
    Reply(res, 200, json{{"partitions", parts}, {"warnings", c->Warnings()}}.dump());
  });

  s.Get(p + "/stats", [c](const httplib::Request& req, httplib::Response& res) {
    // Queue waits per partition and GPU count over ?window=SECONDS (default a day);
    // a partition whose median wait passes ?alert=SECONDS (default 20 min) is flagged.
    const int window = IntParam(req, "window", 86400, 60, 90 * 86400);
    const int alert = IntParam(req, "alert", 1200, 1, 90 * 86400);
    int gpus = 0;
    for (const state::NodeStatus& n : c->Nodes()) gpus += n.gpus;
    state::JobStats stats =
        state::ComputeStats(c->Jobs(true), c->clock().Now(), window, alert, gpus);
    state::AttachLoads(&stats,
                       c->PartitionLoads());  // a flagged partition's likely cause
    json j = json::parse(state::JobStatsToJson(stats));
    const ControllerStats cs = c->stats();
    j["scheduler"] = {{"cycles", cs.cycles},
                      {"last_cycle_ms", cs.last_cycle_ms},
                      {"max_cycle_ms", cs.max_cycle_ms},
                      {"starts", cs.starts},
                      {"submits", cs.submits}};
    Reply(res, 200, j.dump());
  });

  // ---- Agents ----
  s.Post(p + "/agents/register",
         [c](const httplib::Request& req, httplib::Response& res) {
           Result<api::AgentRegistration> r = api::AgentRegistrationFromJson(req.body);
           if (!r.ok()) return ReplyError(res, r.status());
           Status st = c->Register(*r);
           if (!st.ok()) return ReplyError(res, st);
           Reply(res, 200, json{{"ok", true}}.dump());
         });
  s.Get(p + R"(/agents/([^/]+)/work)",
        [c](const httplib::Request& req, httplib::Response& res) {
          const api::AgentWork w =
              c->Poll(req.matches[1], IntParam(req, "wait_ms", 10000, 0, 60000));
          Reply(res, 200, api::AgentWorkToJson(w));
        });
  s.Post(p + R"(/agents/([^/]+)/health)",
         [c](const httplib::Request& req, httplib::Response& res) {
           Result<api::AgentHealth> h = api::AgentHealthFromJson(req.body);
           if (!h.ok()) return ReplyError(res, h.status());
           Status st = c->ReportHealth(req.matches[1], *h);
           if (!st.ok()) return ReplyError(res, st);
           Reply(res, 200, json{{"ok", true}}.dump());
         });
  s.Post(p + R"(/agents/([^/]+)/exits)",
         [c](const httplib::Request& req, httplib::Response& res) {
           Result<std::vector<api::JobExit>> exits = api::JobExitsFromJson(req.body);
           if (!exits.ok()) return ReplyError(res, exits.status());
           Status st = c->Report(req.matches[1], *exits);
           if (!st.ok()) return ReplyError(res, st);
           Reply(res, 200, json{{"ok", true}}.dump());
         });
  AddDashboardRoutes(s, c, options_.dashboard);  // the dashboard and its data (web.h)
}

Status HttpServer::Start() {
  if (!options_.listen.empty()) {
    const size_t colon = options_.listen.rfind(':');
    if (colon == std::string::npos) {
      return InvalidArgument("--listen '" + options_.listen + "': expected HOST:PORT");
    }
    host_ = options_.listen.substr(0, colon);
    const int want = std::atoi(options_.listen.c_str() + colon + 1);
    if (want != 0 && !PortFree(host_, want)) {
      return Unavailable("cannot listen on " + options_.listen +
                         ": the port is in use (another Hachi server?)");
    }
    if (options_.tls_cert.empty() != options_.tls_key.empty()) {
      return InvalidArgument("--tls-cert and --tls-key go together");
    }
    if (!options_.tls_cert.empty()) {
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
      auto tls = std::make_unique<httplib::SSLServer>(options_.tls_cert.c_str(),
                                                      options_.tls_key.c_str());
      if (!tls->is_valid()) {
        return InvalidArgument(
            "TLS: cannot load the certificate " + options_.tls_cert + " with the key " +
            options_.tls_key +
            " (PEM files, readable, the key matching the certificate)");
      }
      tcp_ = std::move(tls);
      tls_ = true;
#else
      return Unavailable(
          "this hachi was built without TLS (no static libssl at build time)");
#endif
    } else {
      tcp_ = std::make_unique<httplib::Server>();
    }
    Routes(*tcp_);
    port_ = want == 0 ? tcp_->bind_to_any_port(host_)
                      : (tcp_->bind_to_port(host_, want) ? want : -1);
    if (port_ <= 0) {
      return Unavailable("cannot listen on " + options_.listen +
                         " (in use, or not an address of this machine)");
    }
    threads_.emplace_back([this] { tcp_->listen_after_bind(); });
    WaitUntilRunning(*tcp_);
  }
  if (!options_.unix_socket.empty()) {
    ::unlink(options_.unix_socket.c_str());  // a stale socket from a killed server
    unix_ = std::make_unique<httplib::Server>();
    Routes(*unix_);
    unix_->set_address_family(AF_UNIX);
    if (!unix_->bind_to_port(options_.unix_socket, 80)) {
      return Unavailable("cannot listen on the Unix socket " + options_.unix_socket);
    }
    // Every local user may connect: who they are comes from the kernel (SO_PEERCRED),
    // and what they may do from that (Controller::Cancel, ...).
    ::chmod(options_.unix_socket.c_str(), 0666);
    threads_.emplace_back([this] { unix_->listen_after_bind(); });
    WaitUntilRunning(*unix_);
  }
  return Status::Ok();
}

void HttpServer::Stop() {
  if (tcp_) tcp_->stop();
  if (unix_) unix_->stop();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

}  // namespace hachi::server
