// The HTTP side of who is asking (server/auth.h): the gate every request passes before
// its handler and the caller a handler acts for (the token endpoints are
// http_tokens.cc's). This file finds out who the
// caller is (peer credentials, bearer token, cluster secret, loopback); whether they may
// is the Controller's Authorizer's answer (server/authorizer.h), asked here and by the
// handlers. Internal to server/; callers include httplib themselves.
//
// Thread-safety: the gate and handlers run on the server's threads; they read only
// constant options, the Authorizer (constant) and the Controller (thread-safe).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "server/auth.h"
#include "server/controller.h"

namespace httplib {
struct Request;
}  // namespace httplib

namespace hachi::server {

class HttpRouter;  // server/http_loop.h

struct HttpAuthOptions {
  // What agents send in X-Hachi-Cluster-Secret; "" refuses every agent request (a server
  // always has one: hachi server/dev read or create STATE_DIR/cluster-secret).
  std::string cluster_secret;
  // Who may read without a token is the config's [auth] anonymous_read, which the
  // Controller's Authorizer reads.
  // The names a browser may reach the server by besides IP literals and localhost
  // (server/browser_host.h): an anonymous browser request naming another host is 403.
  std::vector<std::string> browser_hosts;
};

// Installs the pre-routing gate on `s`: it finds the caller and asks the Authorizer
// before the body is read: Action::kAgent on /agents/* (the cluster secret makes an
// agent; nothing else does), kHealth on GET /api/v1/health (open, whatever the request
// carries), else kRead for GET/HEAD and kWrite for the rest (the handler then asks for
// its own action). An anonymous caller's browser request whose Host is none of the
// server's names is refused (DNS rebinding, server/browser_host.h). Refusals are 401
// {"error": {"code": "unauthenticated", ...}} (403 were an authenticated caller refused),
// with `Connection: close`.
void InstallAuthGate(HttpRouter& s, Controller* c, const HttpAuthOptions& options);

// The caller a handler acts for, once the gate let the request through: the kernel's
// uid on the Unix socket, the token's user, or an anonymous reader (authenticated=false,
// `loopback` set from the peer's address).
Result<Caller> CallerOf(const httplib::Request& req, const Controller& c);

}  // namespace hachi::server
