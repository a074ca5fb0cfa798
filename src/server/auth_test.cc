// Who is who, and who may do what: tokens issued, verified, revoked and kept
// across a restart; 401 without a believable caller over TCP; 403 for another user's
// job, for non-admins' admin actions, for accounts one is not a member of and for
// partitions whose allow-lists leave one out (the Authorizer's rules, table-tested in
// authorizer_test.cc, as the endpoints apply them); a forged user in the request body
// changes nothing; agent endpoints need the cluster secret; a job's paths are checked at
// submit.
#include "server/auth.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "api/http_client.h"
#include "api/protocol_json.h"
#include "api/record_json.h"
#include "server/browser_host.h"
#include "server/http_api.h"
#include "server/testing.h"
#include "state/store.h"
#include "topo/topology_testing.h"

namespace hachi::server {
namespace {

using nlohmann::json;
using testing::Harness;
using testing::kAlice;
using testing::kRoot;
using testing::MakeSubmit;

const std::string kApi = api::kApiPrefix;
const Caller kBob{"bob", 1001, 1001, true, false};

ControllerOptions WithConfig(const std::string& toml) {
  ControllerOptions o;
  Result<config::ClusterConfig> c = config::ParseClusterConfig(toml, "test.toml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (c.ok()) o.config = std::move(*c);
  return o;
}

// ---- Tokens in the Controller ----

TEST(Tokens, IssueVerifyRevokeAcrossRestarts) {
  topo::TempDir dir;
  const std::string db = dir.path() + "/hachi.db";
  std::string token, id;
  {
    Result<std::unique_ptr<state::Store>> store = state::OpenSqliteStore(db);
    ASSERT_TRUE(store.ok());
    Harness h({}, std::move(*store));
    EXPECT_EQ(h->tokens().Issue({"bob", 1001, 1001, false}, kAlice).status().code(),
              StatusCode::kPermissionDenied)
        << "only admins issue tokens";
    Result<IssuedToken> t = h->tokens().Issue({"bob", 1001, 1001, false}, kRoot);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    token = t->token;
    id = t->record.id;
    EXPECT_EQ(token.rfind("hachi_" + id + "_", 0), 0u) << token;
    EXPECT_EQ(token.size(), 6 + id.size() + 1 + 64u);
    EXPECT_EQ(t->record.created_by, "root");
    EXPECT_EQ(t->record.sha256.find(token), std::string::npos);
    Result<Caller> who = h->tokens().Authenticate(token);
    ASSERT_TRUE(who.ok()) << who.status().ToString();
    EXPECT_EQ(who->user, "bob");
    EXPECT_EQ(who->uid, 1001u);
    EXPECT_TRUE(who->authenticated);
    EXPECT_FALSE(who->admin);
    // One character off, a stranger's text, nothing: not a token.
    std::string off = token;
    off.back() = off.back() == '0' ? '1' : '0';
    EXPECT_EQ(h->tokens().Authenticate(off).status().code(),
              StatusCode::kUnauthenticated);
    EXPECT_EQ(h->tokens().Authenticate("hachi_" + id + "_").status().code(),
              StatusCode::kUnauthenticated);
    EXPECT_EQ(h->tokens().Authenticate("letmein").status().code(),
              StatusCode::kUnauthenticated);
    EXPECT_EQ(h->tokens().Authenticate("").status().code(), StatusCode::kUnauthenticated);
    // The passwd database fills uid/gid when they are not given; a user it lacks needs
    // them.
    Result<IssuedToken> r = h->tokens().Issue({"root", -1, -1, true}, kRoot);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->record.uid, 0u);
    EXPECT_EQ(
        h->tokens().Issue({"no-such-user-here", -1, -1, false}, kRoot).status().code(),
        StatusCode::kInvalidArgument);
    EXPECT_EQ(h->tokens().Issue({"a b", 1, 1, false}, kRoot).status().code(),
              StatusCode::kInvalidArgument);
    Result<std::vector<state::TokenRecord>> list = h->tokens().List(kRoot);
    ASSERT_TRUE(list.ok());
    EXPECT_EQ(list->size(), 2u);
    EXPECT_EQ(h->tokens().List(kBob).status().code(), StatusCode::kPermissionDenied);
  }
  {  // a restart keeps the token
    Result<std::unique_ptr<state::Store>> store = state::OpenSqliteStore(db);
    ASSERT_TRUE(store.ok());
    Harness h({}, std::move(*store));
    ASSERT_TRUE(h->tokens().Authenticate(token).ok());
    EXPECT_EQ(h->tokens().Revoke(id, kBob).code(), StatusCode::kPermissionDenied);
    ASSERT_TRUE(h->tokens().Revoke(id, kRoot).ok());
    EXPECT_EQ(h->tokens().Authenticate(token).status().code(),
              StatusCode::kUnauthenticated);
    EXPECT_EQ(h->tokens().Revoke(id, kRoot).code(), StatusCode::kNotFound);
  }
  {  // and the revocation
    Result<std::unique_ptr<state::Store>> store = state::OpenSqliteStore(db);
    ASSERT_TRUE(store.ok());
    Harness h({}, std::move(*store));
    EXPECT_EQ(h->tokens().Authenticate(token).status().code(),
              StatusCode::kUnauthenticated);
  }
}

// ---- Authorization in the Controller ----

TEST(Authorization, DrainAndResumeAreForAdmins) {
  Harness plain;
  plain.Register("n1");
  EXPECT_EQ(plain->nodes().Drain("n1", "mine", kAlice).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(plain->nodes().Resume("n1", -1, kAlice).code(),
            StatusCode::kPermissionDenied);
  Caller anonymous_root = kRoot;
  anonymous_root.authenticated = false;  // a claim, not a proof
  EXPECT_EQ(plain->nodes().Drain("n1", "", anonymous_root).code(),
            StatusCode::kUnauthenticated);
  // [auth] admins names alice: her own caller is enough.
  Harness h(WithConfig("[auth]\nadmins = [\"alice\"]\n"));
  h.Register("n1");
  EXPECT_TRUE(h->nodes().Drain("n1", "maintenance", kAlice).ok());
  EXPECT_TRUE(h->nodes().Resume("n1", -1, kAlice).ok());
  EXPECT_EQ(h->nodes().Drain("n1", "x", kBob).code(), StatusCode::kPermissionDenied);
  // ... and she may change bob's jobs.
  Result<std::vector<state::JobId>> bobs = h->jobs().Submit(MakeSubmit().Hold(), kBob);
  ASSERT_TRUE(bobs.ok());
  EXPECT_TRUE(h->jobs().Cancel(bobs->front(), kAlice).ok());
}

TEST(Authorization, AccountMembers) {
  Harness h(
      WithConfig("[[account]]\nname = \"vision\"\nmembers = [\"bob\"]\n"
                 "[auth]\nadmins = [\"carol\"]\n"));
  h.Register("n1");
  struct Row {
    const char* name;
    Caller who;
    std::string account;
    StatusCode want;
  };
  const Caller carol{"carol", 1002, 1002, true, false};
  const Row rows[] = {
      {"member", kBob, "vision", StatusCode::kOk},
      {"not_a_member", kAlice, "vision", StatusCode::kPermissionDenied},
      {"own_name", kAlice, "alice", StatusCode::kOk},
      {"none_named", kAlice, "", StatusCode::kOk},
      {"unknown_account", kAlice, "physics", StatusCode::kInvalidArgument},
      {"admin", carol, "vision", StatusCode::kOk},
  };
  for (const Row& r : rows) {
    SubmitRequest req = MakeSubmit().Hold();
    req.req.account = r.account;
    Result<std::vector<state::JobId>> ids = h->jobs().Submit(req, r.who);
    EXPECT_EQ(ids.ok() ? StatusCode::kOk : ids.status().code(), r.want)
        << r.name << ": " << (ids.ok() ? "ok" : ids.status().ToString());
  }
  // No [[account]] at all: any account name goes, as before.
  Harness open;
  open.Register("n1");
  SubmitRequest req = MakeSubmit().Hold();
  req.req.account = "vision";
  EXPECT_TRUE(open->jobs().Submit(req, kAlice).ok());
}

TEST(Authorization, ForgedUserInTheBodyChangesNothing) {
  Harness h;
  h.Register("n1");
  SubmitRequest req = MakeSubmit().Hold();
  req.req.user = "root";
  req.spec.uid = 0;
  req.spec.gid = 0;
  Result<std::vector<state::JobId>> ids = h->jobs().Submit(req, kBob);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  const state::JobRecord job = h.Job(ids->front());
  EXPECT_EQ(job.req.user, "bob");
  EXPECT_EQ(job.spec.uid, 1001u);
  EXPECT_EQ(job.spec.gid, 1001u);
  EXPECT_EQ(h->jobs().Cancel(job.id, kAlice).code(), StatusCode::kPermissionDenied)
      << "still bob's, not root's nor alice's";
  Caller anonymous = kBob;
  anonymous.authenticated = false;
  EXPECT_EQ(h->jobs().Submit(MakeSubmit(), anonymous).status().code(),
            StatusCode::kUnauthenticated);
}

// ---- Submit checks ----

// GET /jobs/ID/usage refuses another user's job; the listing must not show its figures
// either.
TEST(Redaction, AnothersJobShowsNoUsage) {
  state::JobRecord j;
  j.spec.set_argv({"/bin/train", "--lr=0.1"});
  j.usage.samples = 40;
  j.usage.gpu_util = 12.5;
  j.usage.mem_peak_mib = 900;
  RedactJobDetails(&j);
  EXPECT_EQ(j.usage, state::UsageSummary{});
  EXPECT_EQ(api::JobRecordToJson(j).find("\"usage\""), std::string::npos);
}

TEST(SubmitChecks, PathsAndFields) {
  struct Row {
    const char* name;
    std::string workdir, out, err, job_name, env_name;
    const char* error;  // "" = accepted
  };
  const Row rows[] = {
      {"ok", "/home/alice/run", "logs/%j.out", "/home/alice/err-%j", "train", "PATH", ""},
      {"ok_empty_outputs", "/tmp", "", "", "", "X", ""},
      {"workdir_relative", "home/alice", "", "", "", "X",
       "workdir: 'home/alice' is not an absolute"},
      {"workdir_dotdot", "/home/alice/../bob", "", "", "", "X",
       "workdir: '/home/alice/../bob' has a '..'"},
      {"stdout_dotdot", "/home/alice", "../bob/x.out", "", "", "X",
       "stdout: '../bob/x.out' has a '..'"},
      {"stderr_dotdot_abs", "/home/alice", "", "/home/alice/../../etc/x", "", "X",
       "stderr:"},
      {"dotdot_file_is_fine", "/home/alice", "a..b.out", "", "", "X", ""},
      {"stdout_newline", "/home/alice", "x\nout", "", "", "X", "NUL or a newline"},
      {"name_with_slash", "/home/alice", "%x.out", "", "../../bob/x", "X", "name:"},
      {"name_dotdot", "/home/alice", "%x/o", "", "..", "X", "name:"},
      {"env_name_with_equals", "/tmp", "", "", "", "A=B",
       "env: 'A=B' is not a variable name"},
      {"env_name_empty", "/tmp", "", "", "", "", "env: '' is not a variable name"},
      {"workdir_too_long", "/" + std::string(5000, 'a'), "", "", "", "X", "at most 4096"},
  };
  for (const Row& r : rows) {
    state::JobSpec spec;
    spec.workdir = r.workdir;
    spec.stdout_path = r.out;
    spec.stderr_path = r.err;
    spec.name = r.job_name;
    spec.set_env({{r.env_name, "v"}});
    const Status s = CheckJobSpec(spec);
    if (std::string(r.error).empty()) {
      EXPECT_TRUE(s.ok()) << r.name << ": " << s.ToString();
    } else {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << r.name;
      EXPECT_NE(s.message().find(r.error), std::string::npos)
          << r.name << ": " << s.message();
    }
  }
  // The Controller applies them: a traversal is a 400 before anything is stored.
  Harness h;
  h.Register("n1");
  SubmitRequest req = MakeSubmit();
  req.spec.stdout_path = "/home/alice/../bob/steal.out";
  EXPECT_EQ(h->jobs().Submit(req, kAlice).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(h->job_views().Jobs(true).empty());
  // An image that is an option of the runtime is refused at submit.
  req = MakeSubmit();
  req.spec.container_image = "--user=0";
  const Status image = h->jobs().Submit(req, kAlice).status();
  EXPECT_EQ(image.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(image.message().find("container_image: '--user=0' starts with '-'"),
            std::string::npos)
      << image.message();
  EXPECT_TRUE(h->job_views().Jobs(true).empty());
}

TEST(AuthHelpers, LoopbackBearerAndTokenId) {
  EXPECT_TRUE(IsLoopback("127.0.0.1"));
  EXPECT_TRUE(IsLoopback("127.8.9.10"));
  EXPECT_TRUE(IsLoopback("::1"));
  EXPECT_TRUE(IsLoopback("::ffff:127.0.0.1"));
  EXPECT_FALSE(IsLoopback("10.0.0.1"));
  EXPECT_FALSE(IsLoopback("::ffff:10.0.0.1"));
  EXPECT_FALSE(IsLoopback(""));
  EXPECT_EQ(BearerToken("Bearer hachi_ab_cd"), "hachi_ab_cd");
  EXPECT_EQ(BearerToken("bearer  hachi_ab_cd "), "hachi_ab_cd");
  EXPECT_EQ(BearerToken("Basic YWxpY2U6eA=="), "");
  EXPECT_EQ(TokenId("hachi_0123abcd_ffff"), "0123abcd");
  EXPECT_EQ(TokenId("hachi__ffff"), "");
  EXPECT_EQ(TokenId("other_0123_ffff"), "");
  EXPECT_EQ(ParseAnonymousRead("all").status().ok(), true);
  EXPECT_FALSE(ParseAnonymousRead("everyone").ok());
}

// ---- Over HTTP ----

// A server with two users' tokens (alice, bob) and an admin's, on TCP and a Unix socket.
class AuthHttpTest : public ::testing::Test {
 protected:
  // `config`: the server's cluster.toml ([auth] anonymous_read, partitions, ...).
  void Start(const std::string& config = "") {
    Result<std::unique_ptr<Controller>> c =
        Controller::Create(WithConfig(config), state::NewMemoryStore());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    controller_ = std::move(*c);
    ASSERT_TRUE(controller_->nodes().Register(testing::MakeAgent("n1")).ok());
    controller_->Start();
    alice_ = Issue("alice", 1000, false);
    bob_ = Issue("bob", 1001, false);
    admin_ = Issue("ops", 1100, true);
    HttpOptions h;
    h.listen = "127.0.0.1:0";
    h.unix_socket = dir_.path() + "/hachi.sock";
    h.threads = 8;
    h.auth.cluster_secret = "the-cluster-secret";
    h.auth.browser_hosts = browser_hosts_;
    http_ = std::make_unique<HttpServer>(controller_.get(), h);
    ASSERT_TRUE(http_->Start().ok());
  }
  void TearDown() override {
    if (controller_) controller_->Stop();
    if (http_) http_->Stop();
  }
  std::string Issue(const std::string& user, int64_t uid, bool admin) {
    Result<IssuedToken> t = controller_->tokens().Issue({user, uid, uid, admin}, kRoot);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? t->token : "";
  }
  // A client over TCP sending `token` ("" = none) and any extra header.
  std::unique_ptr<api::HttpClient> Tcp(const std::string& token,
                                       const std::string& header = "",
                                       const std::string& value = "") {
    Result<std::unique_ptr<api::HttpClient>> c =
        api::HttpClient::Create(http_->url(), 5000);
    EXPECT_TRUE(c.ok());
    if (!token.empty()) (*c)->SetHeader("Authorization", "Bearer " + token);
    if (!header.empty()) (*c)->SetHeader(header, value);
    return std::move(*c);
  }
  state::JobId Submit(api::HttpClient& c, const std::string& body) {
    Result<std::string> r = c.Call("POST", kApi + "/jobs", body);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? json::parse(*r)["job_ids"][0].get<state::JobId>() : 0;
  }
  static int StatusOf(api::HttpClient& c, const std::string& method,
                      const std::string& path, const std::string& body = "") {
    Result<api::HttpResponse> r = c.Request(method, kApi + path, body);
    return r.ok() ? r->status : -1;
  }

  topo::TempDir dir_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<HttpServer> http_;
  std::string alice_, bob_, admin_;
  std::vector<std::string> browser_hosts_;  // HttpAuthOptions::browser_hosts
};

TEST_F(AuthHttpTest, NoOrBadTokenIs401) {
  Start();
  const std::string submit = api::SubmitRequestToJson(MakeSubmit().Hold());
  auto none = Tcp("");
  Result<api::HttpResponse> r = none->Request("POST", kApi + "/jobs", submit);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "unauthenticated");
  EXPECT_EQ(StatusOf(*Tcp("hachi_000000000000_" + std::string(64, '0')), "POST", "/jobs",
                     submit),
            401);
  EXPECT_EQ(
      StatusOf(*Tcp("", "Authorization", "Basic YWxpY2U6eA=="), "POST", "/jobs", submit),
      401);
  // The old headers are believed nowhere.
  auto claims = Tcp("", "X-Hachi-User", "alice");
  claims->SetHeader("X-Hachi-Uid", "1000");
  EXPECT_EQ(StatusOf(*claims, "POST", "/jobs", submit), 401);
  // A bad token is refused even for reads; no token reads from loopback (the default).
  EXPECT_EQ(StatusOf(*Tcp("hachi_0_0"), "GET", "/jobs"), 401);
  EXPECT_EQ(StatusOf(*none, "GET", "/jobs"), 200);
  EXPECT_EQ(StatusOf(*none, "GET", "/health"), 200);
  EXPECT_TRUE(controller_->job_views().Jobs(true).empty());
  // With a token, the same submit goes through.
  EXPECT_GT(Submit(*Tcp(alice_), submit), 0);
}

TEST_F(AuthHttpTest, AnonymousReadNone) {
  Start("[auth]\nanonymous_read = \"none\"\n");
  EXPECT_EQ(StatusOf(*Tcp(""), "GET", "/jobs"), 401);
  EXPECT_EQ(StatusOf(*Tcp(""), "GET", "/health"), 200);
  EXPECT_EQ(StatusOf(*Tcp(alice_), "GET", "/jobs"), 200);
}

// The issue's test: user A cannot cancel user B's job with A's token, and a forged user
// in the request body (or in the old headers) changes nothing.
TEST_F(AuthHttpTest, AliceCannotCancelBobsJob) {
  Start();
  auto bob = Tcp(bob_);
  const state::JobId id = Submit(*bob, api::SubmitRequestToJson(MakeSubmit().Hold()));
  ASSERT_GT(id, 0);
  auto alice = Tcp(alice_, "X-Hachi-User", "bob");
  Result<api::HttpResponse> r =
      alice->Request("POST", kApi + "/jobs/" + std::to_string(id) + "/cancel");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 403);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "permission_denied");
  EXPECT_EQ(StatusOf(*alice, "DELETE", "/jobs/" + std::to_string(id)), 403);
  EXPECT_EQ(StatusOf(*alice, "POST", "/jobs/" + std::to_string(id) + "/release"), 403);
  EXPECT_EQ(controller_->job_views().Job(id)->state, state::JobState::kPending);

  // Alice's submit claiming to be bob (uid 1001) and root in the body: hers all the same.
  json forged = json::parse(api::SubmitRequestToJson(MakeSubmit().Hold()));
  forged["req"]["user"] = "bob";
  forged["spec"]["uid"] = 0;
  forged["spec"]["gid"] = 0;
  Result<api::HttpResponse> sub = alice->Request("POST", kApi + "/jobs", forged.dump());
  ASSERT_TRUE(sub.ok());
  ASSERT_EQ(sub->status, 201) << sub->body;
  const state::JobId mine = json::parse(sub->body)["job_ids"][0].get<state::JobId>();
  Result<state::JobRecord> job = controller_->job_views().Job(mine);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->req.user, "alice");
  EXPECT_EQ(job->spec.uid, 1000u);
  EXPECT_EQ(job->spec.gid, 1000u);
  EXPECT_EQ(StatusOf(*bob, "POST", "/jobs/" + std::to_string(mine) + "/cancel"), 403);

