// The API tokens' handlers (server/http_handlers.h; docs/api.md, "Tokens"): POST
// /api/v1/tokens {"user", "uid"?, "gid"?, "admin"?} -> 201 {"token", "record"}; GET
// /api/v1/tokens; DELETE /api/v1/tokens/ID. Admins only (the Controller checks).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "api/protocol_json.h"
#include "server/http_auth.h"
#include "server/http_handlers.h"
#include "state/token_json.h"

namespace hachi::server {
namespace {

using nlohmann::json;

// The hash stays on the server: a listing shows what a token is for, not what it is.
json PublicJson(const state::TokenRecord& t) {
  json j = json::parse(state::TokenRecordToJson(t));
  j.erase("sha256");
  return j;
}

}  // namespace

void TokenHandlers::IssueToken(const Request& req, Response& res) const {
  Result<Caller> who = CallerOf(req, *c_);
  if (!who.ok()) return ReplyError(res, who.status());
  const json j = json::parse(req.body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("user") ||
      !j["user"].is_string()) {
    return ReplyError(
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
      (key == "uid" ? r.uid : r.gid) =
          static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), uint64_t{1} << 40));
    } else {
      return ReplyError(res, InvalidArgument("tokens: field '" + key +
                                             "' is unknown or of the "
                                             "wrong type"));
    }
  }
  Result<IssuedToken> t = c_->tokens().Issue(r, *who);
  if (!t.ok()) return ReplyError(res, t.status());
  Reply(res, 201, json{{"token", t->token}, {"record", PublicJson(t->record)}}.dump());
}

void TokenHandlers::ListTokens(const Request& req, Response& res) const {
  Result<Caller> who = CallerOf(req, *c_);
  if (!who.ok()) return ReplyError(res, who.status());
  Result<std::vector<state::TokenRecord>> list = c_->tokens().List(*who);
  if (!list.ok()) return ReplyError(res, list.status());
  json tokens = json::array();
  for (const state::TokenRecord& t : *list) tokens.push_back(PublicJson(t));
  Reply(res, 200, json{{"tokens", tokens}}.dump());
}

void TokenHandlers::RevokeToken(const Request& req, Response& res) const {
  Result<Caller> who = CallerOf(req, *c_);
  if (!who.ok()) return ReplyError(res, who.status());
  Status st = c_->tokens().Revoke(req.matches[1], *who);
  if (!st.ok()) return ReplyError(res, st);
  ReplyOk(res);
}

}  // namespace hachi::server
