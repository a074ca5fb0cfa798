#include "api/record_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/record_json_nlohmann.h"
#include "state/testing.h"

namespace hachi::api {
namespace {

using nlohmann::json;
using state::JobRecord;
using state::JobState;
using state::NodeRecord;
using state::NodeState;
using state::NodeStatus;
using state::StepRecord;
using state::testing::FullJob;
using state::testing::FullNode;
using state::testing::FullStep;

std::vector<std::string> Keys(const json& j) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  return keys;
}

TEST(RecordJson, JobRoundTripKeepsEveryField) {
  const JobRecord job = FullJob(12);
  const std::string text = JobRecordToJson(job);
  Result<JobRecord> back = JobRecordFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(JobRecordToJson(*back), text);
  // Spot checks that the encoder wrote the value and the decoder read it back.
  EXPECT_EQ(back->req.dependencies.size(), 2u);
  EXPECT_EQ(back->req.dependencies[1].kind, sched::DependencyKind::kAfterAny);
  EXPECT_EQ(back->spec.env()[1].second, "a=b");
  EXPECT_EQ(back->spec.uid, 4000000000u);
  EXPECT_EQ(back->allocations[1].gpus, GpuSet::FromIndices({4, 6}));
  EXPECT_EQ(back->allocations[1].share_milli, 500);
  EXPECT_TRUE(back->held);
  EXPECT_TRUE(back->held_by_admin);
  EXPECT_EQ(back->requeues, 2);
  EXPECT_EQ(back->master_port, 29517);
  EXPECT_EQ(back->spec.argv().back(), "");
  EXPECT_EQ(back->spec.array_max_running, 10);
}

TEST(RecordJson, EncoderWritesTheDocumentedFields) {
  const json j = ToJson(FullJob(12));
  EXPECT_EQ(Keys(j).size(), 17u);          // .. gpu_memory_peak_mib, usage, held_by_admin
  EXPECT_EQ(Keys(j["req"]).size(), 25u);   // constraint .. nice, mig_profile
  EXPECT_EQ(Keys(j["spec"]).size(), 25u);  // ntasks .. open_append and 2 more
  EXPECT_EQ(Keys(j["allocations"][0]).size(), 7u);  // mig
  EXPECT_EQ(j["state"], "PENDING");
  EXPECT_EQ(j["allocations"][0]["gpus"], "0-3");
  EXPECT_EQ(j["req"]["dependencies"][0], json::parse(R"({"kind":"afterok","job":3})"));
  EXPECT_EQ(j["spec"]["env"][0], "PATH=/usr/bin:/bin");
  EXPECT_EQ(j["submit_time"], 1700000000);
  const json n = ToJson(FullNode("n1"));
  EXPECT_EQ(Keys(n).size(), 18u);  // four burn-in fields, gpu_sharing
  EXPECT_EQ(n["state"], "drained");
  EXPECT_EQ(n["unhealthy"], "0-3,6");
  EXPECT_EQ(n["unhealthy_reasons"]["6"], "ECC: double-bit error");
}

TEST(RecordJson, NodeRoundTrip) {
  const NodeRecord node = FullNode("gpu-017");
  const std::string text = NodeRecordToJson(node);
  Result<NodeRecord> back = NodeRecordFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(NodeRecordToJson(*back), text);
  EXPECT_EQ(back->topology_json, node.topology_json);  // kept byte for byte
  EXPECT_EQ(back->unhealthy_reasons, node.unhealthy_reasons);
  EXPECT_FALSE(NodeRecordFromJson(R"({"unhealthy_reasons": {"x": "y"}})").ok());
  EXPECT_FALSE(NodeRecordFromJson(R"({"unhealthy_reasons": {"1": 5}})").ok());
}

TEST(RecordJson, NodeStatusRoundTripIsFlat) {
  NodeStatus s;
  s.record = FullNode("n3");
  s.gpus = 8;
  s.gpu_model = "NVIDIA H100 80GB HBM3";
  s.gpu_memory_mib = 81559;
  s.interconnect = "nvswitch";
  s.partitions = {"gpu8", "debug"};
  s.features = {"h100", "ib", "nvlink"};
  s.gpu_jobs = {0, 12, 12, 0, 0, 0, 0, 99};
  s.gpu_share_milli = {0, 0, 0, 0, 0, 0, 0, 250};
  s.mig_devices = {{5, "1g.10gb", "MIG-5a", 9728, 0},
                   {5, "3g.40gb", "MIG-5b", 39424, 12}};
  s.gpu_util = {-1, 87, 91, -1, -1, -1, -1, 4};
  s.alloc_cpus = 12;
  s.alloc_memory_mib = 4096;
  s.stray_processes.push_back(
      {3, 4242, 20480, "alice", "python train.py", 0, 1764500000});
  s.gpu_sharing_events = {"2026-12-03T10:00:00Z MPS control daemon for GPU 7 exited"};
  s.clock_offset_ms = -42;
  s.pool = "burst-a";
  s.power = "resuming";
  const std::string text = NodeStatusToJson(s);
  const json j = json::parse(text);
  EXPECT_EQ(j["stray_processes"][0]["command"], "python train.py");
  EXPECT_EQ(Keys(j).size(), 35u);  // four burn-in fields, gpu_sharing(_events),
                                   // mig_devices, gpu_util, clock_offset_ms, pool, power
  EXPECT_EQ(j["power"], "resuming");
  EXPECT_EQ(j["mig_devices"][1]["job"], 12);
  EXPECT_EQ(j["features"], json({"h100", "ib", "nvlink"}));
  EXPECT_EQ(j["name"], "n3");
  Result<NodeStatus> back = NodeStatusFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(NodeStatusToJson(*back), text);
  EXPECT_EQ(back->record.name, "n3");
  EXPECT_EQ(back->gpu_jobs[7], 99);
  EXPECT_EQ(back->gpu_util, s.gpu_util);
  EXPECT_EQ(back->features, s.features);
  ASSERT_EQ(back->stray_processes.size(), 1u);
  EXPECT_EQ(back->stray_processes[0].pid, 4242u);
  EXPECT_EQ(back->gpu_sharing_events, s.gpu_sharing_events);
  EXPECT_EQ(back->record.gpu_sharing, "mps");
  EXPECT_FALSE(
      NodeStatusFromJson(R"({"stray_processes": [{"gpu": 1, "pidd": 2}]})").ok());
}

// A step's every field, its id made of job and step, its name's bytes exact.
TEST(RecordJson, StepRoundTripKeepsEveryField) {
  const StepRecord step = FullStep(12, 3);
  const std::string text = StepRecordToJson(step);
  const json j = json::parse(text);
  EXPECT_EQ(Keys(j).size(), 16u);
  EXPECT_EQ(j["id"], "12.3");
  EXPECT_EQ(j["state"], "FAILED");
  EXPECT_EQ(j["nodes"], json({"n2", "n1"}));
  EXPECT_EQ(j["name"], json({{"base64", "cHl0aG9uIP8="}}));
  Result<StepRecord> back = StepRecordFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(StepRecordToJson(*back), text);
  EXPECT_EQ(back->job, 12);
  EXPECT_EQ(back->job_start, 1700000100);
  EXPECT_EQ(back->step, 3);
  EXPECT_EQ(back->name, step.name);
  EXPECT_EQ(back->user, "alice");
  EXPECT_EQ(back->nodes, step.nodes);
  EXPECT_EQ(back->ntasks, 16);
  EXPECT_EQ(back->cpus, 48);
  EXPECT_EQ(back->gpus, 8);
  EXPECT_EQ(back->state, JobState::kFailed);
  EXPECT_EQ(back->start_time, 1700000110);
  EXPECT_EQ(back->end_time, 1700000190);
  EXPECT_EQ(back->exit_code, 137);
  EXPECT_EQ(back->signal, 9);
  EXPECT_EQ(back->reason, step.reason);

  // A list, as GET .../steps replies.
  StepRecord running = FullStep(12, 4);
  running.state = JobState::kRunning;
  running.end_time = 0;
  const std::string list = StepRecordsToJson({step, running});
  EXPECT_EQ(json::parse(list)["steps"][1]["id"], "12.4");
  Result<std::vector<StepRecord>> steps = StepRecordsFromJson(list);
  ASSERT_TRUE(steps.ok()) << steps.status().ToString();
  ASSERT_EQ(steps->size(), 2u);
  EXPECT_EQ(StepRecordsToJson(*steps), list);
  EXPECT_EQ(StepRecordsToJson({}), R"({"steps":[]})");
  steps = StepRecordsFromJson(R"({"steps":[],"next_after":3})");
  ASSERT_TRUE(steps.ok()) << steps.status().ToString();
  EXPECT_TRUE(steps->empty());
}

TEST(RecordJson, StepDecodeErrorsNameTheField) {
  const std::pair<const char*, const char*> steps[] = {
      {R"({"job":12,"step":0,"id":"12.1"})",
       "step.id: \"12.1\" is not this step's (12.0)"},
      {R"({"state":"DONE"})", "step.state: unknown job state \"DONE\""},
      {R"({"nodes":["n1",2]})", "step.nodes[1]: expected a string, got number"},
      {R"({"ntasks":"4"})", "step.ntasks: expected an integer, got string"},
      {R"({"tasks":4})", "step.tasks: unknown field"},
  };
  for (const auto& [text, message] : steps) {
    Result<StepRecord> r = StepRecordFromJson(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), message);
  }
  const std::pair<const char*, const char*> lists[] = {
      {"[]", "steps: expected an object, got array"},
      {"{", "steps: invalid JSON"},
      {R"({"jobs":[]})", "steps: the reply has no \"steps\""},
      {R"({"steps":{}})", "steps: expected an array, got object"},
      {R"({"steps":[{"job":1},{"job":"2"}]})",
       "steps[1].job: expected an integer, got string"},
  };
  for (const auto& [text, message] : lists) {
    Result<std::vector<StepRecord>> r = StepRecordsFromJson(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().message(), message);
  }
}

