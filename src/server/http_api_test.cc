#include "server/http_api.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "api/http_client.h"
#include "api/protocol_json.h"
#include "core/testing/wait_for.h"
#include "report/gpu_report.h"
#include "server/testing.h"
#include "topo/topology_testing.h"

namespace hachi::server {
namespace {

using nlohmann::json;
using testing::MakeSubmit;

const std::string kApi = api::kApiPrefix;

// A Controller (loop running, memory store, one registered node) behind an HttpServer
// on 127.0.0.1 with a free port and on a Unix socket.
class HttpApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    controller_ = testing::RunningController("n1");
    ASSERT_TRUE(controller_ != nullptr);
    Result<IssuedToken> t =
        controller_->tokens().Issue({"alice", 1000, 1000, false}, testing::kRoot);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    alice_token_ = t->token;
    HttpOptions h;
    h.listen = "127.0.0.1:0";
    h.unix_socket = dir_.path() + "/hachi.sock";
    h.max_body_bytes = 64 << 10;
    h.threads = 8;
    h.auth.cluster_secret = kSecret;
    http_ = std::make_unique<HttpServer>(controller_.get(), h);
    ASSERT_TRUE(http_->Start().ok());
    ASSERT_GT(http_->port(), 0);
    client_ = Client(http_->url());
  }
  void TearDown() override {
    // Closed first: the server's Stop waits for open keep-alive connections (5 s).
    client_.reset();
    if (controller_) controller_->Stop();  // wakes long polls, then the server stops
    if (http_) http_->Stop();
  }

  // Over TCP alice, by her token; on the Unix socket whoever runs the test (the kernel's
  // word wins). The cluster secret too, for the agent endpoints.
  std::unique_ptr<api::HttpClient> Client(const std::string& address) const {
    Result<std::unique_ptr<api::HttpClient>> c = api::HttpClient::Create(address, 5000);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok()) return nullptr;
    (*c)->SetHeader("Authorization", "Bearer " + alice_token_);
    (*c)->SetHeader(kClusterSecretHeader, kSecret);
    return std::move(*c);
  }
  static constexpr const char* kSecret = "cluster-secret-for-tests";

  state::JobId Submit(api::HttpClient& c, const SubmitRequest& r) {
    Result<std::string> body =
        c.Call("POST", kApi + "/jobs", api::SubmitRequestToJson(r));
    EXPECT_TRUE(body.ok()) << body.status().ToString();
    if (!body.ok()) return 0;
    return json::parse(*body)["job_ids"][0].get<state::JobId>();
  }

  // The server answers health checks (after a bad request, too).
  void ExpectServing() {
    Result<std::string> r = client_->Call("GET", kApi + "/health");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
  }

  topo::TempDir dir_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<api::HttpClient> client_;
  std::string alice_token_;
};

TEST_F(HttpApiTest, SubmitListGetCancel) {
  const state::JobId id = Submit(*client_, MakeSubmit().Gpus(2).Hold());
  ASSERT_GT(id, 0);
  Result<std::string> list = client_->Call("GET", kApi + "/jobs");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  const json jobs = json::parse(*list)["jobs"];
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0]["id"], id);
  EXPECT_EQ(jobs[0]["req"]["user"], "alice") << "the caller comes from the token";

  Result<std::string> one = client_->Call("GET", kApi + "/jobs/" + std::to_string(id));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(json::parse(*one)["job"]["state"], "PENDING");

  ASSERT_TRUE(
      client_->Call("POST", kApi + "/jobs/" + std::to_string(id) + "/cancel").ok());
  one = client_->Call("GET", kApi + "/jobs/" + std::to_string(id));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(json::parse(*one)["job"]["state"], "CANCELLED");
  list = client_->Call("GET", kApi + "/jobs");
  EXPECT_TRUE(json::parse(*list)["jobs"].empty()) << "finished jobs only with ?all=1";
  list = client_->Call("GET", kApi + "/jobs?all=1");
  EXPECT_EQ(json::parse(*list)["jobs"].size(), 1u);

  // Cancelling twice: 400 with the reason.
  Result<std::string> again =
      client_->Call("DELETE", kApi + "/jobs/" + std::to_string(id));
  EXPECT_EQ(again.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(again.status().message().find("already ended"), std::string::npos);
}

