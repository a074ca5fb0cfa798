// Hostile and broken input against a real HttpServer on 127.0.0.1: for every
// endpoint, requests with malformed JSON, wrong types, unknown fields, absurd numbers,
// oversized fields and bodies, bad ids in paths, garbage bytes and truncated HTTP. Each
// must get a 4xx whose message names what is wrong, the server must answer the next
// request, and none of them may leave anything behind: after the table a good submit
// works and is the only job, and the node is as it registered.
//
// Requests go over a raw socket, byte for byte as written here: an HTTP client library
// would refuse to send half of them.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/http_client.h"
#include "api/protocol_json.h"
#include "api/request_limits.h"
#include "server/http_api.h"
#include "server/http_loop_testing.h"
#include "server/testing.h"

namespace hachi::server {
namespace {

using nlohmann::json;

const std::string kApi = api::kApiPrefix;
constexpr const char* kSecret = "cluster-secret-for-hostile-tests";

struct RawReply {
  int status = 0;  // 0: no reply (the server closed the connection)
  std::string body;
};

// Connects, writes `bytes` (stopping early when the server has answered, as it does
// with a 413 before the body) and reads to the end; requests say "Connection: close".
// `torn`: then half-closes, as a client that died mid-request. (Not for the others:
// httplib answers nobody whose connection reads as closed.)
RawReply SendRaw(int port, const std::string& bytes, bool torn = false) {
  RawReply reply;
  const int fd = rawhttp::ConnectTcp(port);
  if (fd < 0) return reply;
  size_t off = 0;
  while (off < bytes.size()) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) break;
    const ssize_t n = ::send(fd, bytes.data() + off,
                             std::min<size_t>(bytes.size() - off, 65536), MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  if (torn) ::shutdown(fd, SHUT_WR);
  timeval tv{15, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  // To the end of the reply (its Content-Length), or until the server closes.
  std::string in;
  char buf[65536];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) {
    in.append(buf, static_cast<size_t>(n));
    const size_t head = in.find("\r\n\r\n");
    const size_t len = in.find("Content-Length: ");
    if (head != std::string::npos && len != std::string::npos && len < head &&
        in.size() >= head + 4 + std::strtoul(in.c_str() + len + 16, nullptr, 10)) {
      break;
    }
  }
  ::close(fd);
  if (in.rfind("HTTP/1.", 0) == 0 && in.size() > 12)
    reply.status = std::atoi(in.c_str() + 9);
  const size_t end = in.find("\r\n\r\n");
  if (end != std::string::npos) reply.body = in.substr(end + 4);
  return reply;
}

// The error envelope's message ("" when the body is not one).
std::string MessageOf(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("error") ||
      !j["error"].contains("message") || !j["error"]["message"].is_string()) {
    return "";
  }
  return j["error"]["message"].get<std::string>();
}

struct Bad {
  std::string name;
  std::string request;  // raw bytes
  int status;           // the exact 4xx; 0: any 4xx or no reply at all (torn requests)
  std::string message;  // part of the error message; "" for httplib's own refusals
  bool torn = false;    // the client hangs up mid-request (SendRaw)
};

class HttpHostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    controller_ = testing::RunningController("n1");
    ASSERT_TRUE(controller_ != nullptr);
    Result<IssuedToken> t =
        controller_->tokens().Issue({"alice", 1000, 1000, false}, testing::kRoot);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    token_ = t->token;
    HttpOptions h;
    h.listen = "127.0.0.1:0";
    h.threads = 8;
    h.auth.cluster_secret = kSecret;
    // max_body_bytes stays at its default: the documented 4 MiB (docs/api.md).
    http_ = std::make_unique<HttpServer>(controller_.get(), h);
    ASSERT_TRUE(http_->Start().ok());
    port_ = http_->port();
    ASSERT_GT(port_, 0);
  }
  void TearDown() override {
    if (controller_) controller_->Stop();
    if (http_) http_->Stop();
  }

  // A well-formed request from alice (her token; the cluster secret for /agents/*).
  std::string Http(const std::string& method, const std::string& path,
                   const std::string& body = "") const {
    return method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" +
           "Authorization: Bearer " + token_ + "\r\n" + api::kClusterSecretHeader + ": " +
           kSecret + "\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }

  std::vector<Bad> Table() const;

  std::unique_ptr<Controller> controller_;
  std::unique_ptr<HttpServer> http_;
  int port_ = 0;
  std::string token_;
};

