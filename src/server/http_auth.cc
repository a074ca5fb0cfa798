#include "server/http_auth.h"

#include <httplib.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string_view>

#include "api/protocol.h"
#include "api/protocol_json.h"
#include "core/secret.h"
#include "server/http_loop.h"
#include "state/token_json.h"

namespace hachi::server {
namespace {

using nlohmann::json;

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

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
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

void InstallAuthGate(HttpRouter& s, Controller* c, const HttpAuthOptions& options) {
  const std::string agents = std::string(api::kApiPrefix) + "/agents/";
  const std::string health = std::string(api::kApiPrefix) + "/health";
  const Authorizer* authorizer = &c->authorizer();
  s.set_pre_routing_handler([c, authorizer, options, agents, health](
                                const httplib::Request& req, httplib::Response& res) {
    using R = httplib::Server::HandlerResponse;
    auto admit = [&res](const Status& st) {
      if (st.ok()) return R::Unhandled;  // on to the handler
      Refuse(res, st);
      return R::Handled;
    };
    if (StartsWith(req.path, agents)) {
      // Agents are not users: on these paths the caller is an agent or no one, on
      // either socket, whatever token or peer credentials come with the request.
      Caller agent;
      const std::string sent = req.get_header_value(kClusterSecretHeader);
      agent.agent = !options.cluster_secret.empty() && !sent.empty() &&
                    SecretEquals(sent, options.cluster_secret);
      return admit(authorizer->Authorize(agent, Action::kAgent, {}));
    }
    // Asked for no one in particular: the health check is open whatever the request
    // carries, even a bad token.
    if (req.path == health) return admit(authorizer->Authorize({}, Action::kHealth, {}));
    Result<Caller> who = UserOf(req, *c, /*named=*/false);
    if (!who.ok()) return admit(who.status());
    const bool read = req.method == "GET" || req.method == "HEAD";
    return admit(authorizer->Authorize(*who, read ? Action::kRead : Action::kWrite, {}));
  });
}

Result<Caller> CallerOf(const httplib::Request& req, const Controller& c) {
  return UserOf(req, c, /*named=*/true);
}

void AddTokenRoutes(HttpRouter& s, Controller* c) {
  const std::string p = std::string(api::kApiPrefix) + "/tokens";
  auto reply = [](httplib::Response& res, int status, const std::string& body) {
    res.status = status;
    res.set_content(body, "application/json");
  };
  auto fail = [](httplib::Response& res, const Status& st) {
    res.status = api::HttpStatusFor(st.code());
    res.set_content(api::ErrorToJson(st), "application/json");
  };
  // The hash stays on the server: a listing shows what a token is for, not what it is.
  auto public_json = [](const state::TokenRecord& t) {
    json j = json::parse(state::TokenRecordToJson(t));
    j.erase("sha256");
    return j;
  };
  s.Post(p, [c, reply, fail, public_json](const httplib::Request& req,
                                          httplib::Response& res) {
    Result<Caller> who = CallerOf(req, *c);
    if (!who.ok()) return fail(res, who.status());
    const json j = json::parse(req.body, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("user") ||
        !j["user"].is_string()) {
      return fail(
          res, InvalidArgument(
                   "tokens: expected {\"user\": NAME, \"admin\"?, \"uid\"?, \"gid\"?}"));
    }
    TokenRequest r;
    for (const auto& [key, v] : j.items()) {
      if (key == "user") {
        r.user = v.get<std::string>();
      } else if (key == "admin" && v.is_boolean()) {
        r.admin = v.get<bool>();
      } else if ((key == "uid" || key == "gid") && v.is_number_unsigned()) {
        (key == "uid" ? r.uid : r.gid) = static_cast<int64_t>(
            std::min<uint64_t>(v.get<uint64_t>(), uint64_t{1} << 40));
      } else {
        return fail(res, InvalidArgument("tokens: field '" + key +
                                         "' is unknown or of the "
                                         "wrong type"));
      }
    }
    Result<IssuedToken> t = c->tokens().Issue(r, *who);
    if (!t.ok()) return fail(res, t.status());
    reply(res, 201, json{{"token", t->token}, {"record", public_json(t->record)}}.dump());
  });
  s.Get(p, [c, reply, fail, public_json](const httplib::Request& req,
                                         httplib::Response& res) {
    Result<Caller> who = CallerOf(req, *c);
    if (!who.ok()) return fail(res, who.status());
    Result<std::vector<state::TokenRecord>> list = c->tokens().List(*who);
    if (!list.ok()) return fail(res, list.status());
    json tokens = json::array();
    for (const state::TokenRecord& t : *list) tokens.push_back(public_json(t));
    reply(res, 200, json{{"tokens", tokens}}.dump());
  });
  s.Delete(p + R"(/([0-9a-f]{1,64}))",
           [c, reply, fail](const httplib::Request& req, httplib::Response& res) {
             Result<Caller> who = CallerOf(req, *c);
             if (!who.ok()) return fail(res, who.status());
             Status st = c->tokens().Revoke(req.matches[1], *who);
             if (!st.ok()) return fail(res, st);
             reply(res, 200, json{{"ok", true}}.dump());
           });
}

}  // namespace hachi::server