// GET /jobs in pages: ids above ?after=, at most ?limit=, "next_after" while the page
// is full; a bad page parameter is a 400 naming it.
TEST_F(HttpApiTest, JobsListInPages) {
  std::vector<state::JobId> ids;
  for (int i = 0; i < 5; ++i)
    ids.push_back(Submit(*client_, MakeSubmit().Gpus(1).Hold()));
  ASSERT_TRUE(
      client_->Call("POST", kApi + "/jobs/" + std::to_string(ids[1]) + "/cancel").ok());
  std::vector<state::JobId> seen;
  state::JobId after = 0;
  int pages = 0;
  for (; pages < 10; ++pages) {
    Result<std::string> r =
        client_->Call("GET", kApi + "/jobs?all=1&limit=2&after=" + std::to_string(after));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const json j = json::parse(*r);
    for (const json& job : j["jobs"]) seen.push_back(job["id"].get<state::JobId>());
    if (!j.contains("next_after")) break;
    EXPECT_EQ(j["jobs"].size(), 2u);
    after = j["next_after"].get<state::JobId>();
  }
  EXPECT_EQ(seen, ids) << "every job once, in id order";
  EXPECT_EQ(pages, 2) << "pages of 2, 2 and 1";
  // Without ?all=1 the finished one is skipped, not counted.
  Result<std::string> active = client_->Call("GET", kApi + "/jobs?limit=2");
  ASSERT_TRUE(active.ok());
  const json first = json::parse(*active);
  ASSERT_EQ(first["jobs"].size(), 2u) << first.dump();
  EXPECT_EQ(first["jobs"][1]["id"], ids[2]);
  EXPECT_EQ(first["next_after"], ids[2]);
  for (const char* bad : {"?limit=-1", "?limit=abc", "?after=1x", "?limit=100001"}) {
    Result<std::string> r = client_->Call("GET", kApi + "/jobs" + bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find(bad[1] == 'l' ? "limit" : "after"),
              std::string::npos)
        << r.status().message();
  }
}

// GET /jobs?brief=1, the CLI's listings: no environment, a batch script only as a line
// saying there is one (a command job's stays empty); GET /jobs and /jobs/ID keep both.
TEST_F(HttpApiTest, BriefListLeavesOutEnvironmentsAndScripts) {
  SubmitRequest batch = MakeSubmit().Gpus(1).Hold();
  batch.spec.SetPayload(
      {"#!/bin/sh\necho the-script-body\n", {{"SECRET_ENV", "x"}}, batch.spec.argv()});
  const state::JobId batch_id = Submit(*client_, batch);
  SubmitRequest cmd = MakeSubmit().Gpus(1).Hold();
  cmd.spec.SetPayload({"", {{"SECRET_ENV", "y"}}, {"/bin/true"}});
  const state::JobId cmd_id = Submit(*client_, cmd);
  ASSERT_GT(cmd_id, batch_id);
  Result<std::string> brief = client_->Call("GET", kApi + "/jobs?brief=1");
  ASSERT_TRUE(brief.ok()) << brief.status().ToString();
  EXPECT_EQ(brief->find("SECRET_ENV"), std::string::npos) << *brief;
  EXPECT_EQ(brief->find("the-script-body"), std::string::npos) << *brief;
  const json jobs = json::parse(*brief)["jobs"];
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_TRUE(jobs[0]["spec"]["env"].empty());
  EXPECT_NE(jobs[0]["spec"]["script"].get<std::string>().find("GET /api/v1/jobs/ID"),
            std::string::npos)
      << "a batch job still shows it has a script";
  EXPECT_EQ(jobs[1]["spec"]["script"], "") << "a command job has none";
  EXPECT_EQ(jobs[1]["spec"]["argv"], json({"/bin/true"}));
  for (const std::string& full : {kApi + "/jobs", kApi + "/jobs?brief=0",
                                  kApi + "/jobs/" + std::to_string(batch_id)}) {
    Result<std::string> r = client_->Call("GET", full);
    ASSERT_TRUE(r.ok()) << full;
    EXPECT_NE(r->find("SECRET_ENV"), std::string::npos) << full;
  }
}

