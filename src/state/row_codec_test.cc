#include "state/row_codec.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "state/testing.h"

namespace hachi::state {
namespace {

using nlohmann::json;
using testing::FullJob;
using testing::FullNode;
using testing::FullStep;

TokenRecord FullToken() {
  return TokenRecord{"0123456789ab", std::string(64, 'f'), "alice", 4000000000u, 100,
                     true,           1700000400,           "root"};
}

TEST(RowCodec, JobRoundTripKeepsEveryField) {
  const JobRecord job = FullJob(12);
  const std::string text = EncodeJobRow(job);
  Result<Row<JobRecord>> back = DecodeJobRow(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->version, kJobRowFormat.version);
  EXPECT_EQ(back->unknown, "");
  EXPECT_EQ(EncodeJobRow(back->record), text);
  const JobRecord& b = back->record;
  EXPECT_EQ(b.req.dependencies.size(), 2u);
  EXPECT_EQ(b.req.dependencies[1].kind, sched::DependencyKind::kAfterAny);
  EXPECT_EQ(b.spec.env()[1].second, "a=b");
  EXPECT_EQ(b.spec.uid, 4000000000u);
  EXPECT_EQ(b.spec.ntasks, 4);  // version 5's fields
  EXPECT_EQ(b.spec.ntasks_per_node, 2);
  EXPECT_EQ(b.spec.cpus_per_task, 3);
  EXPECT_EQ(b.spec.signal, 10);
  EXPECT_EQ(b.spec.signal_before, 90);
  EXPECT_TRUE(b.spec.signal_batch_only);
  EXPECT_TRUE(b.spec.open_append);
  EXPECT_TRUE(b.spec.batch_on_first_node);  // version 6's
  EXPECT_TRUE(b.spec.interactive);
  EXPECT_EQ(b.allocations[1].gpus, GpuSet::FromIndices({4, 6}));
  EXPECT_EQ(b.allocations[1].gpu_memory_mib, 4096);
  EXPECT_TRUE(b.held);
  EXPECT_TRUE(b.held_by_admin);  // version 9's
  EXPECT_EQ(b.requeues, 2);
  EXPECT_EQ(b.master_port, 29517);
  EXPECT_EQ(b.submit_key, "0123456789abcdef");
  EXPECT_EQ(b.spec.argv().back(), "");
  EXPECT_EQ(b.spec.array_task_id, 7);
}

// Bytes that are not UTF-8 used to become U+FFFD (a job from `d\xff` ran in
// `d\xef\xbf\xbd`). Every byte string of the spec and request reads back exactly.
TEST(RowCodec, NonUtf8BytesRoundTripExactly) {
  JobRecord job = FullJob(21);
  job.spec.set_script("#!/bin/sh\necho \xff\xfe\n");
  job.spec.workdir = "/tmp/d\xff";
  job.spec.set_argv({"/bin/echo", "caf\xe9", "ok"});
  job.spec.set_env({{"V\xff", "x\xff\xc3"}, {"PLAIN", "y"}});
  job.spec.stdout_path = "out\xff.%j";
  job.spec.stderr_path = "err\x80";
  job.spec.name = "n\xff";
  job.spec.comment = "c\xfe";
  job.req.partition = "p\xff";
  const std::string text = EncodeJobRow(job);
  EXPECT_EQ(text.find("\xef\xbf\xbd"), std::string::npos) << text;
  const json j = json::parse(text);
  EXPECT_EQ(j["spec"]["workdir"], json({{"base64", "L3RtcC9k/w=="}}));
  EXPECT_EQ(j["spec"]["env"][1], "PLAIN=y");  // UTF-8 stays a string
  EXPECT_EQ(j["_min_reader"], 7);  // version 3 readers must refuse, not misread, it
                                   // (5: new dependency kinds; 6:
                                   // batch_on_first_node, interactive; 7:
                                   // FullJob asks for MIG devices)
  Result<Row<JobRecord>> back = DecodeJobRow(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  const JobSpec& b = back->record.spec;
  EXPECT_EQ(b.script(), job.spec.script());
  EXPECT_EQ(b.workdir, job.spec.workdir);
  EXPECT_EQ(b.argv(), job.spec.argv());
  EXPECT_EQ(b.env(), job.spec.env());
  EXPECT_EQ(b.stdout_path, job.spec.stdout_path);
  EXPECT_EQ(b.stderr_path, job.spec.stderr_path);
  EXPECT_EQ(b.name, job.spec.name);
  EXPECT_EQ(b.comment, job.spec.comment);
  EXPECT_EQ(back->record.req.partition, "p\xff");
  EXPECT_EQ(EncodeJobRow(back->record), text);
  // A row of text only keeps the table's min_reader: older binaries still read it.
  JobRecord plain = FullJob(22);
  plain.req.mig_profile.clear();  // a MIG job's row needs a reader of 7
  EXPECT_EQ(json::parse(EncodeJobRow(plain))["_min_reader"], kJobRowFormat.min_reader);
}

// An array task's row names its payloads row, which holds the script, environment and
// argv (version 8): the row has no argv and needs a reader of 8. A row from before
// holds its argv itself, and keeps it through a decode and encode. A single job's are
// inline, readable by the table's min_reader.
TEST(RowCodec, ArrayTaskArgvLivesInThePayloadsRow) {
  JobRecord task = FullJob(30);
  task.req.mig_profile.clear();
  JobRecord bare = task;
  bare.spec.payload = nullptr;  // what the store encodes for a new task (sql_store.cc)
  const json row = json::parse(EncodeJobRow(bare, "", 30));
  EXPECT_FALSE(row["spec"].contains("argv")) << row.dump();
  EXPECT_FALSE(row["spec"].contains("script"));
  EXPECT_EQ(row["spec"]["payload"], 30);
  EXPECT_EQ(row["_min_reader"], 8);
  Result<Row<JobRecord>> back = DecodeJobRow(row.dump());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->payload_ref, 30);
  EXPECT_EQ(back->record.spec.payload, nullptr);

  const std::string payload = EncodePayloadRow(*task.spec.payload);
  EXPECT_EQ(json::parse(payload)["_v"], 2);
  Result<Row<JobPayload>> p = DecodePayloadRow(payload);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->record.argv, task.spec.argv());
  EXPECT_EQ(p->record.script, task.spec.script());
  EXPECT_EQ(p->record.env, task.spec.env());
  Result<Row<JobPayload>> v1 =
      DecodePayloadRow(R"({"_v":1,"_min_reader":1,"script":"s","env":["A=b"]})");
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_TRUE(v1->record.argv.empty());

