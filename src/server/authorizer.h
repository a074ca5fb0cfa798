// Who may do what: the one place that answers "may caller C do action A on object O"
// for every endpoint (docs/api.md "Authentication"; the model is Kubernetes'
// authorizer.Authorizer: one Authorize(attributes) call, one table test of roles x verbs,
// authorizer_test.cc). Who the caller *is* is decided before, by the transport
// (http_auth.cc: the kernel's word on the Unix socket, a bearer token, the cluster
// secret, a loopback peer); what they may do is decided here, and nowhere else.
//
// Refusals have one code per kind, on every endpoint: kUnauthenticated (HTTP 401) when
// the caller is not authenticated as a user (anonymous, an agent asking for a user's
// action, a claim without a proof), kPermissionDenied (403) when an authenticated caller
// is not allowed. One exception keeps its 400: a submit naming an account that no
// [[account]] lists is a mistake in the request, not a refusal (kInvalidArgument).
// Messages name the action and the object ("job 12 belongs to alice; bob may not cancel
// it", "only an admin may drain node n3 ...").
//
// Thread-safety: an Authorizer is constant after construction; Authorize and Allows are
// pure and may be called from any thread at once. The server builds one from its config
// at start (Controller::Create); the config is not reloaded while it runs. Were it ever
// reloaded, the new Authorizer would be built aside and swapped in whole (a
// std::atomic<std::shared_ptr<const Authorizer>> read once per request), never edited
// in place.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "state/records.h"

namespace hachi::config {
struct ClusterConfig;
}  // namespace hachi::config

namespace hachi::server {

// Who is asking, as the transport established it (http_auth.cc CallerOf). Over the Unix
// socket the kernel says (SO_PEERCRED); over TCP the bearer of a token the server issued
// is its user; on /agents/* the cluster secret makes an agent. Nothing the client writes
// in a request names the caller. Roles derive from these fields and the Authorizer's
// config: anonymous, authenticated user, the owner of a job (by uid), an account's
// member, an admin (root on the socket or an admin token: `admin`; or a user named in
// [auth] admins), an agent.
struct Caller {
  std::string user;
  uint32_t uid = 0;
  uint32_t gid = 0;
  bool authenticated = false;  // a user the kernel or a token vouched for
  bool admin = false;          // root on the socket, an admin token (with authenticated)
  bool agent = false;          // sent the cluster secret on /agents/* (no user: it reads
                               // and changes only through the agent endpoints)
  bool loopback = false;       // the peer is 127.0.0.0/8 or ::1 ([auth] anonymous_read)
  // Not 0: the caller holds a job's credential (HACHI_JOB_TOKEN), which acts for that
  // job alone, not for its owner at large (Authorizer::Authorize).
  state::JobId job = 0;
};

// Every kind of request that reads or changes something (docs/api.md).
enum class Action {
  kHealth,  // GET /health: open to everyone, with or without a token
  // GET of the public state: jobs (without their details, below), nodes, partitions,
  // stats, explain, history, /metrics and the dashboard's files. Asked by the gate.
  kRead,
  // Reaching any endpoint that changes something (POST, DELETE), asked by the gate
  // before the body is read; the handler then asks for its own action and object.
  kWrite,
  kSubmit,          // POST /jobs (object: the account and partition named)
  kCancel,          // POST /jobs/ID/cancel, DELETE /jobs/ID (object: the job)
  kHold,            // POST /jobs/ID/hold
  kRelease,         // POST /jobs/ID/release
  kSeeJobDetails,   // a job's spec.env, spec.script, spec.argv (GET /jobs, /jobs/ID), log
  kDrain,           // POST /nodes/NAME/drain (object: the node)
  kResume,          // POST /nodes/NAME/resume
  kIssueToken,      // POST /tokens
  kListTokens,      // GET /tokens
  kRevokeToken,     // DELETE /tokens/ID (object: the token id)
  kSignal,          // POST /jobs/ID/signal (object: the job)
  kRequeue,         // POST /jobs/ID/requeue (object: the job)
  kNegativeNice,    // POST /jobs with --nice below 0, raising its priority
  kUpdate,          // POST /jobs/ID/update (object: the job)
  kRaiseTimeLimit,  // an update lengthening a job's time limit: admins (Slurm's rule)
  kRunStep,         // POST /jobs/ID/steps, its output and signals: srun
  kAgent,           // /agents/*: register, poll for work, health, exits
};
inline constexpr int kActionCount = static_cast<int>(Action::kAgent) + 1;

// "cancel", "see_job_details", ... (tests, messages).
std::string_view ActionName(Action a);

// What an action is on. Only the fields its action reads matter; the named constructors
// say which.
struct Resource {
  const state::JobRecord* job = nullptr;  // cancel, hold, release, details, signal,
                                          // requeue: its owner
  std::string account;                    // submit: as named ("" = the user's own)
  std::string partition;                  // submit: as named ("" = the first allowed)
  std::string node;                       // drain, resume
  std::string token;                      // revoke: the token's id