// A listing keeps a job's arguments up to 1 KiB and says how many it left out: an
// array's tasks share one argv, which a listing would repeat for each (500 tasks of 1 MB
// made `hachi queue` time out). GET /jobs/ID has them all.
TEST_F(HttpApiTest, BriefListKeepsTheArgumentsUpToABound) {
  SubmitRequest r = MakeSubmit().Gpus(1).Hold().Array({0, 1, 2}, 0);
  const std::vector<std::string> argv = {"/bin/echo", std::string(600, 'a'),
                                         std::string(600, 'b')};
  r.spec.set_argv(argv);
  const state::JobId first = Submit(*client_, r);
  Result<std::string> brief = client_->Call("GET", kApi + "/jobs?brief=1");
  ASSERT_TRUE(brief.ok()) << brief.status().ToString();
  const json jobs = json::parse(*brief)["jobs"];
  ASSERT_EQ(jobs.size(), 3u);
  for (const json& j : jobs) {
    EXPECT_EQ(j["spec"]["argv"],
              json({argv[0], argv[1],
                    "(1 argument not listed: GET /api/v1/jobs/ID has them)"}));
  }
  Result<std::string> one = client_->Call("GET", kApi + "/jobs/" + std::to_string(first));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(json::parse(*one)["job"]["spec"]["argv"], json(argv));
}

TEST_F(HttpApiTest, WaitFromLongPollsUntilTheStateChanges) {
  const state::JobId id = Submit(*client_, MakeSubmit().Gpus(1).Hold());
  const std::string path = kApi + "/jobs/" + std::to_string(id);
  // Held: nothing changes, the poll times out with the same state.
  auto t0 = std::chrono::steady_clock::now();
  Result<std::string> same = client_->Call("GET", path + "?wait_from=PD&wait_ms=200");
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(json::parse(*same)["job"]["state"], "PENDING");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(150));

  // Released on another connection while this one waits: the poll returns RUNNING.
  auto waiter = std::async(std::launch::async, [&] {
    auto c = Client(http_->url());
    return c->Call("GET", path + "?wait_from=pending&wait_ms=5000");
  });
  ASSERT_TRUE(WaitFor([&] { return http_->connection_stats().parked >= 1; }));  // waiting
  ASSERT_TRUE(client_->Call("POST", path + "/release").ok());
  t0 = std::chrono::steady_clock::now();
  Result<std::string> changed = waiter.get();
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_EQ(json::parse(*changed)["job"]["state"], "RUNNING");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(3000));

  Result<std::string> bad = client_->Call("GET", path + "?wait_from=sleepy");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("sleepy"), std::string::npos);
}

// GET /report: the defaults (the last 7 days, by account, top 10) and a
// grouping by name; a running job counts, unsampled, as not measured.
TEST_F(HttpApiTest, Report) {
  const state::JobId id = Submit(*client_, MakeSubmit().Gpus(2));
  ASSERT_GT(id, 0u);
  Result<std::string> r = client_->Call("GET", kApi + "/report");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Result<report::GpuReport> report = report::GpuReportFromJson(*r);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->by, report::ReportBy::kAccount);
  EXPECT_EQ(report->to - report->from, 7 * 86400);
  EXPECT_DOUBLE_EQ(report->total.measured_gpu_hours, 0);
  EXPECT_DOUBLE_EQ(report->total.gpu_hours, report->total.unmeasured_gpu_hours);
  r = client_->Call("GET", kApi + "/report?from=0&to=1000&by=nodegroup&top=0");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  report = report::GpuReportFromJson(*r);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->by, report::ReportBy::kNodeGroup);
  EXPECT_EQ(report->from, 0);
  EXPECT_EQ(report->to, 1000);
  EXPECT_TRUE(report->groups.empty());  // the job started long after 1970
}

// GET /pools: the window it priced (default: this month, UTC, to now), and a bad window
// refused by name. (Without [[pool]]s the list is empty.)
TEST_F(HttpApiTest, PoolsWindow) {
  Result<std::string> r = client_->Call("GET", kApi + "/pools");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  json j = json::parse(*r);
  const int64_t to = j["to"].get<int64_t>();
  const int64_t from = j["from"].get<int64_t>();
  EXPECT_LT(from, to);
  EXPECT_LE(to - from, 31 * 86400);
  EXPECT_EQ(from % 86400, 0) << "midnight UTC";
  const time_t f = static_cast<time_t>(from);
  struct tm tm = {};
  gmtime_r(&f, &tm);
  EXPECT_EQ(tm.tm_mday, 1);
  EXPECT_TRUE(j["pools"].empty());
  r = client_->Call("GET", kApi + "/pools?from=100&to=200");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  j = json::parse(*r);
  EXPECT_EQ(j["from"], 100);
  EXPECT_EQ(j["to"], 200);
  const struct {
    const char* query;
    const char* message;
  } bad[] = {{"?from=200&to=100", "?from=200: must be before ?to=100"},
             {"?from=abc", "from"},
             {"?to=-5", "to"}};
  for (const auto& b : bad) {
    Result<api::HttpResponse> res = client_->Request("GET", kApi + "/pools" + b.query);
    ASSERT_TRUE(res.ok());
    EXPECT_EQ(res->status, 400) << b.query << " " << res->body;
    EXPECT_NE(res->body.find(b.message), std::string::npos) << res->body;
  }
}