  // Version 7: the task's row holds its argv; it stays there.
  const std::string old =
      R"({"_v":7,"_min_reader":6,"id":30,"spec":{"argv":["-n","2"],"payload":30}})";
  Result<Row<JobRecord>> o = DecodeJobRow(old);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->payload_ref, 30);
  EXPECT_EQ(o->record.spec.argv(), (std::vector<std::string>{"-n", "2"}));
  EXPECT_EQ(o->record.spec.script(), "");
  const json rewritten = json::parse(EncodeJobRow(o->record, "", o->payload_ref));
  EXPECT_EQ(rewritten["spec"]["argv"], json({"-n", "2"}));
  EXPECT_EQ(rewritten["_min_reader"], kJobRowFormat.min_reader);

  const json single = json::parse(EncodeJobRow(task));
  EXPECT_EQ(single["spec"]["argv"], json(task.spec.argv()));
  EXPECT_EQ(single["_min_reader"], kJobRowFormat.min_reader);
}

TEST(RowCodec, BytesFormIsStrict) {
  for (const char* bad : {R"({"base64":"L2Q"})", R"({"base64":"L2Q=","x":1})",
                          R"({"hex":"2f64"})", R"({"base64":7})"}) {
    const std::string row =
        std::string(R"({"_v":4,"_min_reader":4,"id":1,"spec":{"workdir":)") + bad + "}}";
    Result<Row<JobRecord>> r = DecodeJobRow(row);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("job.spec.workdir"), std::string::npos)
        << r.status().message();
  }
}

