#include "server/http_auth.h"

#include <httplib.h>

#include <cstdio>
#include <string_view>

#include "api/protocol.h"
#include "api/protocol_json.h"
#include "core/secret.h"
#include "core/strings.h"
#include "server/browser_host.h"
#include "server/http_loop.h"

namespace hachi::server {
namespace {

bool PeerCred(const httplib::Request& req, uint32_t* uid, uint32_t* gid) {
  if (!req.has_header(kPeerCredHeader)) return false;
  unsigned long u = 0, g = 0, pid = 0;
  if (std::sscanf(req.get_header_value(kPeerCredHeader).c_str(), "%lu %lu %lu", &u, &g,
                  &pid) != 3) {
    return false;
  }
  *uid = static_cast<uint32_t>(u);
  *gid = static_cast<uint32_t>(g);
  return true;
}

void Refuse(httplib::Response& res, const Status& s) {
  res.status = api::HttpStatusFor(s.code());
  if (s.code() == StatusCode::kUnauthenticated) {
    res.set_header("WWW-Authenticate", "Bearer realm=\"hachi\"");
  }
  // The body of a refused request is not read: the connection cannot carry another.
  res.set_header("Connection", "close");
  res.set_content(api::ErrorToJson(s), "application/json");
}

// Who sent `req` to a user endpoint: the kernel's uid on the Unix socket, a token's
// user, or an anonymous caller (and whether its peer is loopback); kUnauthenticated
// for an Authorization header that is not a valid token. `named`: the socket user's
// name and admin flag from Controller::LocalCaller (a password-database lookup, ~10 us);
// the gate goes without, since kRead and kWrite ask only whether the caller is
// authenticated.
Result<Caller> UserOf(const httplib::Request& req, const Controller& c, bool named) {
  uint32_t uid = 0, gid = 0;
  if (PeerCred(req, &uid, &gid)) {  // the kernel's word
    if (named) return c.tokens().LocalCaller(uid, gid);
    Caller peer;
    peer.uid = uid;
    peer.gid = gid;
    peer.authenticated = true;
    return peer;
  }
  if (req.has_header("Authorization")) {
    // get_header_value returns a copy: keep it while the view lives.
    const std::string header = req.get_header_value("Authorization");
    const std::string_view token = BearerToken(header);
    if (token.empty())
      return Unauthenticated("Authorization: expected 'Bearer hachi_...'");
    return c.tokens().Authenticate(token);
  }
  Caller anonymous;
  anonymous.user = "anonymous";
  anonymous.loopback = IsLoopback(req.remote_addr);
  return anonymous;
}

}  // namespace

namespace {

// The gate's question: who sent `req` and whether they may reach its path at all.
Result<Caller> Gate(const httplib::Request& req, const Controller& c,
                    const Authorizer& authorizer, const HttpAuthOptions& options) {
  static const std::string agents = std::string(api::kApiPrefix) + "/agents/";
  static const std::string health = std::string(api::kApiPrefix) + "/health";
  if (StartsWith(req.path, agents)) {
    // Agents are not users: on these paths the caller is an agent or no one, on
    // either socket, whatever token or peer credentials come with the request.
    Caller agent;
    const std::string sent = req.get_header_value(kClusterSecretHeader);
    agent.agent = !options.cluster_secret.empty() && !sent.empty() &&
                  SecretEquals(sent, options.cluster_secret);
    if (Status st = authorizer.Authorize(agent, Action::kAgent, {}); !st.ok()) return st;
    return agent;
  }
  // Asked for no one in particular: the health check is open whatever the request
  // carries, even a bad token.
  if (req.path == health) {
    if (Status st = authorizer.Authorize({}, Action::kHealth, {}); !st.ok()) return st;
    return Caller{};
  }
  Result<Caller> who = UserOf(req, c, /*named=*/false);
  if (!who.ok()) return who.status();
  if (!who->authenticated && FromBrowser(req)) {
    const std::string host = req.get_header_value("Host");
    if (!HostNamesServer(host, options.browser_hosts)) {
      return PermissionDenied(
          "Host '" + Clip(host) +
          "' is not a name of this server: a browser reached it by another site's name "
          "(DNS rebinding). If it is the server's name, add it to [auth] browser_hosts");
    }
  }
  const bool read = req.method == "GET" || req.method == "HEAD";
  if (Status st = authorizer.Authorize(*who, read ? Action::kRead : Action::kWrite, {});
      !st.ok()) {
    return st;
  }
  return who;
}

}  // namespace

void InstallAuthGate(HttpRouter& s, Controller* c, const HttpAuthOptions& options) {
  const Authorizer* authorizer = &c->authorizer();
  s.set_pre_routing_handler(
      [c, authorizer, options](const httplib::Request& req, httplib::Response& res) {
        Result<Caller> who = Gate(req, *c, *authorizer, options);
        if (who.ok()) return httplib::Server::HandlerResponse::Unhandled;  // on
        Refuse(res, who.status());
        return httplib::Server::HandlerResponse::Handled;
      });
  // The same question on the head alone, asked by the connection layer before it reads
  // a body and to count a connection as its caller's.
  s.set_admission_handler([c, authorizer, options](const httplib::Request& req) {
    Result<Caller> who = Gate(req, *c, *authorizer, options);
    Admission a;
    if (!who.ok()) {
      a.status = who.status();
    } else if (who->agent || who->admin) {
      a.peer = Admission::Peer::kPrivileged;
    } else if (who->authenticated) {
      a.peer = Admission::Peer::kUser;
      a.user = who->user.empty() ? "uid " + std::to_string(who->uid) : who->user;
    }
    return a;
  });
}

Result<Caller> CallerOf(const httplib::Request& req, const Controller& c) {
  return UserOf(req, c, /*named=*/true);
}

}  // namespace hachi::server