std::vector<Bad> HttpHostileTest::Table() const {
  const std::string jobs = kApi + "/jobs";
  const std::string reg = kApi + "/agents/register";
  const std::string health = kApi + "/agents/n1/health";
  const std::string exits = kApi + "/agents/n1/exits";
  const std::string topo = R"("topology":{"gpus":[]})";
  std::string many_tasks = R"({"req":{"gpus":1},"array_tasks":[)";
  for (int i = 0; i <= api::kMaxArrayTasks; ++i)
    many_tasks += (i ? "," : "") + std::to_string(i);
  many_tasks += "]}";
  std::string many_args = R"({"req":{"gpus":1},"spec":{"argv":[)";
  for (size_t i = 0; i <= api::kMaxArgvEntries; ++i)
    many_args += (i ? ",\"a\"" : "\"a\"");
  many_args += "]}}";
  std::string many_events = R"({"events":[)";
  for (size_t i = 0; i <= api::kMaxHealthEvents; ++i) {
    many_events += std::string(i ? "," : "") + R"({"gpu":0,"kind":"xid","fault":"info"})";
  }
  many_events += "]}";
  const std::string big_script(2 << 20, 'x');
  const std::string deep(100000, '[');
  // A TLS ClientHello's first bytes, NULs included: someone speaking HTTPS to HTTP.
  static constexpr char kGarbage[] =
      "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n";
  const std::string nul_body("{\"req\":\x00{}}", 11);

  return {
      // ---- POST /jobs: form ----
      {"SubmitNotJson", Http("POST", jobs, "{\"req\":"), 400,
       "submit: the body is not valid JSON"},
      {"SubmitEmpty", Http("POST", jobs, ""), 400, "not valid JSON"},
      {"SubmitInvalidUtf8",
       Http("POST", jobs,
            R"({"req":{"gpus":1},"spec":{"name":")"
            "\xff\xfe\"}}"),
       400, "not valid JSON"},
      {"SubmitNulByte", Http("POST", jobs, nul_body), 400, "not valid JSON"},
      {"SubmitNotObject", Http("POST", jobs, "[1,2,3]"), 400,
       "submit: expected an object"},
      {"SubmitDeepNesting", Http("POST", jobs, deep), 400, "not valid JSON"},
      {"SubmitNoReq", Http("POST", jobs, "{}"), 400, "'req' (the resources) is missing"},
      {"SubmitUnknownTop", Http("POST", jobs, R"({"req":{},"priority":9})"), 400,
       "submit: unknown field 'priority'"},
      {"SubmitUnknownReq", Http("POST", jobs, R"({"req":{"gpuz":2}})"), 400,
       "submit.req.gpuz: unknown field"},
      {"SubmitUnknownSpec",
       Http("POST", jobs, R"({"req":{"gpus":1},"spec":{"cwd":"/"}})"), 400,
       "submit.spec.cwd: unknown field"},
      {"SubmitGpusString", Http("POST", jobs, R"({"req":{"gpus":"2"}})"), 400,
       "submit.req.gpus: expected an integer, got string"},
      {"SubmitGpusFloat", Http("POST", jobs, R"({"req":{"gpus":1.5}})"), 400,
       "submit.req.gpus: expected an integer, got number 1.5"},
      {"SubmitGpusHuge", Http("POST", jobs, R"({"req":{"gpus":99999999999999999999}})"),
       400, "submit.req.gpus: expected an integer"},
      {"SubmitGpusOverInt", Http("POST", jobs, R"({"req":{"gpus":4294967297}})"), 400,
       "submit.req.gpus: 4294967297 is out of range"},
      {"SubmitHoldString", Http("POST", jobs, R"({"req":{"gpus":1},"hold":"yes"})"), 400,
       "submit.hold: expected a boolean, got string"},
      {"SubmitArgvString",
       Http("POST", jobs, R"({"req":{"gpus":1},"spec":{"argv":"ls"}})"), 400,
       "submit.spec.argv: expected an array"},
      {"SubmitEnvNoEquals",
       Http("POST", jobs, R"({"req":{"gpus":1},"spec":{"env":["PATH"]}})"), 400,
       "submit.spec.env[0]: expected NAME=value"},
      {"SubmitDependencyKind",
       Http("POST", jobs,
            R"({"req":{"gpus":1,"dependencies":[{"kind":"after","job":1}]}})"),
       400, "submit.req.dependencies[0].kind: unknown dependency kind"},
      {"SubmitTaskString",
       Http("POST", jobs, R"({"req":{"gpus":1},"array_tasks":[1,"2"]})"), 400,
       "submit.array_tasks[1]: expected an integer, got string"},
      // ---- POST /jobs: absurd numbers ----
      {"SubmitNegativeGpus", Http("POST", jobs, R"({"req":{"gpus":-1}})"), 400,
       "submit.req.gpus: -1 GPUs on one node; at least 0"},
      {"SubmitTooManyGpus", Http("POST", jobs, R"({"req":{"gpus":65}})"), 400,
       "submit.req.gpus: 65 GPUs on one node; at most 64"},
      {"SubmitZeroNodes", Http("POST", jobs, R"({"req":{"gpus":1,"nodes":0}})"), 400,
       "submit.req.nodes: 0 nodes; at least 1"},
      {"SubmitTooManyNodes", Http("POST", jobs, R"({"req":{"gpus":8,"nodes":10001}})"),
       400, "submit.req.nodes: 10001 nodes; at most 10000"},
      // -1 is --mem=0, all of each node's memory.
      {"SubmitNegativeMemory",
       Http("POST", jobs, R"({"req":{"gpus":1,"memory_mib":-2}})"), 400,
       "submit.req.memory_mib: -2 MiB; at least -1"},
      {"SubmitMemoryOver64TiB",
       Http("POST", jobs, R"({"req":{"gpus":1,"memory_mib":67108865}})"), 400,
       "submit.req.memory_mib: 67108865 MiB; at most 67108864"},
      {"SubmitNegativeCpus", Http("POST", jobs, R"({"req":{"gpus":1,"cpus":-8}})"), 400,
       "submit.req.cpus: -8 CPUs; at least 0"},
      {"SubmitNegativeTime", Http("POST", jobs, R"({"req":{"gpus":1,"time_limit":-5}})"),
       400, "submit.req.time_limit: -5 s; at least -1"},
      {"SubmitTimeTwoYears",
       Http("POST", jobs, R"({"req":{"gpus":1,"time_limit":63072000}})"), 400,
       "submit.req.time_limit: 63072000 s; at most 31536000"},
      {"SubmitShareOutOfRange",
       Http("POST", jobs, R"({"req":{"gpus":1,"gpu_share_milli":1500}})"), 400,
       "submit.req.gpu_share_milli: 1500 thousandths; at most 999"},
      {"SubmitDependencyOnZero",
       Http("POST", jobs, R"({"req":{"gpus":1,"dependencies":[{"job":0}]}})"), 400,
       "submit.req.dependencies[0].job: 0; at least 1"},
      {"SubmitHugeArray", Http("POST", jobs, many_tasks), 400,
       "submit.array_tasks: 10001 tasks; at most 10000"},
      {"SubmitTaskIdHuge",
       Http("POST", jobs, R"({"req":{"gpus":1},"array_tasks":[1,2000000000]})"), 400,
       "submit.array_tasks[1]: 2000000000 (task id); at most 4000000"},
      {"SubmitTaskTwice", Http("POST", jobs, R"({"req":{"gpus":1},"array_tasks":[5,5]})"),
       400, "submit.array_tasks: task id 5 appears twice"},
      {"SubmitNegativeMaxRunning",
       Http("POST", jobs,
            R"({"req":{"gpus":1},"array_tasks":[1],"array_max_running":-1})"),
       400, "submit.array_max_running: -1; at least 0"},
      // ---- POST /jobs: sizes ----
      {"SubmitLongName",
       Http("POST", jobs,
            R"({"req":{"gpus":1},"spec":{"name":")" + std::string(300, 'n') + "\"}}"),
       400, "submit.spec.name: 300 bytes; at most 256"},
      {"SubmitLongPartition",
       Http("POST", jobs,
            R"({"req":{"gpus":1,"partition":")" + std::string(257, 'p') + "\"}}"),
       400, "submit.req.partition: 257 bytes; at most 256"},
      {"SubmitLongWorkdir",
       Http(
           "POST", jobs,
           R"({"req":{"gpus":1},"spec":{"workdir":"/)" + std::string(5000, 'd') + "\"}}"),
       400, "submit.spec.workdir: 5001 bytes; at most 4096"},
      {"SubmitNulInArgv",
       Http("POST", jobs, R"({"req":{"gpus":1},"spec":{"argv":["a\u0000b"]}})"), 400,
       "submit.spec.argv[0]: contains a NUL byte"},
      {"SubmitEmptyEnvName",
       Http("POST", jobs, R"({"req":{"gpus":1},"spec":{"env":["=x"]}})"), 400,
       "submit.spec.env[0]: an empty variable name"},
      {"SubmitManyArgs", Http("POST", jobs, many_args), 400,
       "submit.spec.argv: 4097 arguments; at most 4096"},
      {"SubmitBigScript",
       Http("POST", jobs,
            R"({"req":{"gpus":1},"spec":{"script":")" + big_script + "\"}}"),
       400, "submit.spec.script: 2097152 bytes; at most 1048576"},
      {"SubmitBodyOver4MiB",
       Http("POST", jobs,
            R"({"req":{"gpus":1},"spec":{"script":")" + std::string(5 << 20, 'x') +
                "\"}}"),
       413, "request body too large"},
      {"SubmitAnnouncesHugeBody",
       "POST " + jobs +
           " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer " +
           token_ + "\r\nContent-Length: 1000000000000\r\n\r\n",
       413, "request body too large"},
      // ---- job ids in paths ----
      {"GetJobNotANumber", Http("GET", jobs + "/abc"), 404, "no such endpoint"},
      {"GetJobIdTooLarge", Http("GET", jobs + "/99999999999999999999"), 400,
       "is too large"},
      {"GetJobMissing", Http("GET", jobs + "/42"), 404, "no job 42"},
      {"CancelJobMissing", Http("POST", jobs + "/42/cancel"), 404, "no job 42"},
      {"DeleteJobIdTooLarge", Http("DELETE", jobs + "/123456789012345678901"), 400,
       "is too large"},
      {"HoldJobNegative", Http("POST", jobs + "/-1/hold"), 404, "no such endpoint"},
      {"ReleaseJobMissing", Http("POST", jobs + "/7/release"), 404, "no job 7"},
      {"JobLogMissing", Http("GET", jobs + "/42/log"), 404, "42"},
      // ---- report: each bad parameter named ----
      {"ReportFromNotANumber", Http("GET", kApi + "/report?from=yesterday"), 400,
       "?from=yesterday: expected an integer"},
      {"ReportToNegative", Http("GET", kApi + "/report?to=-5"), 400, "?to=-5"},
      {"ReportFromAfterTo", Http("GET", kApi + "/report?from=200&to=100"), 400,
       "?from=200: must be before ?to=100"},
      {"ReportUnknownBy", Http("GET", kApi + "/report?by=cluster"), 400,
       "?by=cluster: expected account, user, accountuser, partition, nodegroup or pool"},
      {"ReportTopTooLarge", Http("GET", kApi + "/report?top=5000"), 400,
       "?top=5000: expected an integer from 0 to 1000"},
      // ---- nodes ----
      {"GetNodeMissing", Http("GET", kApi + "/nodes/nope"), 404, "no node nope"},
      {"GetNodeBadUtf8", Http("GET", kApi + "/nodes/%FF%FE"), 404, "no node"},
      {"DrainNotJson", Http("POST", kApi + "/nodes/n1/drain", "{reason"), 400,
       "drain: the body is not valid JSON"},
      {"DrainUnknownField", Http("POST", kApi + "/nodes/n1/drain", R"({"reasn":"fan"})"),
       400, "drain: unknown field 'reasn'"},
      {"DrainReasonNumber", Http("POST", kApi + "/nodes/n1/drain", R"({"reason":7})"),
       400, "drain.reason: expected a string, got number"},
      {"DrainLongReason",
       Http("POST", kApi + "/nodes/n1/drain",
            R"({"reason":")" + std::string(5000, 'r') + "\"}"),
       400, "drain.reason: 5000 bytes; at most 4096"},
      {"ResumeGpuOutOfRange", Http("POST", kApi + "/nodes/n1/resume", R"({"gpu":99})"),
       400, "resume.gpu: 99 is not a GPU index"},
      {"ResumeGpuString", Http("POST", kApi + "/nodes/n1/resume", R"({"gpu":"1"})"), 400,
       "resume.gpu: expected an integer, got string"},
      {"ResumeUnknownField", Http("POST", kApi + "/nodes/n1/resume", R"({"gpus":1})"),
       400, "resume: unknown field 'gpus'"},
      // ---- agents ----
      {"RegisterNotJson", Http("POST", reg, "{\"node\""), 400,
       "register: the body is not valid JSON"},
      {"RegisterNoTopology", Http("POST", reg, R"({"node":"n2"})"), 400,
       "register.topology"},
      {"RegisterUnknownField",
       Http("POST", reg, R"({"node":"n2","gpus":8,)" + topo + "}"), 400,
       "register: unknown field 'gpus'"},
      {"RegisterCpusString",
       Http("POST", reg, R"({"node":"n2","cpus":"8",)" + topo + "}"), 400,
       "register.cpus: expected an integer, got string"},
      {"RegisterEmptyNode", Http("POST", reg, R"({"node":"",)" + topo + "}"), 400,
       "register.node: empty"},
      {"RegisterSlashInNode", Http("POST", reg, R"({"node":"a/b",)" + topo + "}"), 400,
       "register.node: 'a/b' contains '/'"},
      {"RegisterNegativeMemory",
       Http("POST", reg, R"({"node":"n2","memory_mib":-1,)" + topo + "}"), 400,
       "register.memory_mib: -1 MiB; at least 0"},
      {"RegisterRunningZero",
       Http("POST", reg, R"({"node":"n2","running":[0],)" + topo + "}"), 400,
       "register.running[0]: 0; at least 1"},
      {"HealthNotJson", Http("POST", health, "]"), 400,
       "health: the body is not valid JSON"},
      {"HealthUnknownField", Http("POST", health, R"({"events":[],"gpus":[]})"), 400,
       "health: unknown field 'gpus'"},
      {"HealthEventsObject", Http("POST", health, R"({"events":{}})"), 400,
       "health.events: expected an array"},
      {"HealthBadGpu",
       Http("POST", health, R"({"events":[{"gpu":99,"kind":"xid","fault":"reset"}]})"),
       400, "health.events[0].gpu: 99 is not a GPU index"},
      {"HealthBadFault",
       Http("POST", health, R"({"events":[{"gpu":1,"kind":"xid","fault":"meh"}]})"), 400,
       "health.events[0].fault: 'meh' is not one of"},
      {"HealthTooManyEvents", Http("POST", health, many_events), 400,
       "health.events: 1001 events; at most 1000"},
      {"ExitsNotJson", Http("POST", exits, "{\"exits\":[{"), 400,
       "exits: the body is not valid JSON"},
      {"ExitsNotArray", Http("POST", exits, R"({"exits":{}})"), 400,
       "exits: expected an array"},
      {"ExitsUnknownKind",
       Http("POST", exits, R"({"exits":[{"job":1,"kind":"vanished"}]})"), 400,
       "exits[0].kind: unknown exit kind 'vanished'"},
      {"ExitsUnknownField", Http("POST", exits, R"({"exits":[{"job":1,"code":3}]})"), 400,
       "exits[0]: unknown field 'code'"},
      {"ExitsCodeString", Http("POST", exits, R"({"exits":[{"job":1,"exit_code":"3"}]})"),
       400, "exits[0].exit_code: expected an integer, got string"},
      {"ExitsLongMessage",
       Http("POST", exits,
            R"({"exits":[{"job":1,"message":")" + std::string(70000, 'm') + "\"}]}"),
       400, "exits[0].message: 70000 bytes; at most 65536"},
      {"ExitsUnknownAgent", Http("POST", kApi + "/agents/ghost/exits", R"({"exits":[]})"),
       404, "agent ghost is not registered"},
      // ---- tokens ----
      {"TokenNotJson", Http("POST", kApi + "/tokens", "{"), 400, "tokens: expected"},
      {"TokenUnknownField",
       Http("POST", kApi + "/tokens", R"({"user":"bob","root":true})"), 400,
       "tokens: field 'root' is unknown"},
      // ---- HTTP itself ----
      {"NoSuchEndpoint", Http("POST", kApi + "/jobz", "{}"), 404, "no such endpoint"},
      {"WebPathTraversal", Http("GET", "/web/../../etc/passwd"), 404, ""},
      {"GarbageBytes", std::string(kGarbage, sizeof kGarbage - 1), 400, ""},
      {"NotHttp", "HELLO\r\n\r\n", 400, ""},
      {"UnknownMethod",
       "BREW " + jobs + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 400, ""},
      {"BadContentLength",
       "POST " + jobs +
           " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer " +
           token_ + "\r\nContent-Length: abc\r\n\r\n{}",
       0, ""},
      {"LongUri", Http("GET", jobs + "?" + std::string(100000, 'q')), 414, ""},
      {"TruncatedHeaders", "POST " + jobs + " HTTP/1.1\r\nHost: 127.0", 0, "", true},
      {"TruncatedBody",
       "POST " + jobs +
           " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer " +
           token_ + "\r\nContent-Length: 100\r\n\r\n{\"req\":{\"gpus\":1}",
       0, "", true},
  };
}