TEST(RowCodec, RowsCarryTheirVersion) {
  const json j = json::parse(EncodeJobRow(FullJob(3)));
  EXPECT_EQ(j["_v"], kJobRowFormat.version);
  EXPECT_EQ(j["_min_reader"], 7);  // FullJob asks for MIG devices
  EXPECT_EQ(j.size(),
            20u);  // 18 fields (+ gpu_memory_peak_mib, usage when set) + 2 versions
  EXPECT_EQ(j["req"].size(), 25u);            // FullJob sets the six optional fields;
                                              // 20: mig_profile
  EXPECT_EQ(j["allocations"][1].size(), 7u);  // mig, only where set
  EXPECT_EQ(j["spec"].size(),
            25u);  // 16 + version 5's 7 + version 6's 2 (FullJob sets all)
  EXPECT_EQ(j["allocations"][0].size(), 6u);
  const json n = json::parse(EncodeNodeRow(FullNode("n1")));
  EXPECT_EQ(n["_v"], kNodeRowFormat.version);
  EXPECT_EQ(n.size(), 20u);  // 18 fields (19: four burn-in; 20: gpu_sharing) + versions
  const json t = json::parse(EncodeTokenRow(FullToken()));
  EXPECT_EQ(t["_v"], kTokenRowFormat.version);
  EXPECT_EQ(t.size(), 10u);
  const json s = json::parse(EncodeStepRow(FullStep(12, 3)));
  EXPECT_EQ(s["_v"], kStepRowFormat.version);
  EXPECT_EQ(s["_min_reader"], kStepRowFormat.min_reader);
  EXPECT_EQ(s.size(), 17u);  // 15 fields + the two version keys
}

// Every field of a step, its name's bytes exactly.
TEST(RowCodec, StepRoundTripKeepsEveryField) {
  const StepRecord step = FullStep(12, 3);
  const std::string text = EncodeStepRow(step);
  Result<Row<StepRecord>> back = DecodeStepRow(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->version, kStepRowFormat.version);
  EXPECT_EQ(back->unknown, "");
  EXPECT_EQ(EncodeStepRow(back->record), text);
  const StepRecord& b = back->record;
  EXPECT_EQ(b.job, 12);
  EXPECT_EQ(b.job_start, 1700000100);
  EXPECT_EQ(b.step, 3);
  EXPECT_EQ(b.name, "python \xff");
  EXPECT_EQ(b.user, "alice");
  EXPECT_EQ(b.nodes, (std::vector<std::string>{"n2", "n1"}));
  EXPECT_EQ(b.ntasks, 16);
  EXPECT_EQ(b.cpus, 48);
  EXPECT_EQ(b.gpus, 8);
  EXPECT_EQ(b.state, JobState::kFailed);
  EXPECT_EQ(b.start_time, 1700000110);
  EXPECT_EQ(b.end_time, 1700000190);
  EXPECT_EQ(b.exit_code, 137);
  EXPECT_EQ(b.signal, 9);
  EXPECT_EQ(b.reason, "task 3 killed by signal 9");
  EXPECT_EQ(json::parse(text)["name"], json({{"base64", "cHl0aG9uIP8="}}));
}

// A newer binary's step row with fields this one does not know: read, and kept by a
// rewrite (StepEnded reads the row before it writes it).
TEST(RowCodec, UnknownFieldsOfANewerStepRowSurviveARewrite) {
  Result<Row<StepRecord>> row = DecodeStepRow(
      R"({"_v":3,"_min_reader":1,"job":5,"job_start":100,"step":2,"state":"RUNNING",)"
      R"("nodes":["n1"],"ntasks":4,"cpu_bind":"cores","mpi":{"type":"pmix"}})");
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  EXPECT_EQ(row->version, 3);
  EXPECT_EQ(row->record.ntasks, 4);
  EXPECT_EQ(json::parse(row->unknown),
            json::parse(R"({"cpu_bind":"cores","mpi":{"type":"pmix"}})"));
  row->record.state = JobState::kCompleted;
  const json rewritten = json::parse(EncodeStepRow(row->record, row->unknown));
  EXPECT_EQ(rewritten["cpu_bind"], "cores");
  EXPECT_EQ(rewritten["mpi"]["type"], "pmix");
  EXPECT_EQ(rewritten["state"], "COMPLETED");
  EXPECT_EQ(rewritten["_v"], kStepRowFormat.version);

  Result<Row<StepRecord>> newer = DecodeStepRow(R"({"_v":3,"_min_reader":2,"job":5})");
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(newer.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(newer.status().message(),
            "row format version 3 needs a reader of version 2 or later; this hachi "
            "reads step rows up to version 1 (run a newer hachi)");
}

TEST(RowCodec, StepErrorsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"state":"DONE"})", "step.state: unknown job state \"DONE\""},
      {R"({"nodes":"n1"})", "step.nodes: expected an array, got string"},
      {R"({"nodes":[1]})", "step.nodes[0]: expected a string, got number"},
      {R"({"step":"0"})", "step.step: expected an integer, got string"},
      {R"({"name":{"hex":"00"}})", "step.name: expected a string or"},
  };
  for (const auto& [text, error] : cases) {
    Result<Row<StepRecord>> r = DecodeStepRow(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInternal);
    EXPECT_NE(r.status().message().find(error), std::string::npos)
        << r.status().message();
  }
}

