// The Authorizer (server/authorizer.h): one table of every (role x action) pair with its
// expected answer, then the rules that depend on the object (accounts, partitions) and
// on the config (anonymous reads), and the messages. The HTTP tests (auth_test.cc,
// web_test.cc) check that the endpoints ask it.
#include "server/authorizer.h"

#include <gtest/gtest.h>

#include <array>
#include <set>
#include <string>

#include "config/cluster_config.h"

namespace hachi::server {
namespace {

constexpr StatusCode O = StatusCode::kOk;
constexpr StatusCode U = StatusCode::kUnauthenticated;   // HTTP 401
constexpr StatusCode D = StatusCode::kPermissionDenied;  // HTTP 403

Caller User(const std::string& name, uint32_t uid, bool admin = false) {
  Caller c;
  c.user = name;
  c.uid = uid;
  c.gid = uid;
  c.authenticated = true;
  c.admin = admin;
  return c;
}

// [auth] admins = ["dana"]; [[account]] vision = [bob]; partitions gpu8 (accounts:
// vision), mine (users: alice), open.
config::ClusterConfig Config() {
  config::ClusterConfig c;
  c.auth.admins = {"dana"};
  c.accounts = {{"vision", {"bob"}}};
  auto partition = [&](const std::string& name, std::vector<std::string> users,
                       std::vector<std::string> accounts) {
    config::PartitionConfig p;
    p.partition.name = name;
    p.partition.allowed_users = std::move(users);
    p.partition.allowed_accounts = std::move(accounts);
    c.partitions.push_back(std::move(p));
  };
  partition("gpu8", {}, {"vision"});
  partition("mine", {"alice"}, {});
  partition("open", {}, {});
  return c;
}

Authorizer Make(const config::ClusterConfig& c) {
  Result<Authorizer> a = Authorizer::FromConfig(&c);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? *a : Authorizer();
}

state::JobRecord AlicesJob() {
  state::JobRecord j;
  j.id = 7;
  j.req.user = "alice";
  j.spec.uid = 1000;
  j.spec.gid = 1000;
  return j;
}

// The object each action is asked about in the table: alice's job, a submit under
// account vision (to the first partition allowed), node n1, token ab12.
Resource On(Action a, const state::JobRecord& job) {
  switch (a) {
    case Action::kSubmit:
      return Resource::Submit("vision", "");
    case Action::kCancel:
    case Action::kHold:
    case Action::kRelease:
    case Action::kSeeJobDetails:
    case Action::kSignal:
    case Action::kRequeue:
    case Action::kUpdate:
    case Action::kRaiseTimeLimit:
    case Action::kRunStep:
      return Resource::Job(job);
    case Action::kDrain:
    case Action::kResume:
      return Resource::Node("n1");
    case Action::kRevokeToken:
      return Resource::Token("ab12");
    default:
      return {};
  }
}

struct RoleRow {
  const char* role;
  Caller who;
  // In Action order: health read write submit cancel hold release see_job_details
  // drain resume issue_token list_tokens revoke_token signal requeue negative_nice
  // update raise_time_limit run_step agent.
  std::array<StatusCode, kActionCount> want;
};

TEST(Authorizer, EveryRoleTimesEveryAction) {
  Caller anonymous_remote;
  anonymous_remote.user = "anonymous";
  Caller anonymous_loopback = anonymous_remote;
  anonymous_loopback.loopback = true;
  Caller claims_admin = User("root", 0, /*admin=*/true);
  claims_admin.authenticated = false;  // a claim, not a proof
  Caller agent;
  agent.agent = true;
  // Job credentials (HACHI_JOB_TOKEN): alice's for job 7 (the table's job), alice's
  // for another job of hers, bob's (a member of account vision) for his job 9.
  Caller own_job = User("alice", 1000);
  own_job.job = 7;
  Caller other_job = User("alice", 1000);
  other_job.job = 8;
  Caller members_job = User("bob", 1001);
  members_job.job = 9;

  // clang-format off
  const RoleRow rows[] = {
      // health read write submit cancel hold release see_job_details drain resume
      // issue_token list_tokens revoke_token signal requeue negative_nice update
      // raise_time_limit run_step agent (signal, requeue, update and run_step as
      // cancel):
      {"anonymous_remote",   anonymous_remote,        {O,U,U,U,U,U,U,U,U,U,U,U,U,U,U,U,U,U,U,U}},
      {"anonymous_loopback", anonymous_loopback,      {O,O,U,U,U,U,U,U,U,U,U,U,U,U,U,U,U,U,U,U}},
      {"unproven_admin",     claims_admin,            {O,U,U,U,U,U,U,U,U,U,U,U,U,U,U,U,U,U,U,U}},
      {"agent",              agent,                   {O,U,U,U,U,U,U,U,U,U,U,U,U,U,U,U,U,U,U,O}},
      {"user",               User("carol", 1002),     {O,O,O,D,D,D,D,D,D,D,D,D,D,D,D,D,D,D,D,D}},
      {"owner",              User("alice", 1000),     {O,O,O,D,O,O,O,O,D,D,D,D,D,O,O,D,O,D,O,D}},
      // The owner is the uid the job runs as, not a name the caller gives.
      {"owner_by_uid",       User("whoever", 1000),   {O,O,O,D,O,O,O,O,D,D,D,D,D,O,O,D,O,D,O,D}},
      {"name_not_uid",       User("alice", 1001),     {O,O,O,D,D,D,D,D,D,D,D,D,D,D,D,D,D,D,D,D}},
      {"account_member",     User("bob", 1001),       {O,O,O,O,D,D,D,D,D,D,D,D,D,D,D,D,D,D,D,D}},
      {"admin_token",        User("ops", 1100, true), {O,O,O,O,O,O,O,O,O,O,O,O,O,O,O,O,O,O,O,D}},
      {"root_on_socket",     User("root", 0, true),   {O,O,O,O,O,O,O,O,O,O,O,O,O,O,O,O,O,O,O,D}},
      {"admin_in_config",    User("dana", 1200),      {O,O,O,O,O,O,O,O,O,O,O,O,O,O,O,O,O,O,O,D}},
      // A job's credential: its own job as its owner may, nothing else (no submit).
      {"own_job_credential", own_job,                 {O,O,O,D,O,O,O,O,D,D,D,D,D,O,O,D,O,D,O,D}},
      {"other_job_credential", other_job,             {O,O,O,D,D,D,D,D,D,D,D,D,D,D,D,D,D,D,D,D}},
      {"member_job_credential", members_job,          {O,O,O,D,D,D,D,D,D,D,D,D,D,D,D,D,D,D,D,D}},
  };
  // clang-format on
  const Authorizer authorizer = Make(Config());
  const state::JobRecord job = AlicesJob();
  for (const RoleRow& r : rows) {
    for (int i = 0; i < kActionCount; ++i) {
      const Action a = static_cast<Action>(i);
      const Status s = authorizer.Authorize(r.who, a, On(a, job));
      EXPECT_EQ(s.code(), r.want[i])
          << r.role << " x " << ActionName(a) << ": " << s.ToString();
      EXPECT_EQ(authorizer.Allows(r.who, a, On(a, job)), s.ok())
          << r.role << " x " << ActionName(a) << ": Allows and Authorize disagree";
      if (!s.ok()) {
        EXPECT_FALSE(s.message().empty()) << r.role << " x " << ActionName(a);
      }
    }
  }
}

TEST(Authorizer, ActionNamesAreDistinct) {
  std::set<std::string_view> names;
  for (int i = 0; i < kActionCount; ++i) names.insert(ActionName(static_cast<Action>(i)));
  EXPECT_EQ(names.size(), static_cast<size_t>(kActionCount));
  EXPECT_EQ(names.count("?"), 0u);
}

struct SubmitRow {
  const char* name;
  Caller who;
  std::string account, partition;
  StatusCode want;
  const char* message;  // a part of the refusal's message
};

TEST(Authorizer, SubmitAccountsAndPartitions) {
  const SubmitRow rows[] = {
      {"member_in_its_partition", User("bob", 1001), "vision", "gpu8", O, ""},
      {"member_first_allowed", User("bob", 1001), "vision", "", O, ""},
      {"own_account_not_allowed_there", User("bob", 1001), "", "gpu8", D,
       "bob may not submit to partition gpu8 under account bob (allowed accounts: "
       "vision)"},
      {"not_a_member", User("alice", 1000), "vision", "open", D,
       "alice may not submit under account vision: not a member"},
      {"own_name_is_an_account", User("alice", 1000), "alice", "open", O, ""},
      {"unlisted_account_is_400", User("alice", 1000), "physics", "open",
       StatusCode::kInvalidArgument, "no account physics"},
      {"allowed_user", User("alice", 1000), "", "mine", O, ""},
      {"not_an_allowed_user", User("bob", 1001), "", "mine", D,
       "bob may not submit to partition mine under account bob (allowed users: alice)"},
      // A partition's lists are its policy: an admin uses any account, but the
      // partition still chooses whom it takes.
      {"admin_any_account", User("dana", 1200), "vision", "gpu8", O, ""},
      {"admin_not_in_the_list", User("dana", 1200), "", "mine", D,
       "dana may not submit to partition mine"},
      {"unknown_partition_is_validations", User("alice", 1000), "", "nope", O, ""},
      {"anonymous", Caller{}, "", "open", U, "submitting a job needs a token"},
  };
  const Authorizer authorizer = Make(Config());
  for (const SubmitRow& r : rows) {
    const Status s = authorizer.Authorize(r.who, Action::kSubmit,
                                          Resource::Submit(r.account, r.partition));
    EXPECT_EQ(s.code(), r.want) << r.name << ": " << s.ToString();
    EXPECT_NE(s.message().find(r.message), std::string::npos)
        << r.name << ": " << s.message();
  }

  // No partition the user may use at all: refused as the named ones are.
  config::ClusterConfig closed;
  config::PartitionConfig p;
  p.partition.name = "only-alice";
  p.partition.allowed_users = {"alice"};
  closed.partitions = {p};
  const Authorizer strict = Make(closed);
  EXPECT_TRUE(strict.Authorize(User("alice", 1000), Action::kSubmit, {}).ok());
  const Status none = strict.Authorize(User("bob", 1001), Action::kSubmit, {});
  EXPECT_EQ(none.code(), D) << none.ToString();
  EXPECT_NE(none.message().find("bob may not submit to any partition"), std::string::npos)
      << none.message();

  // Without a config: any account, any partition, no admins but the flagged ones.
  const Authorizer open;
  EXPECT_TRUE(open.Authorize(User("alice", 1000), Action::kSubmit,
                             Resource::Submit("vision", "gpu8"))
                  .ok());
  EXPECT_EQ(
      open.Authorize(User("dana", 1200), Action::kDrain, Resource::Node("n1")).code(), D);
  EXPECT_TRUE(
      open.Authorize(User("root", 0, true), Action::kDrain, Resource::Node("n1")).ok());
}

struct ReadRow {
  const char* name;
  const char* anonymous_read;
  bool authenticated, loopback;
  StatusCode want;
};

TEST(Authorizer, AnonymousReads) {
  const ReadRow rows[] = {
      {"localhost_from_loopback", "localhost", false, true, O},
      {"localhost_from_afar", "localhost", false, false, U},
      {"none_from_loopback", "none", false, true, U},
      {"none_with_a_token", "none", true, false, O},
      {"all_from_afar", "all", false, false, O},
      {"default_is_localhost", "", false, true, O},
  };
  for (const ReadRow& r : rows) {
    config::ClusterConfig c;
    c.auth.anonymous_read = r.anonymous_read;
    const Authorizer a = Make(c);
    Caller who = r.authenticated ? User("alice", 1000) : Caller{};
    who.loopback = r.loopback;
    const Status s = a.Authorize(who, Action::kRead, {});
    EXPECT_EQ(s.code(), r.want) << r.name << ": " << s.ToString();
    // Reading is never changing: an anonymous caller writes nothing, whatever the policy.
    if (!r.authenticated) {
      EXPECT_EQ(a.Authorize(who, Action::kWrite, {}).code(), U) << r.name;
    }
  }
  config::ClusterConfig bad;
  bad.auth.anonymous_read = "everyone";
  EXPECT_EQ(Authorizer::FromConfig(&bad).status().code(), StatusCode::kInvalidArgument);
}

// Messages name the action and the object; one wording per kind of refusal.
TEST(Authorizer, MessagesNameTheActionAndTheObject) {
  struct Row {
    const char* name;
    Caller who;
    Action action;
    const char* message;
  };
  const state::JobRecord job = AlicesJob();
  const Row rows[] = {
      {"owner_cancel", User("carol", 1002), Action::kCancel,
       "job 7 belongs to alice; carol may not cancel it"},
      {"owner_release", User("carol", 1002), Action::kRelease,
       "job 7 belongs to alice; carol may not release it"},
      {"owner_details", User("carol", 1002), Action::kSeeJobDetails,
       "job 7 belongs to alice; carol may not see its environment, script and log"},
      {"anonymous_hold", Caller{}, Action::kHold, "holding job 7 needs a token"},
      {"anonymous_write", Caller{}, Action::kWrite, "this request needs a token"},
      {"anonymous_read", Caller{}, Action::kRead, "reading needs a token"},
      {"admin_drain", User("carol", 1002), Action::kDrain,
       "only an admin may drain node n1 ([auth] admins"},
      {"admin_resume", Caller{}, Action::kResume, "resuming node n1 needs a token"},
      {"admin_issue", User("carol", 1002), Action::kIssueToken,
       "only an admin may create tokens"},
      {"admin_revoke", User("carol", 1002), Action::kRevokeToken,
       "only an admin may revoke token ab12"},
      {"agent_anonymous", Caller{}, Action::kAgent,
       "agent endpoints need the cluster secret"},
      {"agent_user", User("carol", 1002), Action::kAgent,
       "only agents may use the agent endpoints"},
  };
  const Authorizer authorizer = Make(Config());
  for (const Row& r : rows) {
    const Status s = authorizer.Authorize(r.who, r.action, On(r.action, job));
    EXPECT_NE(s.message().find(r.message), std::string::npos)
        << r.name << ": " << s.ToString();
  }
}

}  // namespace
}  // namespace hachi::server
