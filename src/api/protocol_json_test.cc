#include "api/protocol_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/step_sizes.h"
#include "state/testing.h"

namespace hachi::api {
namespace {

using nlohmann::json;

// ---- Fixtures: every field away from its default, so a dropped field shows ----

SubmitRequest FullSubmit() {
  const state::JobRecord job = state::testing::FullJob(12);
  SubmitRequest r;
  r.req = job.req;
  r.spec = job.spec;
  r.hold = true;
  r.array_tasks = {1, 3, 5, 100};
  r.array_max_running = 2;
  return r;
}

AgentRegistration FullRegistration() {
  AgentRegistration r;
  r.node = "gpu-07";
  r.address = "10.1.2.3";
  r.topology_json = R"({"gpus":[{"index":0}],"links":[]})";
  r.cpus = 128;
  r.memory_mib = int64_t{2} << 20;
  r.agent_started = 1700000123;
  r.instance = "5f3a9c0e12ab34cd56ef7890";
  r.running = {4, 5};
  r.finished = {1, 2, 3};
  return r;
}

api::LaunchSpec FullLaunch(state::JobId id, int rank) {
  api::LaunchSpec l;
  l.job = id;
  l.spec = state::testing::FullJob(id).spec;
  l.user = "alice";
  l.partition = "gpu8";
  l.node = rank == 0 ? "n1" : "n2";
  l.gpus = GpuSet::FromIndices({0, 2, 5});
  l.cpus = 24;
  l.memory_mib = 65536;
  l.share_milli = 250;
  l.gpu_memory_mib = 8192;
  l.mig = {{"MIG-a", 2, 1, 0}};
  l.nodelist = {"n1", "n2"};
  l.node_addresses = {"10.0.0.1", "10.0.0.2"};
  l.node_rank = rank;
  l.master_port = 29512;
  l.gpus_per_node = 3;
  l.time_limit = 3600;
  l.kill_grace = 15;
  l.start_time = 1700000200;
  l.restart_count = 2;
  return l;
}

std::vector<api::JobExit> FullExits() {
  using api::ExitKind;
  return {{7, ExitKind::kExited, 3, 0, "", 1700000300},
          {8, ExitKind::kSignaled, 0, 9, "", 1700000301},
          {9, ExitKind::kTimeLimit, 0, 15, "", 1700000302},
          {10, ExitKind::kCancelled, 0, 15, "", 1700000303},
          {11, ExitKind::kOutOfMemory, 0, 9, "", 1700000304},
          {12, ExitKind::kLaunchFailed, 0, 0, "exec x: No such file", 1700000305}};
}

// ---- Round trips: encode, decode, encode again gives the same text ----

TEST(ProtocolJson, SubmitRoundTrip) {
  const SubmitRequest r = FullSubmit();
  const std::string text = SubmitRequestToJson(r);
  Result<SubmitRequest> back = SubmitRequestFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(SubmitRequestToJson(*back), text);
  EXPECT_TRUE(back->hold);
  EXPECT_EQ(back->array_tasks, (std::vector<int>{1, 3, 5, 100}));
  EXPECT_EQ(back->array_max_running, 2);
  EXPECT_EQ(back->req.gpus_per_node, 4);
  EXPECT_EQ(back->req.dependencies.size(), 2u);
  EXPECT_EQ(back->spec.env()[1].second, "a=b");
  EXPECT_TRUE(back->spec.requeue);
}

TEST(ProtocolJson, SubmitMinimal) {
  Result<SubmitRequest> r = SubmitRequestFromJson(R"({"req":{"gpus":2}})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->req.gpus, 2);
  EXPECT_FALSE(r->hold);
  EXPECT_TRUE(r->array_tasks.empty());
  EXPECT_EQ(r->array_max_running, 0);
}

TEST(ProtocolJson, RegistrationRoundTrip) {
  const AgentRegistration r = FullRegistration();
  const std::string text = AgentRegistrationToJson(r);
  Result<AgentRegistration> back = AgentRegistrationFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(AgentRegistrationToJson(*back), text);
  EXPECT_EQ(back->node, "gpu-07");
  EXPECT_EQ(back->address, "10.1.2.3");
  EXPECT_EQ(json::parse(back->topology_json), json::parse(r.topology_json));
  EXPECT_EQ(back->cpus, 128);
  EXPECT_EQ(back->memory_mib, int64_t{2} << 20);
  EXPECT_EQ(back->agent_started, 1700000123);
  EXPECT_EQ(back->instance, "5f3a9c0e12ab34cd56ef7890");
  EXPECT_EQ(back->running, (std::vector<state::JobId>{4, 5}));
  EXPECT_EQ(back->finished, (std::vector<state::JobId>{1, 2, 3}));
}

TEST(ProtocolJson, WorkCancelsAreJobIdsOrRunsAndBadOnesAreNamed) {
  // A stop of whichever run is the bare job id an older agent reads.
  AgentWork any;
  any.cancel = {{4, 0}};
  EXPECT_NE(AgentWorkToJson(any).find(R"("cancel":[4])"), std::string::npos);
  Result<AgentWork> w =
      AgentWorkFromJson(R"({"cancel":[4,{"job":9,"start_time":77}],"seq":3})");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->cancel, (std::vector<RunStop>{{4, 0}, {9, 77}}));
  EXPECT_EQ(w->seq, 3u);
  for (const char* bad : {R"({"cancel":["x"]})", R"({"cancel":[{"job":9,"pid":1}]})",
                          R"({"cancel":[0]})", R"({"seq":-1})", R"({"cancel":7})"}) {
    Result<AgentWork> r = AgentWorkFromJson(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("work."), std::string::npos)
        << r.status().message();
  }
}

TEST(ProtocolJson, WorkRoundTrip) {
  AgentWork w;
  w.launch = {FullLaunch(31, 0), FullLaunch(31, 1)};
  w.cancel = {{4, 0}, {9, 1700000200}};
  w.reregister = true;
  w.seq = 42;
  const std::string text = AgentWorkToJson(w);
  Result<AgentWork> back = AgentWorkFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(AgentWorkToJson(*back), text);
  ASSERT_EQ(back->launch.size(), 2u);
  const api::LaunchSpec& l = back->launch[1];
  EXPECT_EQ(l.job, 31);
  EXPECT_EQ(l.node, "n2");
  EXPECT_EQ(l.gpus, GpuSet::FromIndices({0, 2, 5}));
  EXPECT_EQ(l.cpus, 24);
  EXPECT_EQ(l.memory_mib, 65536);
  EXPECT_EQ(l.share_milli, 250);
  EXPECT_EQ(l.gpu_memory_mib, 8192);
  EXPECT_EQ(l.mig, (std::vector<api::MigLaunch>{{"MIG-a", 2, 1, 0}}));
  EXPECT_EQ(l.nodelist, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(l.node_addresses, (std::vector<std::string>{"10.0.0.1", "10.0.0.2"}));
  EXPECT_EQ(l.node_rank, 1);
  EXPECT_EQ(l.master_port, 29512);
  EXPECT_EQ(l.gpus_per_node, 3);
  EXPECT_EQ(l.time_limit, 3600);
  EXPECT_EQ(l.kill_grace, 15);
  EXPECT_EQ(l.start_time, 1700000200);
  EXPECT_EQ(l.user, "alice");
  EXPECT_EQ(l.partition, "gpu8");
  EXPECT_EQ(l.spec.argv(), state::testing::FullJob(31).spec.argv());
  EXPECT_EQ(back->cancel, (std::vector<RunStop>{{4, 0}, {9, 1700000200}}));
  EXPECT_EQ(back->seq, 42u);
  EXPECT_TRUE(back->reregister);
  EXPECT_EQ(l.restart_count, 2);
  EXPECT_EQ(l.spec.signal, 10);  // the spec's issue-17 fields reach the agent
  EXPECT_TRUE(l.spec.signal_batch_only);
  EXPECT_EQ(l.spec.signal_before, 90);
  EXPECT_TRUE(l.spec.open_append);
  EXPECT_EQ(l.spec.ntasks, 4);
}

// Signals for running jobs travel in the work answer; absent when none, so
// an agent of the previous version reads the rest.
TEST(ProtocolJson, WorkSignals) {
  AgentWork w;
  w.signals = {{7, 10, SignalScope::kBatch},
               {8, 15, SignalScope::kAll},
               {9, 12, SignalScope::kSteps}};
  w.limits = {{7, 1000, 3600}};
  const std::string text = AgentWorkToJson(w);
  Result<AgentWork> back = AgentWorkFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->limits.size(), 1u);
  EXPECT_EQ(back->limits[0].job, 7);
  EXPECT_EQ(back->limits[0].start_time, 1000);
  EXPECT_EQ(back->limits[0].time_limit, 3600);
  ASSERT_EQ(back->signals.size(), 3u);
  EXPECT_EQ(back->signals[0].job, 7);
  EXPECT_EQ(back->signals[0].signal, 10);
  EXPECT_EQ(back->signals[0].scope, SignalScope::kBatch);
  EXPECT_EQ(back->signals[1].scope, SignalScope::kAll);
  EXPECT_EQ(back->signals[2].scope, SignalScope::kSteps);
  // As an agent of the previous version sent and read them: batch_only alone.
  const json sigs = json::parse(text)["signals"];
  EXPECT_EQ(sigs[0],
            json::parse(R"({"job":7,"signal":10,"batch_only":true,"scope":"batch"})"));
  EXPECT_EQ(sigs[1], json::parse(R"({"job":8,"signal":15})"));
  Result<AgentWork> old =
      AgentWorkFromJson(R"({"signals":[{"job":1,"signal":10,"batch_only":true}]})");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->signals[0].scope, SignalScope::kBatch);
  EXPECT_EQ(json::parse(AgentWorkToJson(AgentWork{})).count("signals"), 0u);
  Result<AgentWork> bad =
      AgentWorkFromJson(R"({"signals":[{"job":1,"signal":0,"batch_only":false}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "work.signals[0].signal: 0 is not a signal");
}

TEST(ProtocolJson, HoldRequest) {
  EXPECT_FALSE(HoldRequestFromJson("")->user);  // a bare POST, as older clients send
  EXPECT_FALSE(HoldRequestFromJson("{}")->user);
  EXPECT_TRUE(HoldRequestFromJson(HoldRequestToJson({.user = true}))->user);
  EXPECT_EQ(HoldRequestFromJson(R"({"user":1})").status().message(),
            "hold.user: expected a boolean, got number");
  EXPECT_EQ(HoldRequestFromJson(R"({"admin":true})").status().message(),
            "hold: unknown field 'admin'");
}

TEST(ProtocolJson, SignalRequest) {
  struct Case {
    std::string body;
    int signal;  // 0: refused with `error`
    SignalScope scope;
    std::string error;
  };
  constexpr SignalScope kAll = SignalScope::kAll;
  const std::vector<Case> cases = {
      {R"({"signal":"USR1"})", 10, kAll, ""},
      {R"({"signal":"SIGUSR2","batch_only":true})", 12, SignalScope::kBatch, ""},
      {R"({"signal":15})", 15, kAll, ""},
      {R"({"signal":"USR2","scope":"steps"})", 12, SignalScope::kSteps, ""},
      {R"({"signal":"USR2","scope":"batch","batch_only":true})", 12, SignalScope::kBatch,
       ""},
      {R"({"signal":"USR2","scope":"all"})", 12, kAll, ""},
      {R"({"signal":"USR2","scope":"tasks"})", 0, kAll,
       "signal.scope: \"tasks\" is not a scope (\"all\", \"batch\" or \"steps\")"},
      {R"({"signal":"USR2","scope":"steps","batch_only":true})", 0, kAll,
       "signal: batch_only and scope steps disagree"},
      {R"({"signal":"USR7"})", 0, kAll,
       "signal.signal: \"USR7\" is not a signal (a name such as \"USR1\", or 1-64)"},
      {R"({"signal":0})", 0, kAll,
       "signal.signal: 0 is not a signal (a name such as \"USR1\", or 1-64)"},
      {R"({})", 0, kAll, "signal.signal: missing (e.g. \"USR1\" or 10)"},
      {R"({"signal":"USR1","what":1})", 0, kAll, "signal: unknown field 'what'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    Result<SignalRequest> r = SignalRequestFromJson(c.body);
    if (c.signal == 0) {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(r.status().message(), c.error);
      continue;
    }
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->signal, c.signal);
    EXPECT_EQ(r->scope, c.scope);
  }
}

// The launch carries the job's bytes exactly to the agent; a submit carries
// them exactly to the server, and refuses a text field that is not UTF-8 by name.
TEST(ProtocolJson, NonUtf8BytesReachTheAgentAndTheServerExactly) {
  AgentWork w;
  w.launch = {FullLaunch(40, 0)};
  state::JobSpec& spec = w.launch[0].spec;
  spec.workdir = "/srv/d\xff";
  spec.set_script("#!/bin/sh\necho \xfe\n");
  spec.set_argv({"a\xff", "b"});
  spec.set_env({{"K", "v\xff"}});
  spec.stdout_path = "%x\xff.out";
  Result<AgentWork> back = AgentWorkFromJson(AgentWorkToJson(w));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  const state::JobSpec& b = back->launch[0].spec;
  EXPECT_EQ(b.workdir, spec.workdir);
  EXPECT_EQ(b.script(), spec.script());
  EXPECT_EQ(b.argv(), spec.argv());
  EXPECT_EQ(b.env(), spec.env());
  EXPECT_EQ(b.stdout_path, spec.stdout_path);

  SubmitRequest r = FullSubmit();
  r.spec.workdir = "/srv/d\xff";
  r.spec.set_env({{"K\xfe", "v\xff"}});
  Result<SubmitRequest> sub = SubmitRequestFromJson(SubmitRequestToJson(r));
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  EXPECT_EQ(sub->spec.workdir, r.spec.workdir);
  EXPECT_EQ(sub->spec.env(), r.spec.env());
  r.req.account = "acct\xff";
  sub = SubmitRequestFromJson(SubmitRequestToJson(r));
  ASSERT_FALSE(sub.ok());
  EXPECT_EQ(sub.status().message(), "submit.req.account: not valid UTF-8 (5 bytes)");
}

// A 3 MB field name used to come back whole in the error.
TEST(ProtocolJson, AHugeUnknownFieldNameMakesAShortError) {
  const std::string name(3 << 20, 'y');
  Result<SubmitRequest> r = SubmitRequestFromJson("{\"req\": {}, \"" + name + "\": 1}");
  ASSERT_FALSE(r.ok());
  EXPECT_LT(ErrorToJson(r.status()).size(), 1024u);
  EXPECT_EQ(r.status().message(),
            "submit: unknown field '" + std::string(64, 'y') + "...'");
  Result<AgentWork> w =
      AgentWorkFromJson(R"({"launch":[{"job":1,")" + name + R"(":2}]})");
  ASSERT_FALSE(w.ok());
  EXPECT_LT(w.status().message().size(), 1024u);
}

TEST(ProtocolJson, EmptyWork) {
  Result<AgentWork> w = AgentWorkFromJson(AgentWorkToJson(AgentWork{}));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_TRUE(w->launch.empty());
  EXPECT_TRUE(w->cancel.empty());
  EXPECT_FALSE(w->reregister);
}

TEST(ProtocolJson, ExitsRoundTripEveryKind) {
  const std::vector<api::JobExit> exits = FullExits();
  const std::string text = JobExitsToJson(exits);
  Result<std::vector<api::JobExit>> back = JobExitsFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(JobExitsToJson(*back), text);
  ASSERT_EQ(back->size(), exits.size());
  for (size_t i = 0; i < exits.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ((*back)[i].job, exits[i].job);
    EXPECT_EQ((*back)[i].kind, exits[i].kind);
    EXPECT_EQ((*back)[i].exit_code, exits[i].exit_code);
    EXPECT_EQ((*back)[i].signal, exits[i].signal);
    EXPECT_EQ((*back)[i].message, exits[i].message);
    EXPECT_EQ((*back)[i].end_time, exits[i].end_time);
  }
  EXPECT_EQ(json::parse(text)["exits"][2]["kind"], "time_limit");
}

// ---- Strict decoding: every error names what is wrong ----

enum class Message { kSubmit, kRegister, kWork, kExits };

struct BadCase {
  const char* name;
  Message message;
  const char* text;
  const char* error;  // a substring of the message
};

Status Decode(Message m, std::string_view text) {
  switch (m) {
    case Message::kSubmit:
      return SubmitRequestFromJson(text).status();
    case Message::kRegister:
      return AgentRegistrationFromJson(text).status();
    case Message::kWork:
      return AgentWorkFromJson(text).status();
    case Message::kExits:
      return JobExitsFromJson(text).status();
  }
  return Status::Ok();
}

class DecodeErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(DecodeErrorTest, RefusedNamingTheField) {
  const BadCase& c = GetParam();
  const Status s = Decode(c.message, c.text);
  ASSERT_FALSE(s.ok()) << c.text;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(c.error), std::string::npos) << s.message();
}

constexpr const char* kTopo = R"("topology":{"gpus":[]})";

INSTANTIATE_TEST_SUITE_P(
    All, DecodeErrorTest,
    ::testing::Values(
        BadCase{"SubmitNotJson", Message::kSubmit, "{\"req\":", "not valid JSON"},
        BadCase{"SubmitEmptyBody", Message::kSubmit, "", "not valid JSON"},
        BadCase{"SubmitNotObject", Message::kSubmit, "[1,2]", "expected an object"},
        BadCase{"SubmitNoReq", Message::kSubmit, "{}", "'req'"},
        BadCase{"SubmitUnknownField", Message::kSubmit, R"({"req":{},"priority":3})",
                "unknown field 'priority'"},
        BadCase{"SubmitUnknownReqField", Message::kSubmit, R"({"req":{"gpuz":1}})",
                "gpuz"},
        BadCase{"SubmitGpusString", Message::kSubmit, R"({"req":{"gpus":"2"}})",
                "submit.req.gpus"},
        BadCase{"SubmitHoldNotBool", Message::kSubmit, R"({"req":{},"hold":1})",
                "submit.hold: expected a boolean"},
        BadCase{"SubmitTasksNotArray", Message::kSubmit, R"({"req":{},"array_tasks":3})",
                "submit.array_tasks: expected an array"},
        BadCase{"SubmitTasksNotIntegers", Message::kSubmit,
                R"({"req":{},"array_tasks":[1,"2"]})", "submit.array_tasks"},
        BadCase{"SubmitNegativeMaxRunning", Message::kSubmit,
                R"({"req":{},"array_tasks":[1],"array_max_running":-1})",
                "submit.array_max_running: -1; at least 0"},
        BadCase{"SubmitMaxRunningOutOfRange", Message::kSubmit,
                R"({"req":{},"array_max_running":99999999999})", "out of range"},
        BadCase{"SubmitSpecWrongType", Message::kSubmit,
                R"({"req":{},"spec":{"argv":"ls"}})", "submit.spec.argv"},
        BadCase{"RegisterNoTopology", Message::kRegister, R"({"node":"n1"})",
                "register.topology"},
        BadCase{"RegisterTopologyNotObject", Message::kRegister,
                R"({"node":"n1","topology":"x"})", "register.topology"},
        BadCase{"RegisterUnknownField", Message::kRegister,
                R"({"node":"n1","gpus":8,"topology":{}})", "unknown field 'gpus'"},
        BadCase{"RegisterCpusString", Message::kRegister,
                R"({"node":"n1","cpus":"8","topology":{}})",
                "register.cpus: expected an integer, got string"},
        BadCase{"RegisterRunningNotIntegers", Message::kRegister,
                R"({"node":"n1","topology":{},"running":[1.5]})", "register.running"},
        BadCase{"RegisterNodeNotString", Message::kRegister,
                R"({"node":7,"topology":{}})", "register.node: expected a string"},
        BadCase{"WorkUnknownField", Message::kWork, R"({"launch":[],"stop":true})",
                "unknown field 'stop'"},
        BadCase{"WorkLaunchNotArray", Message::kWork, R"({"launch":{}})",
                "work.launch: expected an array"},
        BadCase{"WorkLaunchUnknownField", Message::kWork,
                R"({"launch":[{"job":1},{"job":2,"rank":1}]})",
                "work.launch[1]: unknown field 'rank'"},
        BadCase{"WorkLaunchBadGpus", Message::kWork,
                R"({"launch":[{"job":1,"gpus":"x"}]})", "work.launch[0].gpus"},
        BadCase{"WorkLaunchNodelistNotStrings", Message::kWork,
                R"({"launch":[{"job":1,"nodelist":[1]}]})", "work.launch[0].nodelist"},
        BadCase{"WorkReregisterNotBool", Message::kWork, R"({"reregister":"yes"})",
                "work.reregister"},
        BadCase{"ExitsMissing", Message::kExits, "{}", "exits: expected an array"},
        BadCase{"ExitsUnknownKind", Message::kExits,
                R"({"exits":[{"job":1,"kind":"oops"}]})",
                "exits[0].kind: unknown exit kind 'oops'"},
        BadCase{"ExitsUnknownField", Message::kExits,
                R"({"exits":[{"job":1},{"job":2,"code":1}]})",
                "exits[1]: unknown field 'code'"},
        BadCase{"ExitsCodeString", Message::kExits,
                R"({"exits":[{"job":1,"exit_code":"1"}]})",
                "exits[0].exit_code: expected an integer"},
        BadCase{"ExitsNotObject", Message::kExits, R"({"exits":[3]})",
                "exits[0]: expected an object"},
        BadCase{"ExitsTopUnknown", Message::kExits, R"({"exits":[],"node":"n1"})",
                "unknown field 'node'"},
        // Array elements are named by index, and checked against the element type
        // before conversion (4294967297 used to become task 1).
        BadCase{"SubmitTaskNamedByIndex", Message::kSubmit,
                R"({"req":{},"array_tasks":[1,"2"]})",
                "submit.array_tasks[1]: expected an integer, got string"},
        BadCase{"SubmitTaskWrapsInt", Message::kSubmit,
                R"({"req":{},"array_tasks":[4294967297]})",
                "submit.array_tasks[0]: 4294967297 is out of range"},
        BadCase{"SubmitMaxRunningAboveInt64", Message::kSubmit,
                R"({"req":{},"array_max_running":18446744073709551615})",
                "submit.array_max_running: 18446744073709551615 is out of range"},
        BadCase{"RegisterRunningAboveInt64", Message::kRegister,
                R"({"node":"n1","topology":{},"running":[18446744073709551615]})",
                "register.running[0]: 18446744073709551615 is out of range"},
        // The encoder drops it without tasks, so a round trip would lose it.
        BadCase{"SubmitMaxRunningWithoutTasks", Message::kSubmit,
                R"({"req":{},"array_max_running":2})",
                "submit.array_max_running: set without array_tasks"},
        BadCase{"WorkNodelistNamedByIndex", Message::kWork,
                R"({"launch":[{"job":1,"nodelist":["a",2]}]})",
                "work.launch[0].nodelist[1]: expected a string, got number"}),
    [](const ::testing::TestParamInfo<BadCase>& p) { return p.param.name; });

// POST /jobs/ID/update.
TEST(ProtocolJson, JobUpdateRoundTripAndRefusals) {
  JobUpdate u;
  u.req_patch = R"({"time_limit":300,"constraint":"h100"})";
  u.name = std::string("n\xff");  // bytes, carried exactly
  Result<JobUpdate> back = JobUpdateFromJson(JobUpdateToJson(u));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(json::parse(back->req_patch), json::parse(u.req_patch));
  EXPECT_EQ(back->name, u.name);
  EXPECT_FALSE(back->comment.has_value());
  EXPECT_EQ(JobUpdateFromJson(R"({"req": {"user": "mallory"}})").status().message(),
            "update.req.user: a job's user cannot change");
  EXPECT_EQ(JobUpdateFromJson(R"({"req": {"gpu": 2}})").status().message(),
            "update.req: unknown field 'gpu'");
  EXPECT_EQ(JobUpdateFromJson(R"({"state": "RUNNING"})").status().message(),
            "update: unknown field 'state'");
  EXPECT_FALSE(JobUpdateFromJson(R"({"req": []})").ok());

  sched::JobRequest req;
  req.gpus = 2;
  req.user = "alice";
  ASSERT_TRUE(ApplyRequestPatch(R"({"gpus": 4, "nice": 10})", &req).ok());
  EXPECT_EQ(req.gpus, 4);
  EXPECT_EQ(req.nice, 10);
  EXPECT_EQ(req.user, "alice");
  Status bad = ApplyRequestPatch(R"({"gpus": "four"})", &req);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("update.req.gpus"), std::string::npos) << bad.message();
  EXPECT_EQ(req.gpus, 4) << "unchanged on error";
}