TEST(RowCodec, NodeAndTokenRoundTrip) {
  const NodeRecord node = FullNode("gpu-017");
  const std::string text = EncodeNodeRow(node);
  Result<Row<NodeRecord>> back = DecodeNodeRow(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(EncodeNodeRow(back->record), text);
  EXPECT_EQ(back->record.topology_json, node.topology_json);  // byte for byte
  EXPECT_EQ(back->record.unhealthy_reasons, node.unhealthy_reasons);
  EXPECT_EQ(back->record.cgroup, "v2");
  EXPECT_EQ(back->record.burn_in_passed, "0123456789abcdef");
  EXPECT_EQ(back->record.burn_in_run, 4);
  EXPECT_EQ(back->record.burn_in, BurnInPhase::kFailed);
  EXPECT_EQ(back->record.burn_in_gpus, GpuSet::FromIndices({2, 3}));
  // A version 2 reader cannot read the state "burn-in": it must refuse the row.
  EXPECT_EQ(json::parse(text)["_min_reader"], 3);

  const TokenRecord token = FullToken();
  Result<Row<TokenRecord>> t = DecodeTokenRow(EncodeTokenRow(token));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(EncodeTokenRow(t->record), EncodeTokenRow(token));
  EXPECT_EQ(t->record.uid, 4000000000u);
  EXPECT_TRUE(t->record.admin);
}

// The upgrade steps, one row per (table, version): a row as that version wrote it, and
// what it must read as. Version 1 is what Hachi wrote before rows were versioned (the
// API's JSON of the time, no "_v"); a node row older still lacks "cgroup".
struct UpgradeCase {
  const char* name;
  const char* table;
  const char* text;
  int version;
  // Checks on the decoded record, by table.
  void (*check)(const JobRecord*, const NodeRecord*, const TokenRecord*);
};

const UpgradeCase kUpgrades[] = {
    {"job_v1", "jobs",
     R"({"allocations":[{"cpus":4,"gpu_memory_mib":0,"gpus":"0-1","memory_mib":1024,
        "node":"n1","share_milli":0}],"end_time":0,"exit_code":0,"held":false,"id":7,
        "reason":"","req":{"account":"","cpus":0,"cpus_per_gpu":0,"dependencies":
        [{"job":3,"kind":"afterok"}],"exclusive":false,"gpu_memory_mib":0,"gpu_model":"",
        "gpu_share_milli":0,"gpus":2,"gpus_per_node":0,"memory_mib":0,
        "memory_mib_per_gpu":0,"min_gpu_memory_mib":0,"nodes":1,"partition":"gpu","qos":"",
        "time_limit":60,"user":"bob"},"requeues":0,"signal":0,"spec":{"argv":["sleep","9"],
        "array_job_id":0,"array_max_running":0,"array_task_id":-1,"comment":"",
        "container_image":"","env":["A=1"],"gid":0,"name":"s","requeue":false,"script":"",
        "shm_mib":0,"stderr_path":"","stdout_path":"","uid":1000,"workdir":"/tmp"},
        "start_time":2000,"state":"RUNNING","submit_time":1007})",
     1,
     [](const JobRecord* j, const NodeRecord*, const TokenRecord*) {
       EXPECT_EQ(j->id, 7);
       EXPECT_EQ(j->state, JobState::kRunning);
       EXPECT_EQ(j->req.gpus, 2);
       EXPECT_EQ(j->req.dependencies.at(0).job, 3);
       EXPECT_EQ(j->spec.env().at(0).second, "1");
       EXPECT_EQ(j->allocations.at(0).gpus, GpuSet::FromIndices({0, 1}));
       EXPECT_EQ(j->start_time, 2000);
     }},
    {"node_v1_without_cgroup", "nodes",
     R"({"address":"h1:7070","agent_instance":"a1","block":"","cpus":8,"memory_mib":64,
        "name":"n1","state":"drained","state_reason":"fan","state_since":5,
        "topology_json":"{}","unhealthy":"3","unhealthy_reasons":{"3":"Xid 79"}})",
     1,
     [](const JobRecord*, const NodeRecord* n, const TokenRecord*) {
       EXPECT_EQ(n->name, "n1");
       EXPECT_EQ(n->state, NodeState::kDrained);
       EXPECT_EQ(n->unhealthy, GpuSet::FromIndices({3}));
       EXPECT_EQ(n->unhealthy_reasons.at(3), "Xid 79");
       EXPECT_EQ(n->cgroup, "");
       EXPECT_EQ(n->burn_in_passed, "*");  // in service before burn-in: adopted
     }},
    // A node row of version 2 was in service before burn-in existed; its next
    // registration's fingerprint is taken as passed ("*"), no run, no burn-in state.
    {"node_v2_before_burn_in", "nodes",
     R"({"_v":2,"_min_reader":2,"name":"n2","state":"up","cgroup":"v2"})", 2,
     [](const JobRecord*, const NodeRecord* n, const TokenRecord*) {
       EXPECT_EQ(n->name, "n2");
       EXPECT_EQ(n->state, NodeState::kUp);
       EXPECT_EQ(n->burn_in_passed, "*");
       EXPECT_EQ(n->burn_in_run, 0);
       EXPECT_EQ(n->burn_in, BurnInPhase::kNone);
       EXPECT_TRUE(n->burn_in_gpus.empty());
     }},
    {"token_v1", "tokens",
     R"({"admin":false,"created":1700000000,"created_by":"root","gid":100,"id":"abc",
        "sha256":"00","uid":1000,"user":"bob"})",
     1,
     [](const JobRecord*, const NodeRecord*, const TokenRecord* t) {
       EXPECT_EQ(t->id, "abc");
       EXPECT_EQ(t->uid, 1000u);
       EXPECT_EQ(t->created_by, "root");
     }},
    {"job_v2", "jobs", R"({"_v":2,"_min_reader":2,"id":9,"state":"COMPLETED"})", 2,
     [](const JobRecord* j, const NodeRecord*, const TokenRecord*) {
       EXPECT_EQ(j->id, 9);
       EXPECT_EQ(j->state, JobState::kCompleted);
       EXPECT_EQ(j->spec.array_task_id, -1);  // missing: the default
       EXPECT_EQ(j->master_port, 0);          // before ports were tracked
     }},
    {"job_v3", "jobs",
     R"({"_v":3,"_min_reader":2,"id":10,"state":"RUNNING","master_port":29501,)"
     R"("spec":{"workdir":"/home/a/d\ufffd"}})",
     3,
     [](const JobRecord* j, const NodeRecord*, const TokenRecord*) {
       EXPECT_EQ(j->id, 10);
       EXPECT_EQ(j->master_port, 29501);
       EXPECT_EQ(j->spec.workdir, "/home/a/d\xef\xbf\xbd");  // what version 3 stored
     }},
    {"job_v4_current", "jobs",
     R"({"_v":4,"_min_reader":4,"id":11,"state":"PENDING",)"
     R"("spec":{"workdir":{"base64":"L2QK/w=="}}})",
     4,
     [](const JobRecord* j, const NodeRecord*, const TokenRecord*) {
       EXPECT_EQ(j->id, 11);
       EXPECT_EQ(j->spec.workdir, "/d\n\xff");
     }},
};

