// HttpServer: the REST API of docs/api.md, on TCP (127.0.0.1 by default; HTTPS with a
// certificate) and on a local Unix socket, over the server's own connection layer
// (server/http_loop.h: one epoll thread, a few handler threads; a waiting long poll
// holds no thread). Its routes are one table (HttpServer::Routes, http_api.cc), each
// naming a handler of its concern (server/http_handlers.h) that decodes the request,
// calls the Controller and encodes the reply; no state of its own. Errors are
// {"error": {"code", "message"}} with a 4xx/5xx status; the server keeps serving after
// any bad request.
//
// The two long polls — an agent's GET /agents/NODE/work and GET /jobs/ID?wait_from= —
// park on the topics "agent/NODE" and "job/ID", which the Controller and its AgentHub
// notify (Controller::SetNotifier) when there is work for that agent or the job changed.
//
// Thread-safety: Start/Stop from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "api/protocol.h"
#include "core/status.h"
#include "server/controller.h"
#include "server/http_auth.h"
#include "server/http_loop_options.h"
#include "server/web.h"

namespace hachi::server {

struct ApiHandlers;  // server/http_handlers.h
class HttpLoop;      // server/http_loop.h
class HttpRouter;

struct HttpOptions {
  std::string listen = "127.0.0.1:8686";  // HOST:PORT; port 0 picks a free one; "" = none
  std::string unix_socket;                // path; "" = none
  size_t max_body_bytes = api::kMaxRequestBodyBytes;  // larger: 413, unread
  int threads = 16;  // handler threads (not one per connection)
  // Deadlines and bounds per connection and per peer (server/http_loop.h); the body
  // limit and the threads above override theirs.
  HttpLoopOptions connections;
  HttpAuthOptions auth;  // the cluster secret, anonymous reads (server/http_auth.h)
  // PEM files: both set, the TCP listener serves HTTPS (the Unix socket stays plain).
  std::string tls_cert;
  std::string tls_key;
  DashboardOptions dashboard;  // GET /, /web/*, /api/v1/history, /api/v1/jobs/ID/log
  // Several controllers on one database (docs/ha.md). A leader's epoch, sent with every
  // reply as X-Hachi-Epoch (agents refuse a lower one than they have seen); 0: none.
  int64_t epoch = 0;
  // A standby (HttpServer built without a Controller) answers every request 503 and
  // names the leader this returns ("" while none holds the lease).
  std::function<std::string()> leader;
};

class HttpServer {
 public:
  // `controller` null: a standby's server (HttpOptions::leader).
  HttpServer(Controller* controller, HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts serving on background threads. kUnavailable when a socket cannot
  // be bound (naming it).
  Status Start();
  void Stop();                        // idempotent
  int port() const { return port_; }  // the TCP port bound (after Start)
  // "http://127.0.0.1:PORT" ("https://..." with TLS), for clients in the same process.
  std::string url() const;
  const std::string& unix_socket() const { return options_.unix_socket; }
  // Connections, parked long polls, refusals and timeouts so far.
  HttpLoopStats connection_stats() const;

 private:
  void Routes(HttpRouter& s);
  void StandbyRoutes(HttpRouter& s);

  Controller* const controller_;
  const HttpOptions options_;
  std::string host_;
  int port_ = 0;
  bool tls_ = false;  // the TCP listener is HTTPS
  std::unique_ptr<HttpRouter> router_;
  std::unique_ptr<HttpLoop> loop_;
  std::unique_ptr<ApiHandlers> handlers_;  // the routes' (in router_) targets
  bool started_ = false;
};

}  // namespace hachi::server
