#include "api/request_limits.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "api/protocol_json.h"

namespace hachi::api {
namespace {

// A submit every check passes, and one change per row that one check refuses.
SubmitRequest Good() {
  SubmitRequest r;
  r.req.gpus = 8;
  r.req.partition = "gpu8";
  r.req.time_limit = 3600;
  r.spec.name = "train";
  r.spec.set_argv({"python", "train.py"});
  r.spec.workdir = "/home/alice";
  r.spec.set_env({{"PATH", "/usr/bin"}});
  return r;
}

struct LimitCase {
  std::string name;
  std::function<void(SubmitRequest&)> change;
  std::string error;  // part of the message; "" = accepted
  bool encoded =
      true;  // the encoder writes what the change set (checked through JSON too)
};

class SubmitLimitsTest : public ::testing::TestWithParam<LimitCase> {};

TEST_P(SubmitLimitsTest, RefusesNamingFieldAndLimit) {
  SubmitRequest r = Good();
  GetParam().change(r);
  const Status s = CheckSubmitLimits(r);
  if (GetParam().error.empty()) {
    EXPECT_TRUE(s.ok()) << s.ToString();
    return;
  }
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(GetParam().error), std::string::npos) << s.message();
  // The decoder applies the same checks: the server answers 400 with this message.
  if (!GetParam().encoded) return;
  Result<SubmitRequest> decoded = SubmitRequestFromJson(SubmitRequestToJson(r));
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().message(), s.message());
}

const std::string kMiB(1 << 20, 'x');

