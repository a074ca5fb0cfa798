#include "server/http_auth.h"

#include <httplib.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string_view>

#include "api/protocol.h"
#include "api/protocol_json.h"
#include "core/secret.h"
#include "state/token_json.h"

namespace hachi::server {
namespace {

using nlohmann::json;

// The header the vendored httplib sets from SO_PEERCRED on a Unix socket, after removing
// any a client sent (third_party/cpp-httplib/README.md).
constexpr const char* kPeerCredHeader = "X-Hachi-Peer-Cred";

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

}  // namespace

void InstallAuthGate(httplib::Server& s, Controller* c, const HttpAuthOptions& options) {
  const std::string agents = std::string(api::kApiPrefix) + "/agents/";
  const std::string health = std::string(api::kApiPrefix) + "/health";
  s.set_pre_routing_handler(
      [c, options, agents, health](const httplib::Request& req, httplib::Response& res) {
        using R = httplib::Server::HandlerResponse;
        if (StartsWith(req.path, agents)) {
          // Agents are not users: only the cluster secret opens these, on either socket.
          const std::string sent = req.get_header_value(kClusterSecretHeader);
          if (options.cluster_secret.empty() || sent.empty() ||
              !SecretEquals(sent, options.cluster_secret)) {
            Refuse(res, Unauthenticated("agent endpoints need the cluster secret "
                                        "(--cluster-secret-file on the agent)"));
            return R::Handled;
          }
          return R::Unhandled;
        }
        if (req.path == health) return R::Unhandled;
        uint32_t uid = 0, gid = 0;
        if (PeerCred(req, &uid, &gid)) return R::Unhandled;  // the kernel's word
        if (req.has_header("Authorization")) {
          // get_header_value returns a copy: keep it while the view lives.
          const std::string header = req.get_header_value("Authorization");
          const std::string_view token = BearerToken(header);
          if (token.empty()) {
            Refuse(res, Unauthenticated("Authorization: expected 'Bearer hachi_...'"));
            return R::Handled;
          }
          Result<Caller> who = c->Authenticate(token);
          if (!who.ok()) {
            Refuse(res, who.status());
            return R::Handled;
          }
          return R::Unhandled;
        }
        const bool read = req.method == "GET" || req.method == "HEAD";
        const bool anonymous_ok =
            read && (options.anonymous_read == AnonymousRead::kAll ||
                     (options.anonymous_read == AnonymousRead::kLocalhost &&
                      IsLoopback(req.remote_addr)));
        if (anonymous_ok) return R::Unhandled;
        Refuse(res,
               Unauthenticated(
                   std::string(read ? "reading" : "this request") +
                   " needs a token: set HACHI_TOKEN or ~/.config/hachi/token (an admin "
                   "makes one with `hachi token create`), or use the local Unix socket"));
        return R::Handled;
      });
}

Result<Caller> CallerOf(const httplib::Request& req, const Controller& c) {
  uint32_t uid = 0, gid = 0;
  if (PeerCred(req, &uid, &gid)) return c.LocalCaller(uid, gid);
  if (req.has_header("Authorization")) {
    const std::string header = req.get_header_value("Authorization");
    return c.Authenticate(BearerToken(header));
  }
  Caller anonymous;
  anonymous.user = "anonymous";
  return anonymous;
}

void AddTokenRoutes(httplib::Server& s, Controller* c) {
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
    Result<IssuedToken> t = c->IssueToken(r, *who);
    if (!t.ok()) return fail(res, t.status());
    reply(res, 201, json{{"token", t->token}, {"record", public_json(t->record)}}.dump());
  });
  s.Get(p, [c, reply, fail, public_json](const httplib::Request& req,
                                         httplib::Response& res) {
    Result<Caller> who = CallerOf(req, *c);
    if (!who.ok()) return fail(res, who.status());
    Result<std::vector<state::TokenRecord>> list = c->Tokens(*who);
    if (!list.ok()) return fail(res, list.status());
    json tokens = json::array();
    for (const state::TokenRecord& t : *list) tokens.push_back(public_json(t));
    reply(res, 200, json{{"tokens", tokens}}.dump());
  });
  s.Delete(p + R"(/([0-9a-f]{1,64}))",
           [c, reply, fail](const httplib::Request& req, httplib::Response& res) {
             Result<Caller> who = CallerOf(req, *c);
             if (!who.ok()) return fail(res, who.status());
             Status st = c->RevokeToken(req.matches[1], *who);
             if (!st.ok()) return fail(res, st);
             reply(res, 200, json{{"ok", true}}.dump());
           });
}

}  // namespace hachi::server