TEST_F(HttpHostileTest, EveryEndpointRefusesBadInputAndKeepsServing) {
  const std::vector<Bad> table = Table();
  for (const Bad& b : table) {
    SCOPED_TRACE(b.name);
    const RawReply r = SendRaw(port_, b.request, b.torn);
    if (b.status != 0) {
      EXPECT_EQ(r.status, b.status) << r.body.substr(0, 300);
    } else {
      EXPECT_TRUE(r.status == 0 || (r.status >= 400 && r.status < 500))
          << r.status << " " << r.body.substr(0, 300);
    }
    if (!b.message.empty()) {
      EXPECT_NE(MessageOf(r.body).find(b.message), std::string::npos)
          << "got: " << r.body.substr(0, 300);
    }
    // The next client is served.
    EXPECT_EQ(SendRaw(port_, Http("GET", kApi + "/health")).status, 200);
  }
  EXPECT_GE(table.size(), 80u);

  // Nothing was stored or changed by any of them.
  EXPECT_TRUE(controller_->job_views().Jobs(true).empty());
  const std::vector<state::NodeStatus> nodes = controller_->cluster_views().Nodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].record.name, "n1");
  EXPECT_EQ(nodes[0].record.state, state::NodeState::kUp);
  EXPECT_TRUE(nodes[0].record.unhealthy.empty());

  // And a good request still works, and is the only job.
  const RawReply ok = SendRaw(
      port_,
      Http(
          "POST", kApi + "/jobs",
          R"({"req":{"gpus":2},"spec":{"argv":["/bin/true"],"workdir":"/tmp"},"hold":true})"));
  ASSERT_EQ(ok.status, 201) << ok.body;
  const std::vector<state::JobRecord> all = controller_->job_views().Jobs(true);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].req.gpus, 2);
  EXPECT_EQ(all[0].req.user, "alice");
}

// Bad requests arriving together from many clients while a good one keeps working.
TEST_F(HttpHostileTest, ConcurrentBadClientsDoNotStarveAGoodOne) {
  const std::vector<Bad> table = Table();
  std::vector<std::thread> bad;
  for (int t = 0; t < 4; ++t) {
    bad.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < table.size(); i += 4) {
        (void)SendRaw(port_, table[i].request, table[i].torn);
      }
    });
  }
  int served = 0;
  for (int i = 0; i < 20; ++i)
    served += SendRaw(port_, Http("GET", kApi + "/jobs")).status == 200;
  for (std::thread& t : bad) t.join();
  EXPECT_EQ(served, 20);
  EXPECT_TRUE(controller_->job_views().Jobs(true).empty());
}

}  // namespace
}  // namespace hachi::server