TEST(ProtocolJson, RegistrationTopologyGivenAsObject) {
  const std::string text = std::string(R"({"node":"n1",)") + kTopo + "}";
  Result<AgentRegistration> r = AgentRegistrationFromJson(text);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(json::parse(r->topology_json), json::parse(R"({"gpus":[]})"));
}

// ---- Errors: the envelope and HTTP statuses ----

struct CodeCase {
  const char* name;
  StatusCode code;
  int http;
  const char* slug;
};

class StatusMappingTest : public ::testing::TestWithParam<CodeCase> {};

TEST_P(StatusMappingTest, EnvelopeAndHttpStatus) {
  const CodeCase& c = GetParam();
  EXPECT_EQ(HttpStatusFor(c.code), c.http);
  EXPECT_EQ(StatusCodeSlug(c.code), c.slug);
  if (c.code == StatusCode::kOk) return;
  const Status s(c.code, "job 7: \"quoted\" message");
  const std::string body = ErrorToJson(s);
  const json j = json::parse(body);
  EXPECT_EQ(j["error"]["code"], c.slug);
  EXPECT_EQ(j["error"]["message"], s.message());
  // And back: the client sees the code and the message.
  const Status back = StatusFromError(c.http, body);
  EXPECT_EQ(back.code(), c.code);
  EXPECT_EQ(back.message(), s.message());
}

