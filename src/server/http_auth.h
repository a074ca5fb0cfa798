// The HTTP side of who is asking (server/auth.h): the gate every request passes before
// its handler, the caller a handler acts for, and the token endpoints
// (POST/GET /api/v1/tokens, DELETE /api/v1/tokens/ID). Internal to server/; callers
// include httplib themselves.
//
// Thread-safety: the gate and handlers run on the server's threads; they read only
// constant options and the Controller (thread-safe).
#pragma once

#include <string>

#include "core/status.h"
#include "server/auth.h"
#include "server/controller.h"

namespace httplib {
class Server;
struct Request;
}  // namespace httplib

namespace hachi::server {

struct HttpAuthOptions {
  // What agents send in X-Hachi-Cluster-Secret; "" refuses every agent request (a server
  // always has one: hachi server/dev read or create STATE_DIR/cluster-secret).
  std::string cluster_secret;
  AnonymousRead anonymous_read = AnonymousRead::kLocalhost;
};

// Installs the pre-routing gate on `s`: /agents/* need the cluster secret; other
// requests need the kernel's word (the Unix socket), a valid token, or, for GET, an
// anonymous reader the options allow. Refusals are 401 {"error": {"code":
// "unauthenticated", ...}}, before the body is read. GET /api/v1/health is always open.
void InstallAuthGate(httplib::Server& s, Controller* c, const HttpAuthOptions& options);

// The caller a handler acts for, once the gate let the request through: the kernel's
// uid on the Unix socket, the token's user, or an anonymous reader (authenticated=false).
Result<Caller> CallerOf(const httplib::Request& req, const Controller& c);

// POST /api/v1/tokens {"user", "uid"?, "gid"?, "admin"?} -> 201 {"token", "record"};
// GET /api/v1/tokens; DELETE /api/v1/tokens/ID. Admins only (the Controller checks).
void AddTokenRoutes(httplib::Server& s, Controller* c);

}  // namespace hachi::server