  // Bob, and an admin, can.
  EXPECT_EQ(StatusOf(*bob, "POST", "/jobs/" + std::to_string(id) + "/release"), 200);
  EXPECT_EQ(StatusOf(*Tcp(admin_), "POST", "/jobs/" + std::to_string(id) + "/cancel"),
            200);
}

// Everyone sees every job; only its owner and admins what it runs with.
TEST_F(AuthHttpTest, OnlyTheOwnerSeesAJobsEnvironmentAndScript) {
  Start();
  SubmitRequest req = MakeSubmit().Hold();
  req.spec.set_env({{"AWS_SECRET_ACCESS_KEY", "s3cr3t"}});
  req.spec.set_script("#!/bin/sh\ncurl -H 'token: s3cr3t' ...\n");
  const state::JobId id = Submit(*Tcp(bob_), api::SubmitRequestToJson(req));
  ASSERT_GT(id, 0);
  const std::string path = kApi + "/jobs/" + std::to_string(id);
  auto seen = [&](const std::string& token, const std::string& p) {
    Result<std::string> r = Tcp(token)->Call("GET", p);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : "";
  };
  EXPECT_NE(seen(bob_, path).find("s3cr3t"), std::string::npos) << "the owner sees it";
  EXPECT_NE(seen(admin_, path).find("s3cr3t"), std::string::npos) << "an admin sees it";
  for (const std::string& other : {alice_, std::string()}) {
    const std::string one = seen(other, path);
    EXPECT_EQ(one.find("s3cr3t"), std::string::npos) << one;
    EXPECT_NE(one.find("not shown"), std::string::npos) << one;
    EXPECT_EQ(json::parse(one)["job"]["spec"]["env"].size(), 0u);
    const std::string list = seen(other, kApi + "/jobs");
    EXPECT_EQ(list.find("s3cr3t"), std::string::npos) << list;
    EXPECT_EQ(json::parse(list)["jobs"].size(), 1u) << "but the job itself is listed";
  }
}

// `hachi run -- echo SECRET` showed SECRET to anonymous readers and
// other users. Arguments are redacted as the environment is; a command job keeps its
// command's base name, and the listing says how many arguments are hidden.
TEST_F(AuthHttpTest, OnlyTheOwnerSeesAJobsArguments) {
  Start();
  SubmitRequest cmd = MakeSubmit().Hold();
  cmd.spec.set_script("");
  cmd.spec.set_argv({"/usr/bin/psql", "--db-password=s3cr3t", "-c", "select 1"});
  const state::JobId cmd_id = Submit(*Tcp(bob_), api::SubmitRequestToJson(cmd));
  ASSERT_GT(cmd_id, 0);
  SubmitRequest script = MakeSubmit().Hold();
  script.spec.set_script("#!/bin/sh\necho \"$1\"\n");
  script.spec.set_argv({"--token=s3cr3t"});
  const state::JobId script_id = Submit(*Tcp(bob_), api::SubmitRequestToJson(script));
  ASSERT_GT(script_id, 0);
  auto seen = [&](const std::string& token, const std::string& p) {
    Result<std::string> r = Tcp(token)->Call("GET", p);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : "";
  };
  const std::string cmd_path = kApi + "/jobs/" + std::to_string(cmd_id);
  const std::string script_path = kApi + "/jobs/" + std::to_string(script_id);
  for (const std::string& who : {bob_, admin_}) {
    const json one = json::parse(seen(who, cmd_path));
    EXPECT_EQ(one["job"]["spec"]["argv"], json(cmd.spec.argv())) << "owner or admin";
    EXPECT_NE(seen(who, script_path).find("--token=s3cr3t"), std::string::npos);
  }
  for (const std::string& other : {alice_, std::string()}) {
    SCOPED_TRACE(other.empty() ? "anonymous" : "alice");
    const std::string one = seen(other, cmd_path);
    EXPECT_EQ(one.find("s3cr3t"), std::string::npos) << one;
    EXPECT_EQ(json::parse(one)["job"]["spec"]["argv"],
              json({"psql", "(3 arguments not shown)"}));
    const std::string two = seen(other, script_path);
    EXPECT_EQ(two.find("s3cr3t"), std::string::npos) << two;
    EXPECT_EQ(json::parse(two)["job"]["spec"]["argv"], json({"(1 argument not shown)"}));
    const std::string list = seen(other, kApi + "/jobs");
    EXPECT_EQ(list.find("s3cr3t"), std::string::npos) << list;
    EXPECT_EQ(json::parse(list)["jobs"].size(), 2u);
  }
}

// A process someone started on a GPU by hand is on every reader's node list; its
// arguments (`--db-password=...`) only on an admin's.
TEST_F(AuthHttpTest, OnlyAdminsSeeAStrayProcesssArguments) {
  Start();
  api::AgentHealth report;
  report.has_processes = true;
  report.processes = {{7, 200, 20000, "alice", "/opt/bin/psql --db-password=s3cr3t", 0},
                      {6, 201, 100, "alice", "top", 0}};
  ASSERT_TRUE(controller_->nodes().ReportHealth("n1", report).ok());
  auto commands = [&](const std::string& token, const std::string& path) {
    Result<std::string> r = Tcp(token)->Call("GET", kApi + path);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<std::string> out;
    if (!r.ok()) return out;
    const json j = json::parse(*r);
    const json& node = j.contains("node") ? j["node"] : j["nodes"][0];
    for (const json& p : node["stray_processes"]) out.push_back(p["command"]);
    return out;
  };
  for (const std::string& path : {std::string("/nodes"), std::string("/nodes/n1")}) {
    EXPECT_EQ(commands(admin_, path),
              (std::vector<std::string>{"/opt/bin/psql --db-password=s3cr3t", "top"}));
    for (const std::string& other : {alice_, std::string()}) {
      EXPECT_EQ(commands(other, path),
                (std::vector<std::string>{"psql (arguments not shown)", "top"}))
          << (other.empty() ? "anonymous " : "alice ") << path;
    }
  }
}

TEST(BrowserHost, WhatNamesTheServer) {
  const std::vector<std::string> names = {"hachi.corp.example", "ctl1"};
  struct Row {
    const char* host;
    bool names_server;
  } rows[] = {
      {"127.0.0.1:8686", true},
      {"127.0.0.1", true},
      {"10.1.2.3:80", true},
      {"[::1]:8686", true},
      {"[fe80::1]", true},
      {"localhost:8686", true},
      {"LocalHost", true},
      {"dash.localhost:1", true},
      {"hachi.corp.example", true},
      {"HACHI.corp.example.:8686", true},
      {"ctl1:8686", true},
      {"evil.example:8686", false},
      {"localhost.evil.example", false},
      {"ctl1.evil.example", false},
      {"127.0.0.1.evil.example", false},
      {"", false},
      {"[::1", false},
      {"[::1]x", false},
      {"[evil.example]:80", false},
      {":8686", false},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(HostNamesServer(r.host, names), r.names_server) << r.host;
  }
}

// DNS rebinding: a page of another site, its name pointed at 127.0.0.1, reads as a
// loopback peer, which anonymous_read = "localhost" lets read; its browser still names
// that site in Host, and is refused. Browsers' requests by the server's own names,
// clients that are not browsers, and requests with a token are not.
TEST_F(AuthHttpTest, ABrowserReachingTheServerByAnotherSitesNameIsRefused) {
  browser_hosts_ = {"hachi.corp.example"};
  Start();
  const std::string port = std::to_string(http_->port());
  auto browser = [&](const std::string& host, const std::string& token = "") {
    auto c = Tcp(token, "Host", host);
    c->SetHeader("Sec-Fetch-Site", "same-origin");
    c->SetHeader("Sec-Fetch-Mode", "cors");
    return c;
  };
  Result<api::HttpResponse> r =
      browser("evil.example:" + port)->Request("GET", kApi + "/jobs", "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 403);
  EXPECT_NE(r->body.find("DNS rebinding"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("evil.example"), std::string::npos) << r->body;
  Result<api::HttpResponse> page =
      browser("evil.example:" + port)->Request("GET", "/", "");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->status, 403) << "the dashboard itself";
  auto origin_only = Tcp("", "Host", "evil.example:" + port);
  origin_only->SetHeader("Origin", "http://evil.example:" + port);
  EXPECT_EQ(StatusOf(*origin_only, "GET", "/jobs"), 403);

  for (const std::string& host :
       {"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port,
        "hachi.corp.example:" + port, std::string("Hachi.Corp.Example.")}) {
    EXPECT_EQ(StatusOf(*browser(host), "GET", "/jobs"), 200) << host;
  }
  EXPECT_EQ(StatusOf(*Tcp("", "Host", "evil.example"), "GET", "/jobs"), 200)
      << "not a browser: a CLI or a scraper, not asked";
  EXPECT_EQ(StatusOf(*browser("evil.example", alice_), "GET", "/jobs"), 200)
      << "a token is its own proof";
  EXPECT_EQ(StatusOf(*browser("evil.example"), "GET", "/health"), 200);
}

TEST_F(AuthHttpTest, AnonymousReadAll) {
  Start("[auth]\nanonymous_read = \"all\"\n");
  EXPECT_EQ(StatusOf(*Tcp(""), "GET", "/jobs"), 200);
  EXPECT_EQ(StatusOf(*Tcp(""), "POST", "/jobs", api::SubmitRequestToJson(MakeSubmit())),
            401)
      << "reading is not changing";
}

// A partition's allow-list refuses as an account does: 403 permission_denied, before the
// request is validated (it was a 400 from sched::ValidateRequest).
TEST_F(AuthHttpTest, PartitionAllowListIs403) {
  Start(
      "[[partition]]\nname = \"gpu8\"\nnodes = \"all\"\nallowed_users = [\"bob\"]\n"
      "[[partition]]\nname = \"team\"\nnodes = \"all\"\nallowed_accounts = "
      "[\"vision\"]\n"
      "[[account]]\nname = \"vision\"\nmembers = [\"bob\"]\n");
  struct Row {
    const char* name;
    std::string token, partition, account;
    int want;
    const char* code;
  };
  const Row rows[] = {
      {"allowed_user", bob_, "gpu8", "", 201, ""},
      {"not_an_allowed_user", alice_, "gpu8", "", 403, "permission_denied"},
      {"allowed_account", bob_, "team", "vision", 201, ""},
      {"own_account_not_allowed", bob_, "team", "", 403, "permission_denied"},
      {"not_a_member", alice_, "team", "vision", 403, "permission_denied"},
      {"no_partition_allows_alice", alice_, "", "", 403, "permission_denied"},
      {"anonymous", "", "gpu8", "", 401, "unauthenticated"},
  };
  for (const Row& r : rows) {
    SubmitRequest req = MakeSubmit().Hold();
    req.req.partition = r.partition;
    req.req.account = r.account;
    Result<api::HttpResponse> res =
        Tcp(r.token)->Request("POST", kApi + "/jobs", api::SubmitRequestToJson(req));
    ASSERT_TRUE(res.ok()) << r.name;
    EXPECT_EQ(res->status, r.want) << r.name << ": " << res->body;
    if (r.want != 201) {
      EXPECT_EQ(json::parse(res->body)["error"]["code"], r.code) << r.name;
    }
  }
  Result<api::HttpResponse> res = Tcp(alice_)->Request(
      "POST", kApi + "/jobs",
      api::SubmitRequestToJson(MakeSubmit().Hold().Partition("gpu8")));
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(json::parse(res->body)["error"]["message"],
            "alice may not submit to partition gpu8 under account alice (allowed users: "
            "bob)");
  EXPECT_EQ(controller_->job_views().Jobs(true).size(), 2u)
      << "bob's two, nothing of alice's";
}

TEST_F(AuthHttpTest, DrainByNonAdminIs403) {
  Start();
  EXPECT_EQ(StatusOf(*Tcp(alice_), "POST", "/nodes/n1/drain", R"({"reason":"x"})"), 403);
  EXPECT_EQ(StatusOf(*Tcp(alice_), "POST", "/nodes/n1/resume"), 403);
  EXPECT_EQ(StatusOf(*Tcp(""), "POST", "/nodes/n1/drain"), 401);
  EXPECT_EQ(StatusOf(*Tcp(admin_), "POST", "/nodes/n1/drain", R"({"reason":"x"})"), 200);
  EXPECT_EQ(StatusOf(*Tcp(admin_), "POST", "/nodes/n1/resume"), 200);
}

TEST_F(AuthHttpTest, AgentEndpointsNeedTheClusterSecret) {
  Start();
  const std::string work = "/agents/n1/work?wait_ms=0";
  EXPECT_EQ(StatusOf(*Tcp(""), "GET", work), 401);
  EXPECT_EQ(StatusOf(*Tcp(admin_), "GET", work), 401)
      << "a user's token is not an agent's";
  EXPECT_EQ(StatusOf(*Tcp("", kClusterSecretHeader, "guess"), "GET", work), 401);
  EXPECT_EQ(StatusOf(*Tcp("", kClusterSecretHeader, "the-cluster-secret"), "GET", work),
            200);
  EXPECT_EQ(StatusOf(*Tcp("", kClusterSecretHeader, "the-cluster-secret"), "POST",
                     "/agents/register",
                     api::AgentRegistrationToJson(testing::MakeAgent("n9"))),
            200);
  // Also on the Unix socket: root there is a user, not an agent.
  Result<std::unique_ptr<api::HttpClient>> local =
      api::HttpClient::Create("unix:" + dir_.path() + "/hachi.sock", 5000);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(StatusOf(**local, "GET", work), 401);
  // And the secret is no user: it cannot submit.
  EXPECT_EQ(StatusOf(*Tcp("", kClusterSecretHeader, "the-cluster-secret"), "POST",
                     "/jobs", api::SubmitRequestToJson(MakeSubmit())),
            401);
}

TEST_F(AuthHttpTest, TokenEndpointsAreForAdmins) {
  Start();
  EXPECT_EQ(StatusOf(*Tcp(alice_), "POST", "/tokens", R"({"user":"alice","admin":true})"),
            403);
  EXPECT_EQ(StatusOf(*Tcp(alice_), "GET", "/tokens"), 403);
  auto admin = Tcp(admin_);
  Result<std::string> made =
      admin->Call("POST", kApi + "/tokens", R"({"user":"dave","uid":1200,"gid":1200})");
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const json j = json::parse(*made);
  const std::string dave = j["token"];
  const std::string id = j["record"]["id"];
  EXPECT_FALSE(j["record"].contains("sha256"));
  Result<std::string> list = admin->Call("GET", kApi + "/tokens");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(json::parse(*list)["tokens"].size(), 4u);
  EXPECT_EQ(list->find(dave), std::string::npos) << "a listing never shows a token";
  EXPECT_EQ(list->find("sha256"), std::string::npos);
  EXPECT_GT(Submit(*Tcp(dave), api::SubmitRequestToJson(MakeSubmit().Hold())), 0);
  EXPECT_EQ(StatusOf(*admin, "POST", "/tokens", R"({"user":"x","shell":"/bin/sh"})"),
            400);
  EXPECT_EQ(StatusOf(*Tcp(alice_), "DELETE", "/tokens/" + id), 403);
  EXPECT_EQ(StatusOf(*admin, "DELETE", "/tokens/" + id), 200);
  EXPECT_EQ(StatusOf(*Tcp(dave), "POST", "/jobs", api::SubmitRequestToJson(MakeSubmit())),
            401);
  // Root on the Unix socket is an admin without a token.
  Result<std::unique_ptr<api::HttpClient>> local =
      api::HttpClient::Create("unix:" + dir_.path() + "/hachi.sock", 5000);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(StatusOf(**local, "GET", "/tokens"), ::geteuid() == 0 ? 200 : 403);
}

// ---- TLS ----

// HTTPS with a certificate made here (openssl req -x509): a client that trusts it
// ($HACHI_CA_CERT) does a token-authenticated round trip; one that does not, or that
// speaks plain HTTP to the port, gets nothing.
TEST(Tls, RoundTripWithASelfSignedCertificate) {
  if (std::system("command -v openssl >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no openssl";
  topo::TempDir dir;
  const std::string cert = dir.path() + "/cert.pem", key = dir.path() + "/key.pem";
  const std::string make =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 "
      "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(make.c_str()), 0);
  Result<std::unique_ptr<Controller>> c = Controller::Create({}, state::NewMemoryStore());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->nodes().Register(testing::MakeAgent("n1")).ok());
  (*c)->Start();
  Result<IssuedToken> alice = (*c)->tokens().Issue({"alice", 1000, 1000, false}, kRoot);
  ASSERT_TRUE(alice.ok());
  HttpOptions h;
  h.listen = "127.0.0.1:0";
  h.threads = 4;
  h.tls_cert = cert;
  h.tls_key = key;
  HttpServer http(c->get(), h);
  const Status started = http.Start();
  if (started.code() == StatusCode::kUnavailable) GTEST_SKIP() << started.message();
  ASSERT_TRUE(started.ok()) << started.ToString();
  ASSERT_EQ(http.url().rfind("https://127.0.0.1:", 0), 0u) << http.url();

  ::setenv("HACHI_CA_CERT", cert.c_str(), 1);
  Result<std::unique_ptr<api::HttpClient>> client =
      api::HttpClient::Create(http.url(), 5000);
  ::unsetenv("HACHI_CA_CERT");
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  (*client)->SetHeader("Authorization", "Bearer " + alice->token);
  Result<std::string> sub = (*client)->Call(
      "POST", kApi + "/jobs", api::SubmitRequestToJson(MakeSubmit().Hold()));
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  const state::JobId id = json::parse(*sub)["job_ids"][0].get<state::JobId>();
  EXPECT_EQ((*c)->job_views().Job(id)->req.user, "alice");
  Result<std::string> list = (*client)->Call("GET", kApi + "/jobs");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(json::parse(*list)["jobs"].size(), 1u);

  // Without the CA the certificate is not trusted; plain HTTP is not spoken there.
  Result<std::unique_ptr<api::HttpClient>> untrusting =
      api::HttpClient::Create(http.url(), 2000);
  ASSERT_TRUE(untrusting.ok());
  EXPECT_FALSE((*untrusting)->Request("GET", kApi + "/health").ok());
  Result<std::unique_ptr<api::HttpClient>> plain =
      api::HttpClient::Create("http://127.0.0.1:" + std::to_string(http.port()), 2000);
  ASSERT_TRUE(plain.ok());
  Result<api::HttpResponse> r = (*plain)->Request("GET", kApi + "/health");
  EXPECT_TRUE(!r.ok() || r->status != 200);
  // A key that is not the certificate's is refused at start.
  HttpOptions wrong = h;
  wrong.tls_key = cert;
  HttpServer bad(c->get(), wrong);
  EXPECT_EQ(bad.Start().code(), StatusCode::kInvalidArgument);
  (*c)->Stop();
  http.Stop();
}

}  // namespace
}  // namespace hachi::server