INSTANTIATE_TEST_SUITE_P(
    All, StatusMappingTest,
    ::testing::Values(
        CodeCase{"Ok", StatusCode::kOk, 200, "ok"},
        CodeCase{"InvalidArgument", StatusCode::kInvalidArgument, 400,
                 "invalid_argument"},
        CodeCase{"NotFound", StatusCode::kNotFound, 404, "not_found"},
        CodeCase{"Unsatisfiable", StatusCode::kUnsatisfiable, 422, "unsatisfiable"},
        CodeCase{"Busy", StatusCode::kBusy, 409, "busy"},
        CodeCase{"Unavailable", StatusCode::kUnavailable, 503, "unavailable"},
        CodeCase{"Internal", StatusCode::kInternal, 500, "internal"}),
    [](const ::testing::TestParamInfo<CodeCase>& p) { return p.param.name; });

TEST(ProtocolJson, StatusFromErrorWithoutEnvelope) {
  const Status s = StatusFromError(502, "<html>bad gateway</html>");
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("HTTP 502"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("bad gateway"), std::string::npos) << s.message();
  EXPECT_EQ(StatusFromError(413, "").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusFromError(404, R"({"error":"x"})").code(), StatusCode::kNotFound);
  EXPECT_EQ(StatusFromError(404, "").message(), "HTTP 404");
}

}  // namespace
// A task's output as reports and output pages carry it: exactly, in the smaller of its
// two forms, and never more than StepSizes says (the agent sizes its reports by it).
TEST(ProtocolJson, StepOutputTakesItsFormsSizeAndComesBackExactly) {
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
  struct Case {
    const char* name;
    std::string data;
    bool as_text;
  };
  const Case cases[] = {
      {"empty", "", true},
      {"text", "step 3: loss 0.25\n", true},
      {"quotes and tabs", "\"a\"\t\\b\n", true},
      {"UTF-8", "\xe2\x9c\x93 done \xf0\x9f\x9a\x80", true},
      {"a NUL in text", std::string("abcdefgh\0ij", 11), true},
      {"NULs", std::string(3 << 20, '\0'), false},
      {"escape sequences", std::string(1000, '\x1b'), false},
      {"every byte", all_bytes, false},
      {"not UTF-8", "d\xff", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const OutputChunk chunk{3, 2, c.data, 0};
    StepReports reports;
    reports.instance = "0123456789abcdef01234567";
    StepReport r;
    r.job = 12;
    r.job_start = 1000;
    r.step = 3;
    r.exits = {{3, ExitKind::kLaunchFailed, 2, 0, "execve " + c.data, "n1"}};
    reports.steps.push_back(r);
    const std::string without = StepReportsToJson(reports);
    reports.steps[0].chunks.push_back(chunk);
    const std::string body = StepReportsToJson(reports);
    const int64_t size = static_cast<int64_t>(c.data.size());
    EXPECT_LE(static_cast<int64_t>(body.size() - without.size()),
              OutputChunkJsonBytes(chunk));
    EXPECT_LE(static_cast<int64_t>(body.size()),
              kStepReportsJsonBytes + kStepReportJsonBytes +
                  TaskExitJsonBytes(r.exits[0]) + OutputChunkJsonBytes(chunk));
    EXPECT_LE(OutputChunkJsonBytes(chunk), kChunkFieldsBytes + 13 + 4 * (size + 2) / 3);
    const json j = json::parse(body);
    EXPECT_EQ(j["steps"][0]["chunks"][0]["data"].is_string(), c.as_text);
    Result<StepReports> back = StepReportsFromJson(body);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_TRUE(back->steps[0].chunks[0].data == c.data);
    // srun's page: the same form, the same bytes.
    StepOutput page;
    page.chunks = {chunk};
    Result<StepOutput> read = StepOutputFromJson(StepOutputToJson(page));
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    EXPECT_TRUE(read->chunks[0].data == c.data);
  }
  // What fits a room holds, whatever the bytes.
  for (int64_t room : {0, 80, 100, 1000, 65536}) {
    const int64_t n = OutputChunkDataFitting(room);
    EXPECT_GE(n, 0);
    if (n == 0) continue;
    EXPECT_LE(OutputChunkJsonBytes({0, 1, std::string(n, '\0'), 0}), room) << room;
    EXPECT_LE(OutputChunkJsonBytes({0, 1, std::string(n, '\xff'), 0}), room) << room;
  }
}

}  // namespace hachi::api