TEST(RowCodec, OlderRowsAreUpgradedOnRead) {
  for (const UpgradeCase& c : kUpgrades) {
    SCOPED_TRACE(c.name);
    const std::string table = c.table;
    if (table == "jobs") {
      Result<Row<JobRecord>> row = DecodeJobRow(c.text);
      ASSERT_TRUE(row.ok()) << row.status().ToString();
      EXPECT_EQ(row->version, c.version);
      EXPECT_EQ(row->unknown, "");
      c.check(&row->record, nullptr, nullptr);
      // Rewritten, it is a current row that reads back the same.
      Result<Row<JobRecord>> again = DecodeJobRow(EncodeJobRow(row->record));
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(again->version, kJobRowFormat.version);
      c.check(&again->record, nullptr, nullptr);
    } else if (table == "nodes") {
      Result<Row<NodeRecord>> row = DecodeNodeRow(c.text);
      ASSERT_TRUE(row.ok()) << row.status().ToString();
      EXPECT_EQ(row->version, c.version);
      c.check(nullptr, &row->record, nullptr);
    } else {
      Result<Row<TokenRecord>> row = DecodeTokenRow(c.text);
      ASSERT_TRUE(row.ok()) << row.status().ToString();
      EXPECT_EQ(row->version, c.version);
      c.check(nullptr, nullptr, &row->record);
    }
  }
}

