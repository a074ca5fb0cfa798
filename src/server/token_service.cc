#include "server/token_service.h"

#include <grp.h>
#include <pwd.h>

#include <algorithm>

#include "core/secret.h"
#include "core/sha256.h"
#include "server/auth.h"

namespace hachi::server {
namespace {

// The account name of `uid` ("uid1234" when it has none).
std::string UserName(uint32_t uid) {
  char buf[4096];
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  return "uid" + std::to_string(uid);
}

bool IsUserName(const std::string& name) {
  if (name.empty() || name.size() > 64 || name[0] == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' ||
           c == '.' || c == '@' || c == '$';
  });
}

}  // namespace

TokenService::TokenService(Ledger* ledger, const Authorizer* authorizer,
                           const Clock* clock, std::string credential_key)
    : OnLedger(ledger),
      authorizer_(authorizer),
      clock_(clock),
      credential_key_(std::move(credential_key)) {}

Caller TokenService::LocalCaller(uint32_t uid, uint32_t gid) const {
  Caller c;
  c.uid = uid;
  c.gid = gid;
  c.user = UserName(uid);
  c.authenticated = true;
  c.admin = uid == 0;
  return c;
}

Result<Caller> TokenService::Authenticate(std::string_view token) const {
  if (token.substr(0, kJobCredentialPrefix.size()) == kJobCredentialPrefix) {
    state::JobId job = 0;
    Time start = 0;
    if (!CheckJobCredential(credential_key_, token, &job, &start)) {
      return Unauthenticated("the job credential is not valid here");
    }
    MutexLock lock(&ledger_->mu());
    auto it = ledger_->image().jobs.find(job);
    if (it == ledger_->image().jobs.end() ||
        it->second.state != state::JobState::kRunning || it->second.start_time != start) {
      return Unauthenticated("the job credential of job " + std::to_string(job) +
                             " is no longer valid: that run of the job ended");
    }
    Caller c;
    c.user = it->second.req.user;
    c.uid = it->second.spec.uid;
    c.gid = it->second.spec.gid;
    c.authenticated = true;
    c.job = job;
    return c;
  }
  const std::string_view id = TokenId(token);
  if (id.empty()) {
    return Unauthenticated(
        "the token is not a Hachi token (hachi_...); ask an admin for one "
        "(hachi token create)");
  }
  const std::string hash = Sha256Hex(token);
  MutexLock lock(&ledger_->mu());
  auto it = ledger_->image().tokens.find(std::string(id));
  if (it == ledger_->image().tokens.end() || !SecretEquals(it->second.sha256, hash)) {
    return Unauthenticated("the token is not valid (revoked, or never issued here)");
  }
  Caller c;
  c.user = it->second.user;
  c.uid = it->second.uid;
  c.gid = it->second.gid;
  c.authenticated = true;
  c.admin = it->second.admin;
  return c;
}

Result<IssuedToken> TokenService::Issue(const TokenRequest& request, const Caller& who) {
  HACHI_RETURN_IF_ERROR(authorizer_->Authorize(who, Action::kIssueToken, {}));
  if (!IsUserName(request.user)) {
    return InvalidArgument("token: '" + request.user.substr(0, 64) +
                           "' is not a user name");
  }
  if ((request.uid < 0) != (request.gid < 0) || request.uid > 0xfffffffe ||
      request.gid > 0xfffffffe) {
    return InvalidArgument("token: give both uid and gid (0..4294967294), or neither");
  }
  state::TokenRecord t;
  t.user = request.user;
  if (request.uid >= 0) {
    t.uid = static_cast<uint32_t>(request.uid);
    t.gid = static_cast<uint32_t>(request.gid);
  } else {
    char buf[4096];
    passwd pw{};
    passwd* found = nullptr;
    if (getpwnam_r(request.user.c_str(), &pw, buf, sizeof buf, &found) != 0 ||
        found == nullptr) {
      return InvalidArgument("token: no user " + request.user +
                             " in the server's password database; give --uid and --gid");
    }
    t.uid = found->pw_uid;
    t.gid = found->pw_gid;
  }
  t.admin = request.admin;
  t.created = clock_->Now();
  t.created_by = who.user;
  Result<std::string> id = RandomHex(6);
  if (!id.ok()) return id.status();
  t.id = *id;
  Result<std::string> token = NewToken(t.id);
  if (!token.ok()) return token.status();
  t.sha256 = Sha256Hex(*token);
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  HACHI_RETURN_IF_ERROR(ledger_->Commit({state::TokenIssued{t}}));
  return IssuedToken{std::move(*token), std::move(t)};
}

Result<std::vector<state::TokenRecord>> TokenService::List(const Caller& who) const {
  HACHI_RETURN_IF_ERROR(authorizer_->Authorize(who, Action::kListTokens, {}));
  MutexLock lock(&ledger_->mu());
  std::vector<state::TokenRecord> out;
  for (const auto& [id, t] : ledger_->image().tokens) out.push_back(t);
  std::sort(out.begin(), out.end(),
            [](const state::TokenRecord& a, const state::TokenRecord& b) {
              return a.created != b.created ? a.created < b.created : a.id < b.id;
            });
  return out;
}

Status TokenService::Revoke(const std::string& id, const Caller& who) {
  HACHI_RETURN_IF_ERROR(
      authorizer_->Authorize(who, Action::kRevokeToken, Resource::Token(id)));
  MutexLock writer(&ledger_->writer_mu());
  MutexLock lock(&ledger_->mu());
  if (ledger_->image().tokens.count(id) == 0) return NotFound("no token " + id);
  return ledger_->Commit({state::TokenRevoked{id}});
}

}  // namespace hachi::server