INSTANTIATE_TEST_SUITE_P(
    All, SubmitLimitsTest,
    ::testing::Values(
        LimitCase{"Good", [](SubmitRequest&) {}, ""},
        LimitCase{"Unlimited", [](SubmitRequest& r) { r.req.time_limit = -1; }, ""},
        LimitCase{"BigGang",
                  [](SubmitRequest& r) {
                    r.req.nodes = 10000;
                    r.req.gpus_per_node = 64;
                    r.req.gpus = 640000;
                  },
                  ""},
        LimitCase{"NegativeGpus", [](SubmitRequest& r) { r.req.gpus = -1; },
                  "submit.req.gpus: -1 GPUs on one node; at least 0"},
        LimitCase{"TooManyGpus", [](SubmitRequest& r) { r.req.gpus = 65; },
                  "submit.req.gpus: 65 GPUs on one node; at most 64"},
        LimitCase{"TooManyGpusPerGangNode",
                  [](SubmitRequest& r) {
                    r.req.nodes = 2;
                    r.req.gpus = 130;
                  },
                  "submit.req.gpus: 130 GPUs on 2 nodes; at most 128"},
        LimitCase{"GpusPerNode", [](SubmitRequest& r) { r.req.gpus_per_node = 100; },
                  "submit.req.gpus_per_node: 100 GPUs; at most 64"},
        LimitCase{"ZeroNodes", [](SubmitRequest& r) { r.req.nodes = 0; },
                  "submit.req.nodes: 0 nodes; at least 1"},
        LimitCase{"TooManyNodes", [](SubmitRequest& r) { r.req.nodes = 10001; },
                  "submit.req.nodes: 10001 nodes; at most 10000"},
        LimitCase{"NegativeCpus", [](SubmitRequest& r) { r.req.cpus = -4; },
                  "submit.req.cpus: -4 CPUs; at least 0"},
        LimitCase{"CpusPerGpu", [](SubmitRequest& r) { r.req.cpus_per_gpu = 5000; },
                  "submit.req.cpus_per_gpu: 5000 CPUs; at most 1024"},
        // -1 is --mem=0, all of each node's memory.
        LimitCase{"NegativeMemory", [](SubmitRequest& r) { r.req.memory_mib = -2; },
                  "submit.req.memory_mib: -2 MiB; at least -1"},
        LimitCase{
            "MemoryOver64TiB",
            [](SubmitRequest& r) { r.req.memory_mib_per_gpu = (int64_t{64} << 20) + 1; },
            "submit.req.memory_mib_per_gpu: 67108865 MiB; at most 67108864"},
        LimitCase{"NegativeTime", [](SubmitRequest& r) { r.req.time_limit = -2; },
                  "submit.req.time_limit: -2 s; at least -1"},
        LimitCase{"TimeOverAYear",
                  [](SubmitRequest& r) { r.req.time_limit = 366 * kDay; },
                  "submit.req.time_limit: 31622400 s; at most 31536000"},
        LimitCase{"ShareOutOfRange",
                  [](SubmitRequest& r) { r.req.gpu_share_milli = 1000; },
                  "submit.req.gpu_share_milli: 1000 thousandths; at most 999"},
        LimitCase{"SingletonNamesNoJob",
                  [](SubmitRequest& r) {
                    r.req.dependencies = {{sched::DependencyKind::kSingleton, 0}};
                  },
                  ""},
        LimitCase{"DependencyOnJobZero",
                  [](SubmitRequest& r) {
                    r.req.dependencies = {{sched::DependencyKind::kAfterOk, 0}};
                  },
                  "submit.req.dependencies[0].job: 0; at least 1"},
        LimitCase{"LongPartition",
                  [](SubmitRequest& r) { r.req.partition.assign(300, 'p'); },
                  "submit.req.partition: 300 bytes; at most 256"},
        LimitCase{"LongName", [](SubmitRequest& r) { r.spec.name.assign(257, 'n'); },
                  "submit.spec.name: 257 bytes; at most 256"},
        LimitCase{"ManyArgs",
                  [](SubmitRequest& r) {
                    r.spec.set_argv(std::vector<std::string>(kMaxArgvEntries + 1, "a"));
                  },
                  "submit.spec.argv: 4097 arguments; at most 4096"},
        LimitCase{"ArgvBytes", [](SubmitRequest& r) { r.spec.set_argv({kMiB}); },
                  "submit.spec.argv: 1048577 bytes; at most 1048576"},
        LimitCase{"NulInArgv",
                  [](SubmitRequest& r) {
                    r.spec.set_argv({"python", std::string("a\0b", 3)});
                  },
                  "submit.spec.argv[1]: contains a NUL byte"},
        LimitCase{"ScriptBytes", [](SubmitRequest& r) { r.spec.set_script(kMiB + "x"); },
                  "submit.spec.script: 1048577 bytes; at most 1048576"},
        LimitCase{"ManyEnv",
                  [](SubmitRequest& r) {
                    r.spec.set_env(state::EnvList(kMaxEnvEntries + 1, {"A", "1"}));
                  },
                  "submit.spec.env: 4097 entries; at most 4096"},
        LimitCase{"EnvBytes",
                  [](SubmitRequest& r) {
                    r.spec.set_env({{"BIG", kMiB}});
                  },
                  "submit.spec.env: 1048581 bytes; at most 1048576"},
        LimitCase{"EnvEmptyName",
                  [](SubmitRequest& r) {
                    r.spec.set_env({{"", "x"}});
                  },
                  "submit.spec.env[0]: an empty variable name"},
        LimitCase{"LongWorkdir",
                  [](SubmitRequest& r) { r.spec.workdir.assign(5000, 'd'); },
                  "submit.spec.workdir: 5000 bytes; at most 4096"},
        LimitCase{
            "NulInOutput",
            [](SubmitRequest& r) { r.spec.stdout_path = std::string("/tmp/a\0", 7); },
            "submit.spec.stdout_path: contains a NUL byte"},
        LimitCase{"NegativeShm", [](SubmitRequest& r) { r.spec.shm_mib = -1; },
                  "submit.spec.shm_mib: -1 MiB; at least 0"},
        LimitCase{"NegativeNtasks", [](SubmitRequest& r) { r.spec.ntasks = -2; },
                  "submit.spec.ntasks: -2; at least 0"},
        LimitCase{"SignalOutOfRange", [](SubmitRequest& r) { r.spec.signal = 65; },
                  "submit.spec.signal: 65; at most 64"},
        LimitCase{"SignalTimeOutOfRange",
                  [](SubmitRequest& r) { r.spec.signal_before = 70000; },
                  "submit.spec.signal_before: 70000; at most 65535"},
        LimitCase{"TooManyTasks",
                  [](SubmitRequest& r) {
                    for (int i = 0; i <= kMaxArrayTasks; ++i) r.array_tasks.push_back(i);
                  },
                  "submit.array_tasks: 10001 tasks; at most 10000"},
        LimitCase{"TaskIdRange",
                  [](SubmitRequest& r) {
                    r.array_tasks = {1, 4000001};
                  },
                  "submit.array_tasks[1]: 4000001 (task id); at most 4000000"},
        LimitCase{"DuplicateTask",
                  [](SubmitRequest& r) {
                    r.array_tasks = {3, 1, 3};
                  },
                  "submit.array_tasks: task id 3 appears twice"},
        LimitCase{
            "MaxRunningWithoutTasks", [](SubmitRequest& r) { r.array_max_running = 2; },
            "submit.array_max_running: set without array_tasks", /*encoded=*/false}),
    [](const ::testing::TestParamInfo<LimitCase>& p) { return p.param.name; });