// A newer binary that only added fields writes rows an older one reads; a rewrite by the
// older one keeps what it does not know (except inside array elements).
TEST(RowCodec, UnknownFieldsOfANewerRowLoadAndSurviveARewrite) {
  const std::string newer =
      R"({"_v":6,"_min_reader":2,"id":4,"state":"PENDING","priority_boost":7,)"
      R"("req":{"gpus":2,"gpu_arch":"sm90"},"spec":{"name":"x"},)"
      R"("allocations":[{"node":"n1","gpus":"0","numa":1}]})";
  Result<Row<JobRecord>> row = DecodeJobRow(newer);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  EXPECT_EQ(row->version, 6);
  EXPECT_EQ(row->record.req.gpus, 2);
  EXPECT_EQ(row->record.spec.name, "x");
  EXPECT_EQ(json::parse(row->unknown),
            json::parse(R"({"priority_boost":7,"req":{"gpu_arch":"sm90"}})"));

  row->record.held = true;  // an edit by this (older) binary
  const json rewritten = json::parse(EncodeJobRow(row->record, row->unknown));
  EXPECT_EQ(rewritten["priority_boost"], 7);
  EXPECT_EQ(rewritten["req"]["gpu_arch"], "sm90");
  EXPECT_EQ(rewritten["req"]["gpus"], 2);
  EXPECT_EQ(rewritten["held"], true);
  EXPECT_EQ(rewritten["_v"], kJobRowFormat.version);  // the writer's own version
  EXPECT_FALSE(rewritten["allocations"][0].contains("numa"));

  Result<Row<NodeRecord>> node =
      DecodeNodeRow(R"({"_v":3,"_min_reader":1,"name":"n1","nic_count":4})");
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(json::parse(EncodeNodeRow(node->record, node->unknown))["nic_count"], 4);
}

TEST(RowCodec, ARowForNewerReadersIsRefusedNamingTheVersions) {
  Result<Row<JobRecord>> job = DecodeJobRow(R"({"_v":11,"_min_reader":10,"id":1})");
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message(),
            "row format version 11 needs a reader of version 10 or later; this hachi "
            "reads job rows up to version 9 (run a newer hachi)");
  // A MIG job's row (version 7, min reader 7) is read by this binary.
  EXPECT_TRUE(DecodeJobRow(R"({"_v":7,"_min_reader":7,"id":1})").ok());
  // Without "_min_reader" a row needs a reader of its own version.
  Result<Row<TokenRecord>> token = DecodeTokenRow(R"({"_v":3})");
  ASSERT_FALSE(token.ok());
  EXPECT_NE(token.status().message().find("version 3 needs a reader of version 3"),
            std::string::npos)
      << token.status().message();
}

struct BadCase {
  const char* name;
  const char* text;
  const char* error;  // the message must contain this
};

class JobRowErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(JobRowErrors, NameTheField) {
  Result<Row<JobRecord>> job = DecodeJobRow(GetParam().text);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kInternal);
  EXPECT_NE(job.status().message().find(GetParam().error), std::string::npos)
      << job.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, JobRowErrors,
    ::testing::Values(
        BadCase{"NotJson", "{", "job: invalid JSON"},
        BadCase{"NotAnObject", "[1]", "job: expected an object, got array"},
        BadCase{"VersionNotInt", R"({"_v":"2"})", "job._v: expected a version"},
        BadCase{"VersionZero", R"({"_v":0})", "job._v: expected a version"},
        BadCase{"MinReaderAboveVersion", R"({"_v":2,"_min_reader":3})",
                "job._min_reader: expected a version up to 2"},
        BadCase{"StringForInt", R"({"req": {"gpus": "4"}})",
                "job.req.gpus: expected an integer, got string"},
        BadCase{"IntTooBig", R"({"req": {"gpus": 4294967296}})",
                "job.req.gpus: 4294967296 is out of range"},
        BadCase{"NegativeUid", R"({"spec": {"uid": -1}})",
                "job.spec.uid: -1 is out of range"},
        BadCase{"UnknownState", R"({"state": "SUSPENDED"})",
                "job.state: unknown job state \"SUSPENDED\""},
        BadCase{"BadGpuSet", R"({"allocations": [{"gpus": "0-x"}]})",
                "job.allocations[0].gpus:"},
        BadCase{"AllocationsNotArray", R"({"allocations": {}})",
                "job.allocations: expected an array, got object"},
        BadCase{"ReqNotObject", R"({"req": 3})", "job.req: expected an object"},
        BadCase{"DependencyKind", R"({"req": {"dependencies": [{"kind": "after"}]}})",
                "job.req.dependencies[0].kind: unknown dependency kind"},
        BadCase{"EnvWithoutEquals", R"({"spec": {"env": ["PATH"]}})",
                "job.spec.env[0]: expected NAME=value"},
        BadCase{"HeldNotBool", R"({"held": 1})",
                "job.held: expected a boolean, got number"}),
    [](const ::testing::TestParamInfo<BadCase>& row) { return row.param.name; });