TEST(RecordJson, MissingFieldsTakeDefaults) {
  Result<JobRecord> job = JobRecordFromJson(R"({"id": 4, "req": {"gpus": 2}})");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->id, 4);
  EXPECT_EQ(job->req.gpus, 2);
  EXPECT_EQ(job->req.nodes, 1);
  EXPECT_EQ(job->spec.array_task_id, -1);
  EXPECT_EQ(job->state, JobState::kPending);
  Result<NodeRecord> node = NodeRecordFromJson("{}");
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node->state, NodeState::kDown);
}

TEST(RecordJson, StatesByNameOrCode) {
  Result<JobRecord> job = JobRecordFromJson(R"({"state": "ca"})");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->state, JobState::kCancelled);
}

struct BadCase {
  const char* name;
  const char* text;
  const char* error;  // the message must contain this
};

class JobDecodeErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(JobDecodeErrors, NameTheField) {
  Result<JobRecord> job = JobRecordFromJson(GetParam().text);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(job.status().message().find(GetParam().error), std::string::npos)
      << job.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, JobDecodeErrors,
    ::testing::Values(
        BadCase{"NotJson", "{", "job: invalid JSON"},
        BadCase{"NotAnObject", "[1]", "job: expected an object, got array"},
        BadCase{"StringForInt", R"({"req": {"gpus": "4"}})",
                "job.req.gpus: expected an integer, got string"},
        BadCase{"FloatForInt", R"({"req": {"gpus": 1.5}})",
                "job.req.gpus: expected an integer, got number 1.5"},
        BadCase{"BoolForInt", R"({"id": true})",
                "job.id: expected an integer, got boolean"},
        BadCase{"IntTooBig", R"({"req": {"gpus": 4294967296}})",
                "job.req.gpus: 4294967296 is out of range"},
        BadCase{"NegativeUid", R"({"spec": {"uid": -1}})",
                "job.spec.uid: -1 is out of range"},
        BadCase{"Int64TooBig", R"({"submit_time": 18446744073709551615})",
                "job.submit_time: 18446744073709551615 is out of range"},
        BadCase{"UnknownTopField", R"({"idd": 1})", "job.idd: unknown field"},
        BadCase{"UnknownNestedField", R"({"spec": {"cwd": "/"}})",
                "job.spec.cwd: unknown field"},
        BadCase{"UnknownState", R"({"state": "DONE"})",
                "job.state: unknown job state \"DONE\""},
        BadCase{"StateNotString", R"({"state": 1})",
                "job.state: expected a string, got number"},
        BadCase{"BadGpuSet", R"({"allocations": [{"gpus": "0-x"}]})",
                "job.allocations[0].gpus:"},
        BadCase{"AllocationField", R"({"allocations": [{}, {"cpus": null}]})",
                "job.allocations[1].cpus: expected an integer, got null"},
        BadCase{"AllocationsNotArray", R"({"allocations": {}})",
                "job.allocations: expected an array, got object"},
        BadCase{"DependencyKind", R"({"req": {"dependencies": [{"kind": "after"}]}})",
                "job.req.dependencies[0].kind: unknown dependency kind"},
        BadCase{"DependencyField", R"({"req": {"dependencies": [{"id": 3}]}})",
                "job.req.dependencies[0].id: unknown field"},
        BadCase{"EnvWithoutEquals", R"({"spec": {"env": ["PATH"]}})",
                "job.spec.env[0]: expected NAME=value"},
        BadCase{"ArgvNotStrings", R"({"spec": {"argv": ["a", 2]}})",
                "job.spec.argv[1]: expected a string, got number"},
        BadCase{"HeldNotBool", R"({"held": 1})",
                "job.held: expected a boolean, got number"}),
    [](const ::testing::TestParamInfo<BadCase>& row) { return row.param.name; });

class NodeDecodeErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(NodeDecodeErrors, NameTheField) {
  Result<NodeStatus> node = NodeStatusFromJson(GetParam().text);
  ASSERT_FALSE(node.ok());
  EXPECT_NE(node.status().message().find(GetParam().error), std::string::npos)
      << node.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, NodeDecodeErrors,
    ::testing::Values(
        BadCase{"UnknownState", R"({"state": "idle"})", "node.state: unknown node state"},
        BadCase{"Unhealthy", R"({"unhealthy": [1]})",
                "node.unhealthy: expected a string, got array"},
        BadCase{"GpuJobs", R"({"gpu_jobs": [0, "x"]})",
                "node.gpu_jobs[1]: expected an integer, got string"},
        BadCase{"Unknown", R"({"record": {}})", "node.record: unknown field"}),
    [](const ::testing::TestParamInfo<BadCase>& row) { return row.param.name; });

TEST(RecordJson, FromJsonLeavesOutputUnchangedOnError) {
  sched::JobRequest req;
  req.gpus = 3;
  Status s = FromJson(json::parse(R"({"gpus": 5, "nodes": "x"})"), &req, "body.req");
  EXPECT_EQ(s.message(), "body.req.nodes: expected an integer, got string");
  EXPECT_EQ(req.gpus, 3);
}