TEST(AgentLimits, Registration) {
  AgentRegistration r;
  r.node = "n1";
  EXPECT_TRUE(CheckRegistrationLimits(r).ok());
  r.node = "";
  EXPECT_EQ(CheckRegistrationLimits(r).message(), "register.node: empty");
  r.node = "a/b";
  EXPECT_EQ(CheckRegistrationLimits(r).message(), "register.node: 'a/b' contains '/'");
  r.node = "n1";
  r.memory_mib = -5;
  EXPECT_EQ(CheckRegistrationLimits(r).message(),
            "register.memory_mib: -5 MiB; at least 0");
  r.memory_mib = 0;
  r.running = {3, 0};
  EXPECT_EQ(CheckRegistrationLimits(r).message(), "register.running[1]: 0; at least 1");
}

TEST(AgentLimits, HealthAndExits) {
  AgentHealth h;
  h.events.resize(kMaxHealthEvents + 1);
  EXPECT_EQ(CheckHealthLimits(h).message(), "health.events: 1001 events; at most 1000");
  // An exit is refused only for its size: a refused exit blocks an agent's later ones.
  api::JobExit x;
  x.job = 1;
  x.exit_code = -7;
  EXPECT_TRUE(CheckExitLimits({x}).ok());
  x.message.assign(kMaxMessageBytes + 1, 'm');
  EXPECT_EQ(CheckExitLimits({x}).message(),
            "exits[0].message: 65537 bytes; at most 65536");
}

// The node actions' bodies: strict like the others (a typo is not silently no reason).
TEST(NodeActionBodies, DrainAndResume) {
  EXPECT_EQ(*DrainReasonFromJson(""), "");
  EXPECT_EQ(*DrainReasonFromJson(R"({"reason":"fan"})"), "fan");
  EXPECT_EQ(DrainReasonFromJson(R"({"reasn":"fan"})").status().message(),
            "drain: unknown field 'reasn'");
  EXPECT_EQ(DrainReasonFromJson(R"({"reason":3})").status().message(),
            "drain.reason: expected a string, got number");
  EXPECT_EQ(*ResumeGpuFromJson(""), -1);
  EXPECT_EQ(*ResumeGpuFromJson("{}"), -1);
  EXPECT_EQ(*ResumeGpuFromJson(R"({"gpu":3})"), 3);
  EXPECT_EQ(ResumeGpuFromJson(R"({"gpu":-1})").status().message(),
            "resume.gpu: -1 is not a GPU index (0..63)");
  EXPECT_EQ(ResumeGpuFromJson(R"({"gpu":"3"})").status().message(),
            "resume.gpu: expected an integer, got string");
  EXPECT_EQ(ResumeGpuFromJson(R"({"gpus":3})").status().message(),
            "resume: unknown field 'gpus'");
}

// A user's environment need not be UTF-8: the encoder carries it exactly (it
// replaced bad bytes before), never throws; display text (an error) is replaced.
TEST(Encoders, AnyBytes) {
  SubmitRequest r = Good();
  r.spec.set_env({{"LATIN1", "caf\xe9"}});
  Result<SubmitRequest> back = SubmitRequestFromJson(SubmitRequestToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->spec.env()[0].second, "caf\xe9");
  const Status s = StatusFromError(404, ErrorToJson(NotFound("no node \xff")));
  EXPECT_EQ(s.message(), "no node \xef\xbf\xbd");
}

}  // namespace
}  // namespace hachi::api