namespace hachi::api {
namespace {

TEST(ProtocolJson, AgentHealthRoundTrip) {
  AgentHealth h;
  h.instance = "a1b2";
  h.events.push_back(GpuHealthEvent{3, "xid", 79, "fatal",
                                    "Xid 79: GPU has fallen off the bus", 1700000000});
  h.events.push_back(GpuHealthEvent{-1, "xid", 145, "node", "NVSwitch", 1700000001});
  Result<AgentHealth> back = AgentHealthFromJson(AgentHealthToJson(h));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->instance, "a1b2");
  ASSERT_EQ(back->events.size(), 2u);
  EXPECT_EQ(back->events[0].gpu, 3);
  EXPECT_EQ(back->events[0].xid, 79);
  EXPECT_EQ(back->events[0].fault, "fatal");
  EXPECT_EQ(back->events[0].message, "Xid 79: GPU has fallen off the bus");
  EXPECT_EQ(back->events[1].gpu, -1);
  EXPECT_FALSE(
      AgentHealthFromJson(R"({"events":[{"gpu":-2,"kind":"xid","fault":"info"}]})").ok());
  EXPECT_FALSE(
      AgentHealthFromJson(R"({"events":[{"gpu":0,"kind":"","fault":"info"}]})").ok());
  EXPECT_FALSE(AgentHealthFromJson(R"({"events":{}})").ok());
}

TEST(ProtocolJson, AgentHealthProcessListRoundTrip) {
  AgentHealth h;
  h.instance = "a1";
  EXPECT_EQ(AgentHealthToJson(h).find("processes"), std::string::npos)
      << "no list: unchanged, not empty";
  h.has_processes = true;
  Result<AgentHealth> empty = AgentHealthFromJson(AgentHealthToJson(h));
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->has_processes) << "an empty list clears the node's";
  h.processes.push_back(GpuProcessReport{7, 4242, 20480, "alice", "python train.py", 0});
  h.processes.push_back(GpuProcessReport{1, 99, -1, "bob", "torchrun", 12});
  Result<AgentHealth> back = AgentHealthFromJson(AgentHealthToJson(h));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->processes.size(), 2u);
  EXPECT_EQ(back->processes[0].pid, 4242u);
  EXPECT_EQ(back->processes[0].command, "python train.py");
  EXPECT_EQ(back->processes[1].job, 12);
  EXPECT_EQ(back->processes[1].used_mib, -1);
  for (const char* bad : {R"({"processes":{}})", R"({"processes":[{"gpu":99,"pid":1}]})",
                          R"({"processes":[{"gpu":0,"pid":0}]})",
                          R"({"processes":[{"gpu":0,"pid":1,"job":-3}]})",
                          R"({"processes":[{"gpu":0,"pid":1,"pdi":2}]})"}) {
    Result<AgentHealth> r = AgentHealthFromJson(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("processes"), std::string::npos)
        << r.status().message();
  }
}

}  // namespace