// Bytes that are not UTF-8 became U+FFFD (a job from `d\xff` ran in
// `d\xef\xbf\xbd`). Now they are {"base64": ...} and come back exactly; UTF-8 values
// stay plain strings, so clients see what they always saw.
TEST(RecordJson, NonUtf8BytesRoundTripExactly) {
  JobRecord job = FullJob(1);
  job.spec.comment = "bad \xff byte";
  job.spec.set_script("#!/bin/sh\nprintf '\xfe\xff'\n");
  job.spec.workdir = "/home/a/d\xff";
  job.spec.set_argv({"/bin/echo", "\xc3", "plain"});
  job.spec.set_env({{"N\xff", "v\x80"}, {"OK", "caf\xc3\xa9"}});
  job.spec.stdout_path = "o\xff";
  job.spec.stderr_path = "e\xff";
  job.spec.name = "j\xff";
  const std::string text = JobRecordToJson(job);
  EXPECT_EQ(text.find("\xEF\xBF\xBD"), std::string::npos) << text;
  const json j = json::parse(text);
  EXPECT_EQ(j["spec"]["workdir"], json({{"base64", "L2hvbWUvYS9k/w=="}}));
  EXPECT_EQ(j["spec"]["argv"][2], "plain");
  EXPECT_EQ(j["spec"]["env"][1], "OK=caf\xc3\xa9");
  Result<JobRecord> back = JobRecordFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->spec.comment, job.spec.comment);
  EXPECT_EQ(back->spec.script(), job.spec.script());
  EXPECT_EQ(back->spec.workdir, job.spec.workdir);
  EXPECT_EQ(back->spec.argv(), job.spec.argv());
  EXPECT_EQ(back->spec.env(), job.spec.env());
  EXPECT_EQ(back->spec.stdout_path, job.spec.stdout_path);
  EXPECT_EQ(back->spec.stderr_path, job.spec.stderr_path);
  EXPECT_EQ(back->spec.name, job.spec.name);
}