TEST_F(HttpApiTest, NotFound) {
  Result<api::HttpResponse> r = client_->Request("GET", kApi + "/nope");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "not_found");
  Result<std::string> job = client_->Call("GET", kApi + "/jobs/12345");
  EXPECT_EQ(job.status().code(), StatusCode::kNotFound);
  EXPECT_NE(job.status().message().find("12345"), std::string::npos);
  EXPECT_EQ(client_->Call("POST", kApi + "/jobs/12345/cancel").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(client_->Call("GET", kApi + "/nodes/nx").status().code(),
            StatusCode::kNotFound);
  ExpectServing();
}

struct BadBody {
  const char* name;
  const char* path;
  const char* body;
  const char* message;
};

class HttpBadRequestTest : public HttpApiTest,
                           public ::testing::WithParamInterface<BadBody> {};

TEST_P(HttpBadRequestTest, AnsweredWith400AndTheReason) {
  const BadBody& b = GetParam();
  Result<api::HttpResponse> r = client_->Request("POST", kApi + b.path, b.body);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 400) << r->body;
  const json j = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r->body;
  EXPECT_EQ(j["error"]["code"], "invalid_argument");
  EXPECT_NE(j["error"]["message"].get<std::string>().find(b.message), std::string::npos)
      << r->body;
  ExpectServing();
  EXPECT_GT(Submit(*client_, MakeSubmit().Hold()), 0);
}

INSTANTIATE_TEST_SUITE_P(
    All, HttpBadRequestTest,
    ::testing::Values(
        BadBody{"MalformedJson", "/jobs", "{\"req\": ", "not valid JSON"},
        BadBody{"UnknownField", "/jobs", R"({"req":{"gpus":1},"prio":1})",
                "unknown field 'prio'"},
        BadBody{"WrongType", "/jobs", R"({"req":{"gpus":"one"}})", "submit.req.gpus"},
        BadBody{"RegisterMalformed", "/agents/register", "nope", "not valid JSON"},
        BadBody{"ExitsWrongKind", "/agents/n1/exits",
                R"({"exits":[{"job":1,"kind":"x"}]})", "unknown exit kind"},
        BadBody{"DrainBadBody", "/nodes/n1/drain", R"({"reason":5})", "reason"},
        BadBody{"ResumeBadGpu", "/nodes/n1/resume", R"({"gpu":"3"})", "resume"},
        BadBody{"ResumeUnknownField", "/nodes/n1/resume", R"({"gpus":3})", "resume"},
        BadBody{"HealthNotJson", "/agents/n1/health", "xid 79", "not valid JSON"},
        BadBody{"HealthBadFault", "/agents/n1/health",
                R"({"events":[{"gpu":0,"kind":"xid","xid":79,"fault":"bad"}]})",
                "health.events[0].fault"},
        BadBody{"HealthEventNotObject", "/agents/n1/health", R"({"events":[7]})",
                "health.events[0]: expected an object"},
        BadBody{"HealthGpuOutOfRange", "/agents/n1/health",
                R"({"events":[{"gpu":9,"kind":"xid","xid":79,"fault":"fatal"}]})",
                "has 8 GPUs"}),
    [](const ::testing::TestParamInfo<BadBody>& p) { return p.param.name; });

TEST_F(HttpApiTest, BodyOverTheLimitIs413) {
  const std::string big(100 << 10, 'x');
  Result<api::HttpResponse> r = client_->Request("POST", kApi + "/jobs", big);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 413);
  const json j = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r->body;
  EXPECT_EQ(j["error"]["code"], "invalid_argument");
  EXPECT_EQ(client_->Call("POST", kApi + "/jobs", big).status().code(),
            StatusCode::kInvalidArgument);
  ExpectServing();
}