TEST(RowCodec, NodeAndTokenErrorsNameTheField) {
  Result<Row<NodeRecord>> node = DecodeNodeRow(R"({"unhealthy_reasons": {"x": "y"}})");
  ASSERT_FALSE(node.ok());
  EXPECT_NE(node.status().message().find("node.unhealthy_reasons: 'x' is not a GPU"),
            std::string::npos);
  node = DecodeNodeRow(R"({"state": "idle"})");
  ASSERT_FALSE(node.ok());
  EXPECT_NE(node.status().message().find("node.state: unknown node state"),
            std::string::npos);
  Result<Row<TokenRecord>> token = DecodeTokenRow(R"({"admin": "yes"})");
  ASSERT_FALSE(token.ok());
  EXPECT_NE(token.status().message().find("token.admin: expected a boolean"),
            std::string::npos);
}

// A tripwire, not a contract: when a record gains a field its size changes, and this
// fails until both codecs (state/row_codec.cc, api/record_json.cc), FullJob/FullNode/
// FullStep (testing.h), the key counts here and in api/record_json_test.cc, docs/api.md
// and the store's fixture check (store_format_test.cc) know the field; then update the
// sizes here (x86-64, g++).
TEST(RowCodec, RecordSizesMatchTheCodecs) {
  EXPECT_EQ(sizeof(JobRecord),
            888u);  // constraint .. nice, ntasks .. open_append; 20: peak, MIG;
                    // 21: usage; argv into the payload
  EXPECT_EQ(sizeof(JobSpec), 272u);            // argv into the payload
  EXPECT_EQ(sizeof(JobPayload), 80u);          // script, env, argv
  EXPECT_EQ(sizeof(sched::JobRequest), 416u);  // mig_profile
  EXPECT_EQ(sizeof(NodeAllocation), 96u);      // mig
  EXPECT_EQ(sizeof(NodeRecord), 392u);         // burn-in; 20: gpu_sharing
  EXPECT_EQ(sizeof(NodeStatus), 760u);  // 17: features (API only); 19: burn-in; 20: MPS,
                                        // mig_devices; 21: gpu_util (API only);
                                        // clock_offset_ms, pool, power (API only)
  EXPECT_EQ(sizeof(TokenRecord), 152u);
  EXPECT_EQ(sizeof(StepRecord), 184u);
}

TEST(RecordStates, NamesAndCodesParse) {
  for (JobState s : {JobState::kPending, JobState::kRunning, JobState::kCompleted,
                     JobState::kFailed, JobState::kCancelled, JobState::kTimeout,
                     JobState::kNodeFail, JobState::kOutOfMemory}) {
    JobState parsed;
    ASSERT_TRUE(ParseJobState(JobStateName(s), &parsed));
    EXPECT_EQ(parsed, s);
    ASSERT_TRUE(ParseJobState(JobStateCode(s), &parsed));
    EXPECT_EQ(parsed, s);
  }
  JobState parsed;
  EXPECT_TRUE(ParseJobState("pending", &parsed));
  EXPECT_EQ(parsed, JobState::kPending);
  EXPECT_FALSE(ParseJobState("PEND", &parsed));
  NodeState n;
  EXPECT_TRUE(ParseNodeState("Drained", &n));
  EXPECT_EQ(n, NodeState::kDrained);
  EXPECT_FALSE(ParseNodeState("idle", &n));
  EXPECT_EQ(NodeStateName(NodeState::kUp), "up");
}

}  // namespace
}  // namespace hachi::state