// Text fields are never replaced either: not UTF-8 is refused, naming the field.
TEST(RecordJson, TextFieldsThatAreNotUtf8AreRefusedByName) {
  JobRecord job = FullJob(1);
  job.req.partition = "gpu\xff";
  Result<JobRecord> back = JobRecordFromJson(JobRecordToJson(job));
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().message(), "job.req.partition: not valid UTF-8 (4 bytes)");
  job = FullJob(1);
  job.spec.container_image = "img\xff";
  back = JobRecordFromJson(JobRecordToJson(job));
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().message(),
            "job.spec.container_image: not valid UTF-8 (4 bytes)");
  // The bytes form holding UTF-8 is text like any other.
  back = JobRecordFromJson(R"({"req":{"partition":{"base64":"Z3B1"}}})");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->req.partition, "gpu");
}

TEST(RecordJson, BytesFormIsStrict) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"spec":{"script":{"base64":"Z3B"}}})",
       "job.spec.script: base64: not valid base64 (RFC 4648, padded)"},
      {R"({"spec":{"script":{"base64":"Z3B1","more":1}}})",
       "job.spec.script: expected a string or {\"base64\": \"...\"}, got an object "
       "with other fields"},
      {R"({"spec":{"argv":[{"hex":"00"}]}})",
       "job.spec.argv[0]: expected a string or {\"base64\": \"...\"}, got an object "
       "with other fields"},
      {R"({"spec":{"env":[{"base64":"Tk9FUQ=="}]}})",
       "job.spec.env[0]: expected NAME=value, got \"NOEQ\""},
      {R"({"spec":{"workdir":7}})", "job.spec.workdir: expected a string, got number"},
  };
  for (const auto& [text, message] : cases) {
    Result<JobRecord> r = JobRecordFromJson(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().message(), message);
  }
}

// A client's field name is quoted cut, not whole.
TEST(RecordJson, AHugeUnknownFieldNameMakesAShortError) {
  const std::string name(3 << 20, 'x');
  Result<JobRecord> r = JobRecordFromJson("{\"" + name + "\": 1}");
  ASSERT_FALSE(r.ok());
  EXPECT_LT(r.status().message().size(), 1024u);
  EXPECT_EQ(r.status().message(), "job." + std::string(64, 'x') + "...: unknown field");
}

}  // namespace
}  // namespace hachi::api
