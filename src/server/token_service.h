// TokenService: who is asking — a local user as the kernel named them on the Unix
// socket, the bearer of an API token an admin issued, or a job's processes holding its
// run's credential (server/auth.h, docs/api.md "Authentication") — and the tokens'
// life: issue, list, revoke. What a caller may then do is the Authorizer's
// (server/authorizer.h). Tokens are records like jobs: they change only through the
// ledger (TokenIssued / TokenRevoked), and only their SHA-256 is kept.
//
// Thread-safety: every method may be called from any thread; reads take the ledger's
// mu(), writes its writer_mu() and mu() (the declarations say which).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "server/authorizer.h"
#include "server/ledger.h"
#include "state/records.h"

namespace hachi::server {

// `hachi token create USER [--admin] [--uid N --gid N]` (POST /api/v1/tokens).
struct TokenRequest {
  std::string user;
  int64_t uid = -1;  // -1: the user's uid/gid from the server's password database
  int64_t gid = -1;
  bool admin = false;
};
struct IssuedToken {
  std::string token;  // the only time the server has it in clear
  state::TokenRecord record;
};

class TokenService : public OnLedger {
 public:
  // `credential_key`: the key of the job credentials (the cluster secret; "" for
  // none). Not owned: `ledger`, `authorizer` and `clock` outlive the service.
  TokenService(Ledger* ledger, const Authorizer* authorizer, const Clock* clock,
               std::string credential_key);

  // A local user as the kernel named them on the Unix socket.
  Caller LocalCaller(uint32_t uid, uint32_t gid) const;
  // The bearer of `token`: kUnauthenticated unless the server issued it and it was not
  // revoked (compared by its SHA-256, in constant time), or it is the credential of a
  // run that still runs.
  Result<Caller> Authenticate(std::string_view token) const EXCLUDES(ledger_->mu());
  // Admins only. The user's uid/gid are resolved now, in the server's password database,
  // unless given; the record is durable when this returns.
  Result<IssuedToken> Issue(const TokenRequest& request, const Caller& who)
      EXCLUDES(ledger_->writer_mu(), ledger_->mu());
  Result<std::vector<state::TokenRecord>> List(const Caller& who) const  // admins
      EXCLUDES(ledger_->mu());
  Status Revoke(const std::string& id, const Caller& who)  // admins
      EXCLUDES(ledger_->writer_mu(), ledger_->mu());

 private:
  const Authorizer* const authorizer_;
  const Clock* const clock_;
  const std::string credential_key_;
};

}  // namespace hachi::server
