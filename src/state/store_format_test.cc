// The store's format over versions (docs/storage.md): a database written by an earlier
// version of Hachi loads in this one. testdata/state/ keeps one small database per
// layout version, as SQL text (`sqlite3 DB .dump` plus its user_version): a fixture is
// written once, by the version it is named after, and never regenerated; a version
// that changes the format adds its own fixture and keeps every older one loading here.
//
// Also: a row from a newer binary that only added fields loads and keeps those fields
// through a rewrite; a row for newer readers is refused, naming table, row and versions;
// a database of the layout before versioning (2) opens and upgrades.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/testing/paths.h"
#include "state/db.h"
#include "state/edits.h"
#include "state/row_codec.h"
#include "state/sqlite_store.h"

namespace hachi::state {
namespace {

using nlohmann::json;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hachi-format-XXXXXX");
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string FixturePath(const std::string& name) {
  return SourceDir() + "/testdata/state/" + name;
}

// ---- the content of fixture v3.sql: what the edits below leave ----

NodeAllocation Alloc(std::string node, std::vector<int> gpus, int cpus, int64_t mem,
                     int share = 0, int64_t gpu_mem = 0) {
  return {std::move(node), GpuSet::FromIndices(gpus), cpus, mem, share, gpu_mem};
}

JobRecord FixtureJob(JobId id, std::string user, int gpus) {
  JobRecord j;
  j.id = id;
  j.req.gpus = gpus;
  j.req.user = user;
  j.req.account = "vision";
  j.req.partition = "gpu8";
  j.req.time_limit = 3600;
  j.spec.name = "train-" + std::to_string(id);
  j.spec.set_argv({"python", "train.py", "--lr=0.1"});
  j.spec.workdir = "/home/" + user;
  j.spec.set_env({{"PATH", "/usr/bin:/bin"}, {"EQ", "a=b"}});
  j.spec.uid = 1000;
  j.spec.gid = 100;
  j.submit_time = 1700000000 + id;
  return j;
}

// Every kind of edit the server commits, over a small cluster: jobs pending, held,
// running (a gang over two nodes; a GPU share), completed, failed, requeued; an array
// of three tasks; two nodes, one drained with unhealthy GPUs; two tokens, one revoked.
std::vector<Edit> FixtureEdits() {
  std::vector<Edit> e;
  NodeRecord n1;
  n1.name = "n1";
  n1.address = "10.0.0.1:7070";
  n1.topology_json = R"({"gpus":[{"index":0},{"index":1}],"source":"preset hgx-h100"})";
  n1.cpus = 96;
  n1.memory_mib = 1 << 20;
  n1.block = "leaf1";
  n1.state = NodeState::kUp;
  n1.state_since = 1700000001;
  n1.agent_instance = "a-1111";
  n1.cgroup = "v2";
  NodeRecord n2 = n1;
  n2.name = "n2";
  n2.address = "10.0.0.2:7070";
  n2.block = "leaf2";
  n2.agent_instance = "a-2222";
  n2.cgroup = "v1";
  e.push_back(NodeUpserted{n1});
  e.push_back(NodeUpserted{n2});
  e.push_back(NodeStateChanged{"n2", NodeState::kDrained, "fan failure", 1700000050});
  e.push_back(NodeHealthChanged{
      "n2",
      GpuSet::FromIndices({2, 5}),
      {{2, "Xid 79: GPU has fallen off the bus"}, {5, "ECC: double-bit error"}}});

  JobRecord pending = FixtureJob(1, "alice", 1);
  pending.req.dependencies = {{sched::DependencyKind::kAfterOk, 3},
                              {sched::DependencyKind::kAfterAny, 4}};
  pending.spec.comment = "waits for 3 and 4";
  e.push_back(JobSubmitted{pending});

  JobRecord held = FixtureJob(2, "bob", 2);
  held.held = true;
  held.spec.set_script("#!/bin/sh\necho \"résumé\"\n");
  held.spec.stdout_path = "out-%j.txt";
  held.spec.stderr_path = "err-%j.txt";
  e.push_back(JobSubmitted{held});

  JobRecord gang = FixtureJob(3, "alice", 8);
  gang.req.nodes = 2;
  gang.req.gpus_per_node = 4;
  gang.req.cpus_per_gpu = 6;
  gang.req.memory_mib_per_gpu = 65536;
  gang.req.exclusive = true;
  gang.req.gpu_model = "NVIDIA H100 80GB HBM3";
  gang.spec.container_image = "nvcr.io/nvidia/pytorch:24.01";
  gang.spec.shm_mib = 8192;
  gang.spec.requeue = true;
  e.push_back(JobSubmitted{gang});
  e.push_back(JobStarted{
      3,
      1700000100,
      {Alloc("n1", {0, 1, 2, 3}, 24, 262144), Alloc("n2", {0, 1, 3, 4}, 24, 262144)}});

  JobRecord share = FixtureJob(4, "carol", 1);
  share.req.gpu_share_milli = 250;
  share.req.gpu_memory_mib = 20480;
  share.req.qos = "low";
  e.push_back(JobSubmitted{share});
  e.push_back(JobStarted{4, 1700000110, {Alloc("n1", {7}, 2, 8192, 250, 20480)}});

  e.push_back(JobSubmitted{FixtureJob(5, "bob", 1)});
  e.push_back(JobStarted{5, 1700000120, {Alloc("n1", {5}, 4, 1024)}});
  e.push_back(JobEnded{5, JobState::kCompleted, 1700000180, 0, 0, ""});

  e.push_back(JobSubmitted{FixtureJob(6, "bob", 1)});
  e.push_back(JobStarted{6, 1700000130, {Alloc("n2", {6}, 4, 1024)}});
  e.push_back(JobEnded{6, JobState::kFailed, 1700000190, 137, 9, "killed by signal 9"});

  JobRecord requeued = FixtureJob(7, "dave", 1);
  requeued.spec.requeue = true;
  e.push_back(JobSubmitted{requeued});
  e.push_back(JobStarted{7, 1700000140, {Alloc("n2", {2}, 4, 1024)}});
  e.push_back(JobRequeued{7, "node n2 down"});

  for (int task = 0; task < 3; ++task) {
    JobRecord t = FixtureJob(8 + task, "erin", 1);
    t.spec.array_job_id = 8;
    t.spec.array_task_id = task;
    t.spec.array_max_running = 2;
    t.spec.stdout_path = "array-%A_%a.out";
    e.push_back(JobSubmitted{t});
  }
  e.push_back(JobStarted{8, 1700000150, {Alloc("n1", {4}, 4, 1024)}});
  e.push_back(JobEnded{10, JobState::kCancelled, 1700000160, 0, 0, "cancelled by erin"});

  e.push_back(TokenIssued{TokenRecord{"0123456789ab", std::string(64, 'a'), "alice", 1000,
                                      100, false, 1700000010, "root"}});
  e.push_back(TokenIssued{TokenRecord{"ba9876543210", std::string(64, 'b'), "ops",
                                      4000000000u, 0, true, 1700000020, "root"}});
  e.push_back(TokenIssued{TokenRecord{"ffffffffffff", std::string(64, 'c'), "mallory",
                                      1001, 100, false, 1700000030, "root"}});
  e.push_back(TokenRevoked{"ffffffffffff"});
  return e;
}

// Layout 5: FixtureEdits() and then steps. Job 3's gang ran a step on both
// nodes and has one running on n2; array task 8 ran one that failed.
std::vector<Edit> FixtureEditsV5() {
  std::vector<Edit> e = FixtureEdits();
  StepRecord all;
  all.job = 3;
  all.job_start = 1700000100;
  all.step = 0;
  all.name = "torchrun";
  all.user = "alice";
  all.nodes = {"n1", "n2"};
  all.ntasks = 8;
  all.cpus = 48;
  all.gpus = 8;
  all.start_time = 1700000105;
  e.push_back(StepStarted{all});
  e.push_back(StepEnded{{3, 1700000100, 0}, JobState::kCompleted, 1700000170, 0, 0, ""});
  StepRecord one = all;
  one.step = 1;
  one.name = "eval \xff";  // bytes, not UTF-8
  one.nodes = {"n2"};
  one.ntasks = 1;
  one.cpus = 6;
  one.gpus = 1;
  one.start_time = 1700000175;
  e.push_back(StepStarted{one});
  StepRecord task;
  task.job = 8;
  task.job_start = 1700000150;
  task.name = "python";
  task.user = "erin";
  task.nodes = {"n1"};
  task.ntasks = 2;
  task.cpus = 4;
  task.gpus = 1;
  task.start_time = 1700000151;
  e.push_back(StepStarted{task});
  e.push_back(StepEnded{
      {8, 1700000150, 0}, JobState::kFailed, 1700000159, 1, 0, "task 1 exited 1"});
  return e;
}

StateImage ImageOf(const std::vector<Edit>& edits) {
  StateImage image;
  for (const Edit& e : edits) {
    Status s = ApplyEdit(&image, e);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  return image;
}
StateImage FixtureImage() { return ImageOf(FixtureEdits()); }

// ---- member-by-member comparison (not through a codec, which could drop a field
// on both sides) ----

void ExpectSame(const JobRecord& w, const JobRecord& g) {
  SCOPED_TRACE("job " + std::to_string(w.id));
  EXPECT_EQ(g.id, w.id);
  const sched::JobRequest &wr = w.req, &gr = g.req;
  EXPECT_EQ(gr.gpus, wr.gpus);
  EXPECT_EQ(gr.nodes, wr.nodes);
  EXPECT_EQ(gr.gpus_per_node, wr.gpus_per_node);
  EXPECT_EQ(gr.cpus_per_gpu, wr.cpus_per_gpu);
  EXPECT_EQ(gr.cpus, wr.cpus);
  EXPECT_EQ(gr.memory_mib_per_gpu, wr.memory_mib_per_gpu);
  EXPECT_EQ(gr.memory_mib, wr.memory_mib);
  EXPECT_EQ(gr.gpu_model, wr.gpu_model);
  EXPECT_EQ(gr.min_gpu_memory_mib, wr.min_gpu_memory_mib);
  EXPECT_EQ(gr.partition, wr.partition);
  EXPECT_EQ(gr.qos, wr.qos);
  EXPECT_EQ(gr.user, wr.user);
  EXPECT_EQ(gr.account, wr.account);
  EXPECT_EQ(gr.time_limit, wr.time_limit);
  EXPECT_EQ(gr.exclusive, wr.exclusive);
  ASSERT_EQ(gr.dependencies.size(), wr.dependencies.size());
  for (size_t i = 0; i < wr.dependencies.size(); ++i) {
    EXPECT_EQ(gr.dependencies[i].kind, wr.dependencies[i].kind);
    EXPECT_EQ(gr.dependencies[i].job, wr.dependencies[i].job);
  }
  EXPECT_EQ(gr.gpu_share_milli, wr.gpu_share_milli);
  EXPECT_EQ(gr.gpu_memory_mib, wr.gpu_memory_mib);
  const JobSpec &ws = w.spec, &gs = g.spec;
  EXPECT_EQ(gs.name, ws.name);
  EXPECT_EQ(gs.argv(), ws.argv());
  EXPECT_EQ(gs.script(), ws.script());
  EXPECT_EQ(gs.workdir, ws.workdir);
  EXPECT_EQ(gs.env(), ws.env());
  EXPECT_EQ(gs.stdout_path, ws.stdout_path);
  EXPECT_EQ(gs.stderr_path, ws.stderr_path);
  EXPECT_EQ(gs.uid, ws.uid);
  EXPECT_EQ(gs.gid, ws.gid);
  EXPECT_EQ(gs.container_image, ws.container_image);
  EXPECT_EQ(gs.shm_mib, ws.shm_mib);
  EXPECT_EQ(gs.requeue, ws.requeue);
  EXPECT_EQ(gs.array_job_id, ws.array_job_id);
  EXPECT_EQ(gs.array_task_id, ws.array_task_id);
  EXPECT_EQ(gs.array_max_running, ws.array_max_running);
  EXPECT_EQ(gs.comment, ws.comment);
  EXPECT_EQ(g.state, w.state);
  EXPECT_EQ(g.held, w.held);
  EXPECT_EQ(g.submit_time, w.submit_time);
  EXPECT_EQ(g.start_time, w.start_time);
  EXPECT_EQ(g.end_time, w.end_time);
  ASSERT_EQ(g.allocations.size(), w.allocations.size());
  for (size_t i = 0; i < w.allocations.size(); ++i) {
    const NodeAllocation &wa = w.allocations[i], &ga = g.allocations[i];
    EXPECT_EQ(ga.node, wa.node);
    EXPECT_EQ(ga.gpus, wa.gpus);
    EXPECT_EQ(ga.cpus, wa.cpus);
    EXPECT_EQ(ga.memory_mib, wa.memory_mib);
    EXPECT_EQ(ga.share_milli, wa.share_milli);
    EXPECT_EQ(ga.gpu_memory_mib, wa.gpu_memory_mib);
  }
  EXPECT_EQ(g.exit_code, w.exit_code);
  EXPECT_EQ(g.signal, w.signal);
  EXPECT_EQ(g.reason, w.reason);
  EXPECT_EQ(g.requeues, w.requeues);
}

void ExpectSame(const NodeRecord& w, const NodeRecord& g) {
  SCOPED_TRACE("node " + w.name);
  EXPECT_EQ(g.name, w.name);
  EXPECT_EQ(g.address, w.address);
  EXPECT_EQ(g.topology_json, w.topology_json);
  EXPECT_EQ(g.cpus, w.cpus);
  EXPECT_EQ(g.memory_mib, w.memory_mib);
  EXPECT_EQ(g.block, w.block);
  EXPECT_EQ(g.state, w.state);
  EXPECT_EQ(g.state_reason, w.state_reason);
  EXPECT_EQ(g.state_since, w.state_since);
  EXPECT_EQ(g.unhealthy, w.unhealthy);
  EXPECT_EQ(g.unhealthy_reasons, w.unhealthy_reasons);
  EXPECT_EQ(g.agent_instance, w.agent_instance);
  EXPECT_EQ(g.cgroup, w.cgroup);
}

void ExpectSame(const TokenRecord& w, const TokenRecord& g) {
  SCOPED_TRACE("token " + w.id);
  EXPECT_EQ(g.id, w.id);
  EXPECT_EQ(g.sha256, w.sha256);
  EXPECT_EQ(g.user, w.user);
  EXPECT_EQ(g.uid, w.uid);
  EXPECT_EQ(g.gid, w.gid);
  EXPECT_EQ(g.admin, w.admin);
  EXPECT_EQ(g.created, w.created);
  EXPECT_EQ(g.created_by, w.created_by);
}

void ExpectSame(const StepRecord& w, const StepRecord& g) {
  SCOPED_TRACE("step " + std::to_string(w.job) + "." + std::to_string(w.step));
  EXPECT_EQ(g.job, w.job);
  EXPECT_EQ(g.job_start, w.job_start);
  EXPECT_EQ(g.step, w.step);
  EXPECT_EQ(g.name, w.name);
  EXPECT_EQ(g.user, w.user);
  EXPECT_EQ(g.nodes, w.nodes);
  EXPECT_EQ(g.ntasks, w.ntasks);
  EXPECT_EQ(g.cpus, w.cpus);
  EXPECT_EQ(g.gpus, w.gpus);
  EXPECT_EQ(g.state, w.state);
  EXPECT_EQ(g.start_time, w.start_time);
  EXPECT_EQ(g.end_time, w.end_time);
  EXPECT_EQ(g.exit_code, w.exit_code);
  EXPECT_EQ(g.signal, w.signal);
  EXPECT_EQ(g.reason, w.reason);
}

void ExpectSame(const StateImage& want, const StateImage& got) {
  EXPECT_EQ(got.last_job_id, want.last_job_id);
  ASSERT_EQ(got.jobs.size(), want.jobs.size());
  for (const auto& [id, job] : want.jobs) {
    ASSERT_EQ(got.jobs.count(id), 1u) << id;
    ExpectSame(job, got.jobs.at(id));
  }
  ASSERT_EQ(got.nodes.size(), want.nodes.size());
  for (const auto& [name, node] : want.nodes) {
    ASSERT_EQ(got.nodes.count(name), 1u) << name;
    ExpectSame(node, got.nodes.at(name));
  }
  ASSERT_EQ(got.tokens.size(), want.tokens.size());
  for (const auto& [id, token] : want.tokens) {
    ASSERT_EQ(got.tokens.count(id), 1u) << id;
    ExpectSame(token, got.tokens.at(id));
  }
  ASSERT_EQ(got.steps.size(), want.steps.size());
  for (const auto& [key, step] : want.steps) {
    ASSERT_EQ(got.steps.count(key), 1u) << key.job << "." << key.step;
    ExpectSame(step, got.steps.at(key));
  }
}

// Builds a database from a fixture's SQL.
void BuildFromSql(const std::string& sql_path, const std::string& db_path) {
  std::ifstream in(sql_path);
  ASSERT_TRUE(in) << sql_path;
  std::stringstream sql;
  sql << in.rdbuf();
  Result<std::unique_ptr<Db>> db = Db::Open(db_path, 1000);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  Status s = (*db)->Exec(sql.str());
  ASSERT_TRUE(s.ok()) << s.ToString();
}

std::unique_ptr<SqlStore> MustOpen(const std::string& path) {
  Result<std::unique_ptr<SqlStore>> store = SqliteStore::Open(path, {});
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(*store) : nullptr;
}

std::string RowText(const std::string& db_path, const std::string& sql) {
  Result<std::unique_ptr<Db>> db = Db::Open(db_path, 1000);
  EXPECT_TRUE(db.ok());
  Result<Stmt> stmt = (*db)->Prepare(sql);
  EXPECT_TRUE(stmt.ok()) << stmt.status().ToString();
  Result<bool> row = stmt->Step();
  EXPECT_TRUE(row.ok() && *row) << sql;
  return row.ok() && *row ? stmt->ColumnText(0) : "";
}

void ExecSql(const std::string& db_path, const std::string& sql) {
  Result<std::unique_ptr<Db>> db = Db::Open(db_path, 1000);
  ASSERT_TRUE(db.ok());
  Status s = (*db)->Exec(sql);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

// Rows written by hand (ExecSql) get their checksums, as --accept-edited-rows gives
// them: the tests below are about the rows' versions, not about their checksums.
void Seal(const std::string& db_path) {
  SqliteOptions o;
  o.accept_edited_rows = true;
  Result<std::unique_ptr<SqlStore>> store = SqliteStore::Open(db_path, o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
}

// The database this version writes for FixtureEdits() loads, every field as written.
TEST(StoreFormat, FixtureV3Loads) {
  TempDir dir;
  const std::string db = dir.File("state.db");
  BuildFromSql(FixturePath("v3.sql"), db);
  std::unique_ptr<SqlStore> store = MustOpen(db);
  ASSERT_NE(store, nullptr);
  Result<StateImage> got = store->Load();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSame(FixtureImage(), *got);
  // Spot checks that do not depend on ApplyEdit.
  EXPECT_EQ(got->jobs.size(), 10u);
  EXPECT_EQ(got->last_job_id, 10);
  EXPECT_EQ(got->jobs.at(3).state, JobState::kRunning);
  EXPECT_EQ(got->jobs.at(3).allocations.at(1).gpus, GpuSet::FromIndices({0, 1, 3, 4}));
  EXPECT_EQ(got->jobs.at(4).allocations.at(0).share_milli, 250);
  EXPECT_EQ(got->jobs.at(6).state, JobState::kFailed);
  EXPECT_EQ(got->jobs.at(7).requeues, 1);
  EXPECT_EQ(got->jobs.at(9).spec.array_task_id, 1);
  EXPECT_EQ(got->jobs.at(10).state, JobState::kCancelled);
  EXPECT_EQ(got->nodes.at("n2").state, NodeState::kDrained);
  EXPECT_EQ(got->nodes.at("n2").unhealthy, GpuSet::FromIndices({2, 5}));
  EXPECT_EQ(got->tokens.size(), 2u);
  EXPECT_TRUE(got->tokens.at("ba9876543210").admin);
  // And the store goes on from it: the next id, and an edit of a stored row.
  EXPECT_TRUE(store->Commit({JobHeld{1, true}}).ok());
  JobRecord next = FixtureJob(11, "alice", 1);
  EXPECT_TRUE(store->Commit({JobSubmitted{next}}).ok());
  EXPECT_EQ(store->Commit({JobSubmitted{FixtureJob(10, "alice", 1)}}).code(),
            StatusCode::kInvalidArgument);
}

// Layout 4: the array's three tasks name one payloads row, and load sharing
// one payload; every row has its checksum.
TEST(StoreFormat, FixtureV4Loads) {
  TempDir dir;
  const std::string db = dir.File("state.db");
  BuildFromSql(FixturePath("v4.sql"), db);
  EXPECT_EQ(RowText(db, "SELECT count(*) FROM payloads"), "1");
  EXPECT_EQ(RowText(db, "SELECT count(*) FROM jobs WHERE payload = 8"), "3");
  std::unique_ptr<SqlStore> store = MustOpen(db);
  ASSERT_NE(store, nullptr);
  Result<StateImage> got = store->Load();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSame(FixtureImage(), *got);
  ASSERT_NE(got->jobs.at(8).spec.payload, nullptr);
  EXPECT_EQ(got->jobs.at(9).spec.payload, got->jobs.at(8).spec.payload);
  EXPECT_EQ(got->jobs.at(10).spec.payload, got->jobs.at(8).spec.payload);
  EXPECT_NE(got->jobs.at(7).spec.payload, got->jobs.at(8).spec.payload);
}

// Layout 5: a layout-4 file opens, gains the steps table in the upgrade's
// transaction (now user_version 7 with the usage and power tables, min_reader_schema
// still 4), and takes steps; they load after a reopen.
TEST(StoreFormat, FixtureV4GainsTheStepsTable) {
  TempDir dir;
  const std::string db = dir.File("state.db");
  BuildFromSql(FixturePath("v4.sql"), db);
  EXPECT_EQ(RowText(db, "SELECT count(*) FROM sqlite_master WHERE name = 'steps'"), "0");
  std::unique_ptr<SqlStore> store = MustOpen(db);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(RowText(db, "PRAGMA user_version"), "7");
  EXPECT_EQ(RowText(db, "SELECT value FROM meta WHERE key = 'min_reader_schema'"), "4");
  const std::vector<Edit> all = FixtureEditsV5();
  const std::vector<Edit> steps(all.begin() + FixtureEdits().size(), all.end());
  for (const Edit& e : steps) {
    Status s = store->Commit({e});
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  store.reset();
  store = MustOpen(db);
  ASSERT_NE(store, nullptr);
  Result<StateImage> got = store->Load();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSame(ImageOf(all), *got);
  EXPECT_EQ(got->steps.size(), 3u);
}

// Layout 5: the fixture's steps, ended and running, load as written.
TEST(StoreFormat, FixtureV5Loads) {
  TempDir dir;
  const std::string db = dir.File("state.db");
  BuildFromSql(FixturePath("v5.sql"), db);
  EXPECT_EQ(RowText(db, "SELECT count(*) FROM steps"), "3");
  std::unique_ptr<SqlStore> store = MustOpen(db);
  ASSERT_NE(store, nullptr);
  Result<StateImage> got = store->Load();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSame(ImageOf(FixtureEditsV5()), *got);
  // Spot checks that do not depend on ApplyEdit.
  EXPECT_EQ(got->steps.at({3, 1700000100, 0}).state, JobState::kCompleted);
  EXPECT_EQ(got->steps.at({3, 1700000100, 1}).state, JobState::kRunning);
  EXPECT_EQ(got->steps.at({3, 1700000100, 1}).name, "eval \xff");
  EXPECT_EQ(got->steps.at({8, 1700000150, 0}).exit_code, 1);
  // And the store goes on from it: the run's next step, and its running one ended.
  StepRecord next = got->steps.at({3, 1700000100, 1});
  next.step = 2;
  EXPECT_TRUE(store->Commit({StepStarted{next}}).ok());
  EXPECT_TRUE(store
                  ->Commit({StepEnded{
                      {3, 1700000100, 1}, JobState::kCancelled, 1700000180, 0, 15, ""}})
                  .ok());
}

// Job rows of version 7 (and before) that name a payloads row hold their argv
// themselves: they load with it, joined with the payloads row's script and environment
// (the tasks of an array still share one payload), and a rewrite keeps it in the row,
// readable by version 7 still. A new array's tasks leave their argv in the payloads row.
TEST(StoreFormat, ArgvInVersion7TaskRowsLoadsAndStays) {
  TempDir dir;
  const std::string db = dir.File("state.db");
  MustOpen(db).reset();
  ExecSql(db, R"sql(
INSERT INTO meta VALUES ('last_job_id', 9);
INSERT INTO payloads (id, record) VALUES (8, '{"_v":1,"_min_reader":1,"script":"#!/bin/sh\necho $1\n","env":["A=b"]}');
INSERT INTO jobs (id, state, record, payload) VALUES (8, 'PENDING', '{"_v":7,"_min_reader":6,"id":8,"state":"PENDING","req":{"gpus":1,"user":"erin"},"spec":{"argv":["--epochs","3"],"array_job_id":8,"array_task_id":0,"payload":8}}', 8);
INSERT INTO jobs (id, state, record, payload) VALUES (9, 'PENDING', '{"_v":7,"_min_reader":6,"id":9,"state":"PENDING","req":{"gpus":1,"user":"erin"},"spec":{"argv":["--epochs","3"],"array_job_id":8,"array_task_id":1,"payload":8}}', 8);
)sql");
  Seal(db);
  std::unique_ptr<SqlStore> store = MustOpen(db);
  ASSERT_NE(store, nullptr);
  Result<StateImage> got = store->Load();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const std::vector<std::string> argv = {"--epochs", "3"};
  for (JobId id : {8, 9}) {
    const JobSpec& spec = got->jobs.at(id).spec;
    EXPECT_EQ(spec.argv(), argv) << id;
    EXPECT_EQ(spec.script(), "#!/bin/sh\necho $1\n") << id;
    EXPECT_EQ(spec.env(), (EnvList{{"A", "b"}})) << id;
  }
  EXPECT_EQ(got->jobs.at(8).spec.payload, got->jobs.at(9).spec.payload);
  Result<std::shared_ptr<const JobPayload>> loaded = store->LoadPayload(9);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)->argv, argv);
  EXPECT_EQ((*loaded)->script, "#!/bin/sh\necho $1\n");

  ASSERT_TRUE(store->Commit({JobHeld{9, true}}).ok());
  JobRecord task = FixtureJob(20, "erin", 1);
  task.spec.set_argv({"/bin/echo", "new"});
  task.spec.array_job_id = 20;
  ASSERT_TRUE(store->Commit({JobSubmitted{task}}).ok());
  store.reset();
  const json old_row = json::parse(RowText(db, "SELECT record FROM jobs WHERE id = 9"));
  EXPECT_EQ(old_row["held"], true);
  EXPECT_EQ(old_row["spec"]["argv"], json(argv)) << "a rewrite keeps the row's argv";
  EXPECT_LE(old_row["_min_reader"], 7) << "still readable by the binary that wrote it";
  const json new_row = json::parse(RowText(db, "SELECT record FROM jobs WHERE id = 20"));
  EXPECT_FALSE(new_row["spec"].contains("argv")) << new_row.dump();
  EXPECT_EQ(new_row["_min_reader"], 8);
  const json payload =
      json::parse(RowText(db, "SELECT record FROM payloads WHERE id = 20"));
  EXPECT_EQ(payload["argv"], json({"/bin/echo", "new"}));

  store = MustOpen(db);
  ASSERT_NE(store, nullptr);
  got = store->Load();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->jobs.at(9).spec.argv(), argv);
  EXPECT_TRUE(got->jobs.at(9).held);
  EXPECT_EQ(got->jobs.at(20).spec.argv(), (std::vector<std::string>{"/bin/echo", "new"}));
  EXPECT_EQ(got->jobs.at(20).spec.env(), task.spec.env());
}

// Writes testdata/state/vN.sql's database; run once, by hand, when a version changes
// the format (then name the new fixture after the new kSchemaVersion and keep the old):
//   HACHI_STORE_FIXTURE_DB=/tmp/v5.db build/src/state/state_test
//     --gtest_also_run_disabled_tests --gtest_filter=StoreFormat.DISABLED_WriteFixture
//   (sqlite3 /tmp/v5.db .dump; echo 'PRAGMA user_version=5;') > testdata/state/v5.sql
// (then the comment lines at the fixture's top, as the others have).
TEST(StoreFormat, DISABLED_WriteFixture) {
  const char* out = getenv("HACHI_STORE_FIXTURE_DB");
  ASSERT_NE(out, nullptr) << "set HACHI_STORE_FIXTURE_DB";
  std::filesystem::remove(out);
  std::unique_ptr<SqlStore> store = MustOpen(out);
  ASSERT_NE(store, nullptr);
  // One edit per commit, as the server commits them.
  for (const Edit& e : FixtureEditsV5()) ASSERT_TRUE(store->Commit({e}).ok());
  ASSERT_EQ(SqliteStore::kSchemaVersion, 5);
}

// A database of layout 2 (before rows were versioned: rows in the API's JSON of the
// time) opens, is upgraded to the current layout, and its rows load and are rewritten
// in the current row format.
TEST(StoreFormat, LayoutBeforeVersioningOpensAndUpgrades) {
  TempDir dir;
  const std::string db = dir.File("state.db");
  ExecSql(db, R"sql(
CREATE TABLE jobs (id INTEGER PRIMARY KEY, state TEXT NOT NULL, record TEXT NOT NULL) STRICT;
CREATE INDEX jobs_by_state ON jobs(state);
CREATE TABLE nodes (name TEXT PRIMARY KEY, record TEXT NOT NULL) STRICT;
CREATE TABLE meta (key TEXT PRIMARY KEY, value ANY) STRICT;
CREATE TABLE tokens (id TEXT PRIMARY KEY, record TEXT NOT NULL) STRICT;
INSERT INTO meta VALUES ('last_job_id', 12);
INSERT INTO jobs VALUES (12, 'PENDING', '{"allocations":[],"end_time":0,"exit_code":0,"held":false,"id":12,"reason":"","req":{"account":"","cpus":0,"cpus_per_gpu":0,"dependencies":[],"exclusive":false,"gpu_memory_mib":0,"gpu_model":"","gpu_share_milli":0,"gpus":4,"gpus_per_node":0,"memory_mib":0,"memory_mib_per_gpu":0,"min_gpu_memory_mib":0,"nodes":1,"partition":"gpu","qos":"","time_limit":60,"user":"bob"},"requeues":0,"signal":0,"spec":{"argv":["true"],"array_job_id":0,"array_max_running":0,"array_task_id":-1,"comment":"","container_image":"","env":[],"gid":0,"name":"t","requeue":false,"script":"","shm_mib":0,"stderr_path":"","stdout_path":"","uid":1000,"workdir":"/"},"start_time":0,"state":"PENDING","submit_time":5}');
INSERT INTO nodes VALUES ('n1', '{"address":"h","agent_instance":"","block":"","cpus":8,"memory_mib":64,"name":"n1","state":"up","state_reason":"","state_since":0,"topology_json":"{}","unhealthy":"","unhealthy_reasons":{}}');
INSERT INTO tokens VALUES ('abc', '{"admin":true,"created":1,"created_by":"root","gid":0,"id":"abc","sha256":"00","uid":0,"user":"root"}');
PRAGMA user_version = 2;
)sql");
  std::unique_ptr<SqlStore> store = MustOpen(db);
  ASSERT_NE(store, nullptr);
  Result<StateImage> got = store->Load();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->last_job_id, 12);
  EXPECT_EQ(got->jobs.at(12).req.gpus, 4);
  EXPECT_EQ(got->nodes.at("n1").cpus, 8);
  EXPECT_TRUE(got->tokens.at("abc").admin);
  ASSERT_TRUE(store->Commit({JobHeld{12, true}}).ok());
  store.reset();
  const json row = json::parse(RowText(db, "SELECT record FROM jobs WHERE id = 12"));
  EXPECT_EQ(row["_v"], kJobRowFormat.version);
  EXPECT_EQ(row["held"], true);
  EXPECT_EQ(RowText(db, "PRAGMA user_version"), "7");
}

// A newer binary added fields (and said an older reader may read its rows): they load,
// and an edit by this binary keeps them.
TEST(StoreFormat, NewerRowsWithAddedFieldsLoadAndKeepThem) {
  TempDir dir;
  const std::string db = dir.File("state.db");
  MustOpen(db).reset();
  ExecSql(db, R"sql(
INSERT INTO meta VALUES ('last_job_id', 3);
INSERT INTO jobs (id, state, record) VALUES (3, 'PENDING', '{"_v":7,"_min_reader":2,"id":3,"state":"PENDING","req":{"gpus":1,"user":"bob","gpu_arch":"sm90"},"priority_boost":5}');
INSERT INTO nodes (name, record) VALUES ('n1', '{"_v":7,"_min_reader":1,"name":"n1","state":"up","nic_count":4}');
)sql");
  Seal(db);
  std::unique_ptr<SqlStore> store = MustOpen(db);
  ASSERT_NE(store, nullptr);
  Result<StateImage> got = store->Load();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->jobs.at(3).req.gpus, 1);
  ASSERT_TRUE(store->Commit({JobHeld{3, true}}).ok());
  ASSERT_TRUE(store->Commit({NodeStateChanged{"n1", NodeState::kDrained, "x", 9}}).ok());
  store.reset();
  const json job = json::parse(RowText(db, "SELECT record FROM jobs WHERE id = 3"));
  EXPECT_EQ(job["held"], true);
  EXPECT_EQ(job["priority_boost"], 5);
  EXPECT_EQ(job["req"]["gpu_arch"], "sm90");
  const json node =
      json::parse(RowText(db, "SELECT record FROM nodes WHERE name = 'n1'"));
  EXPECT_EQ(node["state"], "drained");
  EXPECT_EQ(node["nic_count"], 4);
}

// A row that says it needs a newer reader is refused, naming table, row and versions,
// both by Load and by an edit of that row.
TEST(StoreFormat, RowsForNewerReadersAreRefused) {
  TempDir dir;
  const std::string db = dir.File("state.db");
  MustOpen(db).reset();
  ExecSql(db, R"sql(
INSERT INTO jobs (id, state, record) VALUES (17, 'PENDING', '{"_v":11,"_min_reader":10,"id":17,"state":"PENDING"}');
)sql");
  Seal(db);
  std::unique_ptr<SqlStore> store = MustOpen(db);
  ASSERT_NE(store, nullptr);
  Result<StateImage> got = store->Load();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(got.status().message(),
            db + ": jobs row 17: row format version 11 needs a reader of version 10 or "
                 "later; this hachi reads job rows up to version 9 (run a newer hachi)");
  Status held = store->Commit({JobHeld{17, true}});
  EXPECT_EQ(held.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(held.message().find("jobs row 17: row format version 11"), std::string::npos)
      << held.message();
}

// A newer layout opens when it says this layout may use it, else it is refused.
TEST(StoreFormat, NewerLayoutOpensWhenItsMinReaderAllows) {
  TempDir dir;
  const std::string db = dir.File("state.db");
  MustOpen(db).reset();
  ExecSql(db, "PRAGMA user_version = 8");
  EXPECT_NE(MustOpen(db), nullptr);                    // min_reader_schema is still 4
  EXPECT_EQ(RowText(db, "PRAGMA user_version"), "8");  // left as it is
  ExecSql(db, "UPDATE meta SET value = 8 WHERE key = 'min_reader_schema'");
  Result<std::unique_ptr<SqlStore>> refused = SqliteStore::Open(db, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("schema version 8 is newer than this hachi "
                                            "knows (7)"),
            std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace hachi::state