// Every step field of the work, the agents' reports and acks, srun's request
// and its output page survive their codecs, and AgentWork::Empty sees each field.
TEST(ProtocolJson, StepMessagesRoundTrip) {
  AgentWork w;
  EXPECT_TRUE(w.Empty());
  StepLaunch l;
  l.job = 12;
  l.job_start = 1000;
  l.step = 3;
  l.argv = {"python", "train.py"};
  l.env = {{"A", "1"}, {"B", "x=y"}};
  l.workdir = "/home/a";
  l.name = "train";
  l.nodes = {"n1", "n2"};
  l.node_index = 1;
  l.tasks = {2, 3};
  l.ntasks = 4;
  l.tasks_per_node = {2, 2};
  l.cpus_per_task = 4;
  l.gpus_per_task = 1;
  l.stdout_pattern = "o-%t";
  l.stderr_pattern = "e-%t";
  l.pty = true;
  l.rows = 40;
  l.cols = 100;
  l.kill_grace = 7;
  w.steps.push_back(l);
  EXPECT_FALSE(w.Empty());
  w.step_signals.push_back({12, 1000, 3, 2, false});
  w.step_signals.push_back({12, 1000, 3, 0, true});
  w.step_input.push_back({12, 1000, 3, std::string("ls\r\x03\xff", 5), 0, 0});
  w.step_input.push_back({12, 1000, 3, "", 50, 120});
  Result<AgentWork> back = AgentWorkFromJson(AgentWorkToJson(w));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->steps.size(), 1u);
  const StepLaunch& b = back->steps[0];
  EXPECT_EQ(b.argv, l.argv);
  EXPECT_EQ(b.env, l.env);
  EXPECT_EQ(b.nodes, l.nodes);
  EXPECT_EQ(b.node_index, 1);
  EXPECT_EQ(b.tasks, l.tasks);
  EXPECT_EQ(b.tasks_per_node, l.tasks_per_node);
  EXPECT_EQ(b.cpus_per_task, 4);
  EXPECT_EQ(b.gpus_per_task, 1);
  EXPECT_EQ(b.stdout_pattern, "o-%t");
  EXPECT_TRUE(b.pty);
  EXPECT_EQ(b.rows, 40);
  EXPECT_EQ(b.kill_grace, 7);
  ASSERT_EQ(back->step_signals.size(), 2u);
  EXPECT_TRUE(back->step_signals[1].cancel);
  ASSERT_EQ(back->step_input.size(), 2u);
  EXPECT_EQ(back->step_input[0].data, std::string("ls\r\x03\xff", 5));  // bytes exactly
  EXPECT_EQ(back->step_input[1].cols, 120);
  for (auto field : {0, 1, 2}) {
    AgentWork one;
    if (field == 0) one.steps.push_back(l);
    if (field == 1) one.step_signals.push_back({12, 1000, 3, 2, false});
    if (field == 2) one.step_input.push_back({12, 1000, 3, "x", 0, 0});
    EXPECT_FALSE(one.Empty()) << field;
  }

  StepReports reports;
  reports.instance = "abc";
  StepReport r;
  r.job = 12;
  r.job_start = 1000;
  r.step = 3;
  r.seq = 77;
  r.chunks = {{2, 1, "out\n", 0}, {3, 2, "", 4096}};
  r.exits = {{2, ExitKind::kExited, 1, 0, "", ""},
             {3, ExitKind::kSignaled, 0, 9, "", ""}};
  r.done = true;
  reports.steps.push_back(r);
  Result<StepReports> rb = StepReportsFromJson(StepReportsToJson(reports));
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  ASSERT_EQ(rb->steps.size(), 1u);
  EXPECT_EQ(rb->steps[0].seq, 77);
  EXPECT_EQ(rb->steps[0].chunks[1].lost, 4096);
  EXPECT_EQ(rb->steps[0].exits[1].signal, 9);
  EXPECT_TRUE(rb->steps[0].done);
  Result<std::vector<StepAck>> acks =
      StepAcksFromJson(StepAcksToJson({{12, 1000, 3, 81, true}}));
  ASSERT_TRUE(acks.ok());
  EXPECT_EQ((*acks)[0].next, 81);
  EXPECT_TRUE((*acks)[0].gone);

  StepRequest q;
  q.argv = {"hostname"};
  q.ntasks = 4;
  q.node_list = {"n1"};
  q.pty = true;
  q.rows = 24;
  q.cols = 80;
  Result<StepRequest> qb = StepRequestFromJson(StepRequestToJson(q));
  ASSERT_TRUE(qb.ok()) << qb.status().ToString();
  EXPECT_EQ(qb->ntasks, 4);
  EXPECT_EQ(qb->node_list, q.node_list);
  EXPECT_EQ(qb->cols, 80);
  EXPECT_EQ(StepRequestFromJson(R"({"argv": []})").status().message(),
            "step.argv: no command given to execute");
  EXPECT_EQ(StepRequestFromJson(R"({"argv": ["x"], "ntasks": -1})").status().code(),
            StatusCode::kInvalidArgument);
  Result<StepInput> in =
      StepInputRequestFromJson(StepInputRequestToJson({0, 0, 0, "a", 3, 4}));
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(in->data, "a");
  EXPECT_EQ(in->rows, 3);
  EXPECT_EQ(StepInputRequestFromJson(R"({"job": 1})").status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace hachi::api