TEST_F(HttpApiTest, UnsatisfiableIs422) {
  Result<api::HttpResponse> r = client_->Request(
      "POST", kApi + "/jobs", api::SubmitRequestToJson(MakeSubmit().Gpus(9)));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 422) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "unsatisfiable");
}

TEST_F(HttpApiTest, UnixSocketServesTheSameApi) {
  auto unix_client = Client("unix:" + dir_.path() + "/hachi.sock");
  ASSERT_NE(unix_client, nullptr);
  const state::JobId id = Submit(*unix_client, MakeSubmit().Hold());
  ASSERT_GT(id, 0);
  Result<std::string> one = client_->Call("GET", kApi + "/jobs/" + std::to_string(id));
  ASSERT_TRUE(one.ok()) << "both sockets reach one controller";
  Result<std::string> nodes = unix_client->Call("GET", kApi + "/nodes");
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  EXPECT_EQ(json::parse(*nodes)["nodes"][0]["name"], "n1");
}

// Over the Unix socket the caller is who the kernel says: headers naming someone else
// change nothing, and another local user cannot cancel the job (403).
TEST_F(HttpApiTest, UnixSocketCallerIsWhoTheKernelSays) {
  auto root = Client("unix:" + dir_.path() + "/hachi.sock");
  ASSERT_NE(root, nullptr);
  root->SetHeader("X-Hachi-User", "mallory");
  root->SetHeader("X-Hachi-Uid", "4242");
  const state::JobId id = Submit(*root, MakeSubmit().Hold());
  ASSERT_GT(id, 0);
  Result<state::JobRecord> job = controller_->job_views().Job(id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->spec.uid, ::geteuid()) << "the peer's uid, not the header's";
  EXPECT_NE(job->req.user, "mallory");
  if (::geteuid() != 0) GTEST_SKIP() << "another local user needs root to become one";
  // A child that becomes `nobody` asks to cancel it: refused. Only raw syscalls after
  // fork.
  ::chmod(dir_.path().c_str(), 0755);
  const std::string path = dir_.path() + "/hachi.sock";
  char request[256];
  std::snprintf(request, sizeof request,
                "POST %s/jobs/%lld/cancel HTTP/1.1\r\nHost: x\r\nX-Hachi-User: root\r\n"
                "Content-Length: 0\r\nConnection: close\r\n\r\n",
                kApi.c_str(), static_cast<long long>(id));
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ::_exit(3);
    if (::write(fd, request, std::strlen(request)) < 0) ::_exit(4);
    char reply[64] = {};
    if (::read(fd, reply, sizeof reply - 1) < 12) ::_exit(5);
    ::_exit(std::strncmp(reply + 9, "403", 3) == 0 ? 0 : 6);  // "HTTP/1.1 403 ..."
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1-5: could not ask; 6: not refused with 403";
  EXPECT_EQ(controller_->job_views().Job(id)->state, state::JobState::kPending);
  EXPECT_TRUE(root->Call("POST", kApi + "/jobs/" + std::to_string(id) + "/cancel").ok())
      << "its owner can";
}

TEST_F(HttpApiTest, AgentProtocolOverHttp) {
  const state::JobId id = Submit(*client_, MakeSubmit().Gpus(2));
  Result<std::string> work =
      client_->Call("GET", kApi + "/agents/n1/work?wait_ms=5000", "", 10000);
  ASSERT_TRUE(work.ok()) << work.status().ToString();
  Result<api::AgentWork> w = api::AgentWorkFromJson(*work);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(w->launch.size(), 1u);
  EXPECT_EQ(w->launch[0].job, id);
  api::JobExit e;
  e.job = id;
  ASSERT_TRUE(
      client_->Call("POST", kApi + "/agents/n1/exits", api::JobExitsToJson({e})).ok());
  Result<state::JobRecord> job = controller_->job_views().Job(id);
  EXPECT_EQ(job->state, state::JobState::kCompleted);
  // An unknown agent is told to register.
  work = client_->Call("GET", kApi + "/agents/nx/work?wait_ms=0");
  ASSERT_TRUE(work.ok());
  EXPECT_TRUE(api::AgentWorkFromJson(*work)->reregister);
  EXPECT_EQ(client_->Call("POST", kApi + "/agents/nx/exits", api::JobExitsToJson({e}))
                .status()
                .code(),
            StatusCode::kNotFound);
}