  static Resource Job(const state::JobRecord& job) {
    Resource r;
    r.job = &job;
    return r;
  }
  static Resource Submit(std::string account, std::string partition) {
    Resource r;
    r.account = std::move(account);
    r.partition = std::move(partition);
    return r;
  }
  static Resource Node(std::string node) {
    Resource r;
    r.node = std::move(node);
    return r;
  }
  static Resource Token(std::string id) {
    Resource r;
    r.token = std::move(id);
    return r;
  }
};

// Who may GET without a token over TCP ([auth] anonymous_read).
enum class AnonymousRead { kNone, kLocalhost, kAll };
// "none" | "localhost" | "all"; kInvalidArgument otherwise.
Result<AnonymousRead> ParseAnonymousRead(std::string_view text);

class Authorizer {
 public:
  // A server without a config: no [auth] admins (root and admin tokens still are), no
  // [[account]], every partition open to everyone, anonymous reads from loopback.
  Authorizer() = default;
  // From the config's [auth] admins and anonymous_read, its [[account]] members, and
  // its partitions' allowed_users / allowed_accounts. Null: as the default above.
  static Result<Authorizer> FromConfig(const config::ClusterConfig* config);

  // Ok, or why not: kUnauthenticated / kPermissionDenied (kInvalidArgument for an
  // unlisted account), with a message naming the action and the object.
  //  - kHealth: everyone.
  //  - kRead: authenticated callers; anonymous ones as [auth] anonymous_read says
  //    (loopback peers by default).
  //  - kWrite: authenticated callers.
  //  - kSubmit: authenticated callers; with any [[account]] listed, a named account must
  //    be listed and the caller its member or an admin (naming none, or one's own user
  //    name, always works); and the partition named (else at least one) must allow the
  //    user and the account (allowed_users / allowed_accounts; admins too: a partition's
  //    list is its policy, as in `hachi sim`). An unknown partition is not refused here
  //    (validation answers 404).
  //  - kCancel, kHold, kRelease, kSeeJobDetails: the job's owner (the uid it runs as)
  //    or an admin.
  //  - kDrain, kResume, kIssueToken, kListTokens, kRevokeToken, kNegativeNice: admins.
  //  - kAgent: agents only.
  // A job's credential (Caller::job) gets no more than its job needs: reads, and the
  // actions on that one job (steps, signals, cancel, requeue, hold, release, update,
  // its details); nothing on other jobs of its owner, no submit, no admin action.
  Status Authorize(const Caller& who, Action action, const Resource& on) const;
  // The same rule without building a message: for a decision taken per item of a
  // listing (the redaction of every job of GET /jobs).
  bool Allows(const Caller& who, Action action, const Resource& on) const;

 private:
  enum class Verdict { kAllow, kNoIdentity, kDenied, kNoSuchAccount };
  struct PartitionAccess {
    std::string name;
    std::vector<std::string> users;     // empty: everyone
    std::vector<std::string> accounts;  // empty: every account
  };
  struct Account {
    std::string name;
    std::vector<std::string> members;
  };

  // The rule, once: Authorize and Allows both ask it. `why` (when not null) gets the
  // refusal's message; Allows passes null so that a listing builds no strings.
  Verdict Decide(const Caller& who, Action action, const Resource& on,
                 std::string* why) const;
  Verdict DecideSubmit(const Caller& who, const Resource& on, std::string* why) const;
  bool IsAdmin(const Caller& who) const;

  // Constant after construction.
  std::vector<std::string> admins_;          // [auth] admins
  std::vector<Account> accounts_;            // [[account]]; empty: any account name goes
  std::vector<PartitionAccess> partitions_;  // config order: the first allowed is the
                                             // default partition (sched::ValidateRequest)
  AnonymousRead anonymous_read_ = AnonymousRead::kLocalhost;
};

}  // namespace hachi::server
