#include "server/authorizer.h"

#include <algorithm>

#include "config/cluster_config.h"

namespace hachi::server {
namespace {

bool Contains(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

// An allow-list: empty lets everyone in.
bool Admits(const std::vector<std::string>& list, const std::string& name) {
  return list.empty() || Contains(list, name);
}

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

// How a message names an action: "cancel" + " job 12", and "cancelling job 12".
struct Phrase {
  std::string verb;    // "cancel"
  std::string object;  // "job 12" ("" when the verb says it all)
  std::string gerund;  // "cancelling job 12"
};

Phrase PhraseOf(Action a, const Resource& on) {
  const std::string job =
      on.job != nullptr ? "job " + std::to_string(on.job->id) : "a job";
  const std::string node = "node " + on.node;
  switch (a) {
    case Action::kHealth:
      return {"read", "the health check", "reading the health check"};
    case Action::kRead:
      return {"read", "", "reading"};
    case Action::kWrite:
      return {"change", "anything", "this request"};
    case Action::kSubmit:
      return {"submit", "a job", "submitting a job"};
    case Action::kCancel:
      return {"cancel", job, "cancelling " + job};
    case Action::kHold:
      return {"hold", job, "holding " + job};
    case Action::kRelease:
      return {"release", job, "releasing " + job};
    case Action::kSeeJobDetails:
      return {"see", "the environment, script and log of " + job,
              "seeing the environment, script and log of " + job};
    case Action::kDrain:
      return {"drain", node, "draining " + node};
    case Action::kResume:
      return {"resume", node, "resuming " + node};
    case Action::kIssueToken:
      return {"create", "tokens", "creating tokens"};
    case Action::kListTokens:
      return {"list", "tokens", "listing tokens"};
    case Action::kRevokeToken:
      return {"revoke", "token " + on.token, "revoking token " + on.token};
    case Action::kSignal:
      return {"signal", job, "signalling " + job};
    case Action::kRequeue:
      return {"requeue", job, "requeueing " + job};
    case Action::kNegativeNice:
      return {"submit", "a job with a negative --nice",
              "submitting a job with a negative --nice"};
    case Action::kUpdate:
      return {"update", job, "updating " + job};
    case Action::kRaiseTimeLimit:
      return {"lengthen", "the time limit of " + job,
              "lengthening the time limit of " + job};
    case Action::kRunStep:
      return {"run steps in", job, "running steps in " + job};
    case Action::kAgent:
      return {"use", "the agent endpoints", "the agent endpoints"};
  }
  return {"do", "this", "this request"};
}

std::string Who(const Caller& who) { return who.user.empty() ? "you" : who.user; }

}  // namespace

std::string_view ActionName(Action a) {
  switch (a) {
    case Action::kHealth:
      return "health";
    case Action::kRead:
      return "read";
    case Action::kWrite:
      return "write";
    case Action::kSubmit:
      return "submit";
    case Action::kCancel:
      return "cancel";
    case Action::kHold:
      return "hold";
    case Action::kRelease:
      return "release";
    case Action::kSeeJobDetails:
      return "see_job_details";
    case Action::kDrain:
      return "drain";
    case Action::kResume:
      return "resume";
    case Action::kIssueToken:
      return "issue_token";
    case Action::kListTokens:
      return "list_tokens";
    case Action::kRevokeToken:
      return "revoke_token";
    case Action::kSignal:
      return "signal";
    case Action::kRequeue:
      return "requeue";
    case Action::kNegativeNice:
      return "negative_nice";
    case Action::kUpdate:
      return "update";
    case Action::kRaiseTimeLimit:
      return "raise_time_limit";
    case Action::kRunStep:
      return "run_step";
    case Action::kAgent:
      return "agent";
  }
  return "?";
}

Result<AnonymousRead> ParseAnonymousRead(std::string_view text) {
  if (text == "none") return AnonymousRead::kNone;
  if (text == "localhost" || text.empty()) return AnonymousRead::kLocalhost;
  if (text == "all") return AnonymousRead::kAll;
  return InvalidArgument("anonymous_read: '" + std::string(text) +
                         "' is not one of localhost, none, all");
}

Result<Authorizer> Authorizer::FromConfig(const config::ClusterConfig* config) {
  Authorizer a;
  if (config == nullptr) return a;
  Result<AnonymousRead> anonymous = ParseAnonymousRead(config->auth.anonymous_read);
  if (!anonymous.ok()) return anonymous.status();
  a.anonymous_read_ = *anonymous;
  a.admins_ = config->auth.admins;
  for (const config::AccountConfig& acc : config->accounts) {
    a.accounts_.push_back({acc.name, acc.members});
  }
  for (const config::PartitionConfig& p : config->partitions) {
    a.partitions_.push_back(
        {p.partition.name, p.partition.allowed_users, p.partition.allowed_accounts});
  }
  return a;
}

bool Authorizer::IsAdmin(const Caller& who) const {
  // Without authentication a flag or a name is a claim, not a proof.
  return who.authenticated && (who.admin || Contains(admins_, who.user));
}

Status Authorizer::Authorize(const Caller& who, Action action, const Resource& on) const {
  std::string why;
  switch (Decide(who, action, on, &why)) {
    case Verdict::kAllow:
      return Status::Ok();
    case Verdict::kNoIdentity:
      return Unauthenticated(std::move(why));
    case Verdict::kDenied:
      return PermissionDenied(std::move(why));
    case Verdict::kNoSuchAccount:
      return InvalidArgument(std::move(why));
  }
  return Internal("authorizer: unknown verdict");
}

bool Authorizer::Allows(const Caller& who, Action action, const Resource& on) const {
  return Decide(who, action, on, nullptr) == Verdict::kAllow;
}

Authorizer::Verdict Authorizer::Decide(const Caller& who, Action action,
                                       const Resource& on, std::string* why) const {
  // A refusal's code follows from who asks: 401 without a user's identity, 403 with one.
  auto refuse = [&](const std::string& denied) {
    if (why != nullptr) {
      if (!who.authenticated) {
        *why = action == Action::kAgent
                   ? "agent endpoints need the cluster secret (--cluster-secret-file on "
                     "the agent)"
                   : PhraseOf(action, on).gerund +
                         " needs a token: set HACHI_TOKEN or ~/.config/hachi/token (an "
                         "admin makes one with `hachi token create`), or use the local "
                         "Unix socket";
      } else {
        *why = denied;
      }
    }
    return who.authenticated ? Verdict::kDenied : Verdict::kNoIdentity;
  };
  auto only_admins = [&] {
    if (IsAdmin(who)) return Verdict::kAllow;
    if (why == nullptr) return refuse("");
    const Phrase p = PhraseOf(action, on);
    return refuse("only an admin may " + p.verb + (p.object.empty() ? "" : " ") +
                  p.object + " ([auth] admins, docs/config.md)");
  };
  // A job's credential lives in the job's environment, where a leak (an output file
  // others can read, a core dump) hands it to someone else: it acts for its job, not
  // for the job's owner.
  if (who.job != 0 && action != Action::kHealth && action != Action::kRead &&
      action != Action::kWrite && (on.job == nullptr || on.job->id != who.job)) {
    if (why == nullptr) return Verdict::kDenied;
    const Phrase p = PhraseOf(action, on);
    *why = "a job's credential (HACHI_JOB_TOKEN) acts only on its own job " +
           std::to_string(who.job) + ": it may not " + p.verb +
           (p.object.empty() ? "" : " ") + p.object +
           " (a token of the user's, `hachi token create`, may)";
    return Verdict::kDenied;
  }
  switch (action) {
    case Action::kHealth:
      return Verdict::kAllow;
    case Action::kRead:
      if (who.authenticated || anonymous_read_ == AnonymousRead::kAll ||
          (anonymous_read_ == AnonymousRead::kLocalhost && who.loopback)) {
        return Verdict::kAllow;
      }
      return refuse("");
    case Action::kWrite:
      return who.authenticated ? Verdict::kAllow : refuse("");
    case Action::kSubmit:
      if (!who.authenticated) return refuse("");
      return DecideSubmit(who, on, why);
    case Action::kCancel:
    case Action::kHold:
    case Action::kRelease:
    case Action::kSignal:
    case Action::kRequeue:
    case Action::kUpdate:
    case Action::kRunStep:
    case Action::kSeeJobDetails: {
      // The owner is the uid the job runs as (the kernel's word on the socket, the
      // token's on TCP), whatever name the caller gives; an anonymous caller owns
      // nothing.
      if (IsAdmin(who)) return Verdict::kAllow;
      if (who.authenticated && on.job != nullptr && who.uid == on.job->spec.uid) {
        return Verdict::kAllow;
      }
      if (why == nullptr || on.job == nullptr) return refuse("no job given");
      const Phrase p = PhraseOf(action, on);
      return refuse("job " + std::to_string(on.job->id) + " belongs to " +
                    on.job->req.user + "; " + Who(who) + " may not " + p.verb +
                    (action == Action::kSeeJobDetails ? " its environment, script and log"
                                                      : " it"));
    }
    case Action::kDrain:
    case Action::kResume:
    case Action::kIssueToken:
    case Action::kListTokens:
    case Action::kRevokeToken:
    case Action::kNegativeNice:
    case Action::kRaiseTimeLimit:
      return only_admins();
    case Action::kAgent:
      if (who.agent) return Verdict::kAllow;
      return refuse(
          "only agents may use the agent endpoints (they send the cluster "
          "secret); " +
          Who(who) + " is a user");
  }
  return refuse("unknown action");
}

Authorizer::Verdict Authorizer::DecideSubmit(const Caller& who, const Resource& on,
                                             std::string* why) const {
  // [[account]]: naming none, or one's own user name (the default account), always
  // works; any other must be listed, and the caller its member or an admin.
  const std::string& account = on.account.empty() ? who.user : on.account;
  if (!accounts_.empty() && account != who.user) {
    auto it = std::find_if(accounts_.begin(), accounts_.end(),
                           [&](const Account& a) { return a.name == account; });
    if (it == accounts_.end()) {
      if (why != nullptr)
        *why = "no account " + account + " in the config's [[account]] list";
      return Verdict::kNoSuchAccount;
    }
    if (!IsAdmin(who) && !Contains(it->members, who.user)) {
      if (why != nullptr) {
        *why = Who(who) + " may not submit under account " + account +
               ": not a member (its members are listed in the config's [[account]])";
      }
      return Verdict::kDenied;
    }
  }
  // The partitions' allow-lists, as sched::ValidateRequest reads them for `hachi sim`
  // (which answers the same refusal as a kInvalidArgument of its own): the server
  // refuses here first, with a 403.
  auto admits = [&](const PartitionAccess& p) {
    return Admits(p.users, who.user) && Admits(p.accounts, account);
  };
  if (on.partition.empty()) {
    if (partitions_.empty() ||
        std::any_of(partitions_.begin(), partitions_.end(), admits))
      return Verdict::kAllow;
    if (why != nullptr) {
      *why = Who(who) + " may not submit to any partition under account " + account +
             " (each lists its allowed users or accounts: `hachi partitions`, "
             "docs/config.md)";
    }
    return Verdict::kDenied;
  }
  auto p = std::find_if(partitions_.begin(), partitions_.end(),
                        [&](const PartitionAccess& x) { return x.name == on.partition; });
  if (p == partitions_.end() || admits(*p))
    return Verdict::kAllow;  // unknown: a 404 later
  if (why != nullptr) {
    std::string lists;
    if (!p->users.empty()) lists = "allowed users: " + Join(p->users);
    if (!p->accounts.empty()) {
      lists += (lists.empty() ? "" : "; ") + std::string("allowed accounts: ") +
               Join(p->accounts);
    }
    *why = Who(who) + " may not submit to partition " + p->name + " under account " +
           account + " (" + lists + ")";
  }
  return Verdict::kDenied;
}

}  // namespace hachi::server
