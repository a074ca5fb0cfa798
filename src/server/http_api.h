// HttpServer: the REST API of docs/api.md over cpp-httplib, on TCP (127.0.0.1 by
// default) and on a local Unix socket. It decodes requests, calls the Controller and
// encodes replies; no state of its own. Errors are {"error": {"code", "message"}} with
// a 4xx/5xx status; the server keeps serving after any bad request.
//
// Thread-safety: Start/Stop from one thread; requests are served by a thread pool
// (long polls hold a thread each, so the pool is sized for agents + waiting clients).
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "server/controller.h"
#include "server/http_auth.h"
#include "server/web.h"

namespace httplib {
class Server;
}

namespace hachi::server {

struct HttpOptions {
  std::string listen = "127.0.0.1:8686";  // HOST:PORT; port 0 picks a free one; "" = none
  std::string unix_socket;                // path; "" = none
  size_t max_body_bytes = 4 << 20;        // larger requests get 413
  int threads = 64;
  HttpAuthOptions auth;  // the cluster secret, anonymous reads (server/http_auth.h)
  // PEM files: both set, the TCP listener serves HTTPS (the Unix socket stays plain).
  std::string tls_cert;
  std::string tls_key;
  DashboardOptions dashboard;  // GET /, /web/*, /api/v1/history, /api/v1/jobs/ID/log
};

class HttpServer {
 public:
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

 private:
  void Routes(httplib::Server& s);

  Controller* const controller_;
  const HttpOptions options_;
  std::string host_;
  int port_ = 0;
  bool tls_ = false;  // the TCP listener is HTTPS
  std::unique_ptr<httplib::Server> tcp_;
  std::unique_ptr<httplib::Server> unix_;
  std::vector<std::thread> threads_;
};

}  // namespace hachi::server