// The work poll's clock_ms is the agent's wall clock as it sent the poll: the node's
// offset, taken on the request's first run only (a run after its wait would count the
// wait as offset); none sent (an older agent): unknown; not a number: 400.
TEST_F(HttpApiTest, AgentPollsClockIsTheNodesOffset) {
  auto offset = [&]() -> std::optional<int64_t> {
    for (const state::NodeStatus& n : controller_->cluster_views().Nodes()) {
      if (n.record.name == "n1") return n.clock_offset_ms;
    }
    return std::nullopt;
  };
  const std::string work = kApi + "/agents/n1/work?wait_ms=";
  ASSERT_TRUE(client_->Call("GET", work + "0").ok());
  EXPECT_FALSE(offset().has_value()) << "an agent that does not say";
  auto now_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  ASSERT_TRUE(
      client_->Call("GET", work + "0&clock_ms=" + std::to_string(now_ms() + 3600000))
          .ok());
  ASSERT_TRUE(offset().has_value());
  EXPECT_NEAR(*offset(), 3600000, 5000);
  // Parked for 1.5 s, then answered at its deadline: still the offset at arrival.
  ASSERT_TRUE(
      client_->Call("GET", work + "1500&clock_ms=" + std::to_string(now_ms()), "", 10000)
          .ok());
  ASSERT_TRUE(offset().has_value());
  EXPECT_LT(std::abs(*offset()), 1000) << "the wait counted as offset";
  Result<std::string> bad = client_->Call("GET", work + "0&clock_ms=soon");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << bad.status().ToString();
}

TEST_F(HttpApiTest, SecondServerOnTheSamePortIsRefused) {
  HttpOptions h;
  h.listen = "127.0.0.1:" + std::to_string(http_->port());
  HttpServer second(controller_.get(), h);
  Status s = second.Start();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
}

// One request on a new connection that asks the server to close it, so that the server
// side ends in TIME_WAIT (as after a busy run). True when a reply came.
bool RequestAndServerCloses(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  const std::string req =
      "GET /api/v1/partitions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ok = ok && ::send(fd, req.data(), req.size(), 0) == static_cast<ssize_t>(req.size());
  char buf[4096];
  ssize_t got = 0, n = 0;
  while (ok && (n = ::recv(fd, buf, sizeof buf, 0)) > 0)
    got += n;  // until the server closes
  ::close(fd);
  return ok && got > 0;
}

// A server restarted on its port right after a busy run (TIME_WAIT sockets on the port)
// must start: `hachi server` restarts after a crash must not wait a minute.
TEST(HttpServerLifecycle, RestartOnTheSamePortDespiteTimeWait) {
  Result<std::unique_ptr<Controller>> c =
      Controller::Create(ControllerOptions{}, state::NewMemoryStore());
  ASSERT_TRUE(c.ok());
  HttpOptions h;
  h.listen = "127.0.0.1:0";
  h.threads = 2;
  int port = 0;
  {
    HttpServer first(c->get(), h);
    ASSERT_TRUE(first.Start().ok());
    port = first.port();
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(RequestAndServerCloses(port));
    first.Stop();
  }
  h.listen = "127.0.0.1:" + std::to_string(port);
  HttpServer second(c->get(), h);
  Status s = second.Start();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(RequestAndServerCloses(port));
  second.Stop();
}

// Start then Stop at once must not hang (the listen thread may not have begun).
TEST(HttpServerLifecycle, StopRightAfterStart) {
  Result<std::unique_ptr<Controller>> c =
      Controller::Create(ControllerOptions{}, state::NewMemoryStore());
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 20; ++i) {
    HttpOptions h;
    h.listen = "127.0.0.1:0";
    h.threads = 2;
    // A detached thread: when Stop hangs, the test fails instead of hanging too.
    auto started = std::make_shared<std::promise<Status>>();
    std::future<Status> done = started->get_future();
    Controller* controller = c->get();
    // The server is destroyed before the test hears back: its destructor (a second
    // Stop) uses the controller, which the test frees when it ends.
    std::thread([controller, h, started] {
      Status st;
      {
        HttpServer s(controller, h);
        st = s.Start();
        s.Stop();
      }
      started->set_value(st);
    }).detach();
    ASSERT_EQ(done.wait_for(std::chrono::seconds(3)), std::future_status::ready)
        << "Stop hung in round " << i;
    EXPECT_TRUE(done.get().ok());
  }
}

}  // namespace
}  // namespace hachi::server
