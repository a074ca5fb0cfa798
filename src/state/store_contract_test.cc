// The Store contract (store.h) on both SQL engines, one suite: what was committed loads
// after a reopen; a refused batch stores nothing; concurrent commits share
// transactions; a bad batch in a group fails alone; an array's payload is stored once;
// acknowledged commits survive a crash — of the writer for SQLite (SIGKILL), of the
// server for PostgreSQL (SIGKILL of the postmaster, then a restart). What only one
// engine has is in sqlite_store_test.cc (a full disk, a busy file, a newer file) and
// pg_store_test.cc (the fence, reconnection, a lost COMMIT answer, the lease row).
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/testing/wait_for.h"
#include "state/db.h"
#include "state/pg_db.h"
#include "state/pg_store.h"
#include "state/pg_testing.h"
#include "state/row_codec.h"
#include "state/sqlite_store.h"
#include "state/store.h"
#include "state/testing.h"

namespace hachi::state {
namespace {

using testing::FullJob;
using testing::FullNode;
using testing::MakeJob;
using testing::Started;

std::string Dump(const StateImage& image) { return testing::DumpImage(image); }

StateImage MustLoad(Store& store) {
  Result<StateImage> image = store.Load();
  EXPECT_TRUE(image.ok()) << image.status().ToString();
  return image.ok() ? std::move(*image) : StateImage{};
}

// Commits `edits` to the store and applies them to `image` as the server would.
void CommitAndApply(Store& store, StateImage* image, const std::vector<Edit>& edits) {
  Status s = store.Commit(edits);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const Edit& e : edits) ASSERT_TRUE(ApplyEdit(image, e).ok());
}

// The edits of commit i (0-based) in the crash test: job i+1 submitted; every third
// commit also starts it, in the same batch.
std::vector<Edit> CrashEdits(int i) {
  std::vector<Edit> edits = {MakeJob(i + 1).Submitted()};
  if (i % 3 == 2) edits.push_back(Started(i + 1));
  return edits;
}

// Lands a crash at a random point of the next commits: a random number of yields (a
// few microseconds each, about 0-3 ms in all) spreads it as a random sleep would,
// without the test waiting on time.
void RandomPause(std::mt19937* rng) {
  for (int n = std::uniform_int_distribution<int>(0, 2000)(*rng); n > 0; --n) {
    sched_yield();
  }
}

// Child: commits one batch after another and reports each acknowledged one.
[[noreturn]] void CrashChild(const std::string& path, int fd) {
  Result<std::unique_ptr<Store>> store = OpenSqliteStore(path);
  if (!store.ok()) _exit(2);
  for (int i = 0; i < 100000; ++i) {
    if (!(*store)->Commit(CrashEdits(i)).ok()) _exit(3);
    if (write(fd, &i, sizeof i) != sizeof i) _exit(4);
  }
  _exit(0);
}

class StoreContractTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (postgres()) {
      if (testing::SkipPostgres()) GTEST_SKIP() << "HACHI_NO_POSTGRES=1";
      std::string why;
      conninfo_ = testing::FreshPostgresSchema(&why);
      ASSERT_FALSE(conninfo_.empty()) << why;
      return;
    }
    std::string tmpl = std::filesystem::temp_directory_path() / "hachi-contract-XXXXXX";
    dir_ = ::mkdtemp(tmpl.data());
    conninfo_ = dir_ + "/state.db";
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  bool postgres() const { return std::string(GetParam()) == "postgres"; }

  // The store at `conninfo` (default: this test's file, or schema of the shared server).
  std::unique_ptr<SqlStore> Open(std::string conninfo = "") {
    if (conninfo.empty()) conninfo = conninfo_;
    Result<std::unique_ptr<SqlStore>> s =
        postgres() ? OpenPostgresSqlStore(conninfo, {})
                   : SqliteStore::Open(conninfo, SqliteOptions{});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  // A second connection to the same database, for what the store cannot say itself.
  std::unique_ptr<Db> Connect() {
    if (postgres()) {
      PgDbOptions o;
      o.conninfo = conninfo_;
      Result<std::unique_ptr<PgDb>> db = PgDb::Open(o);
      EXPECT_TRUE(db.ok()) << db.status().ToString();
      return db.ok() ? std::move(*db) : nullptr;
    }
    Result<std::unique_ptr<Db>> db = Db::Open(conninfo_, 0);
    EXPECT_TRUE(db.ok()) << db.status().ToString();
    return db.ok() ? std::move(*db) : nullptr;
  }
  // Holds the lock a writer needs first: SQLite's write lock; PostgreSQL's on table jobs
  // (a writer's first read waits for it).
  Status Block(Db* other) {
    return other->Exec(postgres() ? "BEGIN; LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE"
                                  : "BEGIN IMMEDIATE");
  }
  // The bytes of the records of jobs and payloads (what an array's tasks would store
  // many times over if each held the payload).
  int64_t RecordBytes() {
    std::unique_ptr<Db> db = Connect();
    if (db == nullptr) return -1;
    Result<int64_t> n = db->QueryInt(
        "SELECT (SELECT COALESCE(sum(length(record)), 0) FROM jobs) + "
        "(SELECT COALESCE(sum(length(record)), 0) FROM payloads)");
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return n.ok() ? *n : -1;
  }
  // SQLite: the file's logical size (pages of the latest commit, WAL included); -1 on
  // PostgreSQL, whose tables compress a repeated text (TOAST) and so say nothing here.
  int64_t FileBytes() {
    if (postgres()) return -1;
    std::unique_ptr<Db> db = Connect();
    Result<int64_t> pages = db->QueryInt("PRAGMA page_count");
    Result<int64_t> size = db->QueryInt("PRAGMA page_size");
    EXPECT_TRUE(pages.ok() && size.ok());
    return pages.ok() && size.ok() ? *pages * *size : -1;
  }
  // SQLite's integrity_check ("ok"); PostgreSQL has none to run ("ok").
  std::string Integrity() {
    if (postgres()) return "ok";
    std::unique_ptr<Db> db = Connect();
    Result<Stmt> stmt = db->Prepare("PRAGMA integrity_check");
    if (!stmt.ok()) return stmt.status().ToString();
    Result<bool> row = stmt->Step();
    if (!row.ok()) return row.status().ToString();
    return stmt->ColumnText(0);
  }

  // One crash while commits go on; returns the index of the last acknowledged commit
  // and leaves the store's state where the next Open finds it.
  int CrashSqliteWriter(const std::string& path, std::mt19937* rng);
  int CrashPostgresServer(testing::ScratchPostgres* pg, const std::string& conninfo,
                          std::mt19937* rng);
  // Checks what a crash left: every acknowledged commit, whole; at most the one in
  // flight beyond them, whole; and the store goes on from there.
  void CheckAfterCrash(Store& store, int acked);

  std::string dir_;
  std::string conninfo_;
};

TEST_P(StoreContractTest, ReopenLoadsWhatWasCommitted) {
  StateImage expected;
  {
    std::unique_ptr<SqlStore> store = Open();
    ASSERT_NE(store, nullptr);
    CommitAndApply(*store, &expected,
                   {NodeUpserted{FullNode("n1")}, NodeUpserted{FullNode("n2")}});
    JobRecord full = FullJob(7);
    full.held = false;
    CommitAndApply(*store, &expected, {JobSubmitted{full}, MakeJob(8).Submitted()});
    CommitAndApply(*store, &expected, {Started(7)});
    CommitAndApply(*store, &expected,
                   {JobEnded{7, JobState::kCompleted, 5000, 0, 0, ""}, Started(8, "n2")});
    CommitAndApply(*store, &expected, {JobRequeued{8, "node n2 down"}, JobHeld{8, true}});
    sched::JobRequest changed = expected.jobs[8].req;  // scontrol update
    changed.time_limit = 1800;
    changed.constraint = "h100";
    CommitAndApply(*store, &expected, {JobUpdated{8, changed, "renamed", "a note"}});
    CommitAndApply(*store, &expected,
                   {NodeStateChanged{"n2", NodeState::kDown, "agent silent 30s", 6000}});
    CommitAndApply(*store, &expected, {MakeJob(20).Submitted()});
    EXPECT_EQ(Dump(MustLoad(*store)), Dump(expected));
  }
  std::unique_ptr<SqlStore> store = Open();
  ASSERT_NE(store, nullptr);
  StateImage loaded = MustLoad(*store);
  EXPECT_EQ(Dump(loaded), Dump(expected));
  EXPECT_EQ(loaded.last_job_id, 20);
  EXPECT_EQ(loaded.jobs[8].requeues, 1);
  EXPECT_EQ(loaded.jobs[8].req.time_limit, 1800);
  EXPECT_EQ(loaded.jobs[8].spec.name, "renamed");
  EXPECT_EQ(loaded.jobs[7].spec.env(), FullJob(7).spec.env());
  EXPECT_EQ(Integrity(), "ok");
}

TEST_P(StoreContractTest, RefusedBatchStoresNothing) {
  std::unique_ptr<SqlStore> store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Commit({MakeJob(1).Submitted()}).ok());
  const std::string before = Dump(MustLoad(*store));
  Status s = store->Commit({MakeJob(2).Submitted(), Started(2), Started(99)});
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_EQ(Dump(MustLoad(*store)), before);
  s = store->Commit({MakeJob(1).Submitted()});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(Dump(MustLoad(*store)), before);
  EXPECT_TRUE(store->Commit({MakeJob(2).Submitted()}).ok());
}

TEST_P(StoreContractTest, ConcurrentCommitsAreGrouped) {
  std::unique_ptr<SqlStore> store = Open();
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 16;
  // PostgreSQL's commit is a dozen round trips: fewer of them keep the test quick.
  const int commits = postgres() ? 50 : 200;
  std::vector<Edit> setup;
  for (int t = 0; t < kThreads; ++t) {
    setup.emplace_back(std::in_place_type<JobSubmitted>, MakeJob(t + 1));
    setup.emplace_back(std::in_place_type<NodeUpserted>,
                       FullNode("n" + std::to_string(t)));
  }
  ASSERT_TRUE(store->Commit(setup).ok());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < commits; ++k) {
        // Two edits in order; each commit toggles the hold of the thread's own job.
        Status s = store->Commit({NodeStateChanged{"n" + std::to_string(t),
                                                   NodeState::kUp, std::to_string(k), k},
                                  JobHeld{t + 1, k % 2 == 0}});
        if (!s.ok()) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  const StoreStats stats = store->stats();
  EXPECT_EQ(stats.commits, kThreads * commits + 1);
  EXPECT_LT(stats.transactions, stats.commits);
  store.reset();
  std::unique_ptr<SqlStore> reopened = Open();
  StateImage image = MustLoad(*reopened);
  for (int t = 0; t < kThreads; ++t) {
    const NodeRecord& node = image.nodes["n" + std::to_string(t)];
    EXPECT_EQ(node.state_since, commits - 1);
    EXPECT_EQ(node.state_reason, std::to_string(commits - 1));
    EXPECT_FALSE(image.jobs[t + 1].held);  // the last commit (k odd) released it
  }
}

TEST_P(StoreContractTest, BadBatchInAGroupFailsAlone) {
  std::unique_ptr<SqlStore> store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store
                  ->Commit({MakeJob(1).Submitted(), MakeJob(2).Submitted(),
                            MakeJob(3).Submitted(), MakeJob(4).Submitted()})
                  .ok());
  const int64_t transactions_before = store->stats().transactions;
  // Another connection holds the lock the first caller (the leader) needs, so it waits
  // in its transaction while the next three queue up behind it and form one group.
  std::unique_ptr<Db> other = Connect();
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(Block(other.get()).ok());
  std::vector<Status> results(4);
  std::vector<std::thread> threads;
  threads.emplace_back([&] { results[0] = store->Commit({Started(4)}); });
  // The leader took its group (itself alone) and began its transaction, which waits
  // for the other connection's lock (SQLite's busy timeout, 5 s, outlasts this;
  // PostgreSQL waits as long as it takes).
  EXPECT_TRUE(WaitFor([&] {
    return store->stats().transactions == transactions_before + 1 &&
           store->QueuedForTesting() == 0;
  }));
  threads.emplace_back([&] { results[1] = store->Commit({Started(1)}); });
  threads.emplace_back([&] { results[2] = store->Commit({Started(2), Started(2)}); });
  threads.emplace_back([&] { results[3] = store->Commit({Started(3)}); });
  EXPECT_TRUE(WaitFor([&] { return store->QueuedForTesting() == 3; }));
  ASSERT_TRUE(other->Exec("ROLLBACK").ok());
  for (std::thread& th : threads) th.join();
  EXPECT_TRUE(results[0].ok()) << results[0].ToString();
  EXPECT_TRUE(results[1].ok()) << results[1].ToString();
  EXPECT_EQ(results[2].code(), StatusCode::kInvalidArgument) << results[2].ToString();
  EXPECT_TRUE(results[3].ok()) << results[3].ToString();
  StateImage image = MustLoad(*store);
  EXPECT_EQ(image.jobs[1].state, JobState::kRunning);
  EXPECT_EQ(image.jobs[2].state, JobState::kPending);  // its first edit rolled back too
  EXPECT_EQ(image.jobs[3].state, JobState::kRunning);
  EXPECT_EQ(image.jobs[4].state, JobState::kRunning);
  // The leader's own transaction, then one for the group of three.
  EXPECT_EQ(store->stats().transactions - transactions_before, 2);
}

// The 500 tasks of an array with a 1 MiB script keep one copy of it (and of the
// environment) in the database, and the loaded tasks share one copy in memory. Before,
// each task row held its own: the file grew by 500 MiB.
TEST_P(StoreContractTest, ArrayTasksStoreTheirPayloadOnce) {
  std::unique_ptr<SqlStore> store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Commit({MakeJob(1).Submitted()}).ok());
  const int64_t records_before = RecordBytes();
  const int64_t file_before = FileBytes();
  const std::string script = "#!/bin/sh\n" + std::string(1 << 20, 'x') + "\n";
  JobRecord task = MakeJob(2);
  task.spec.SetPayload({script, {{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/bob"}}, {}});
  std::vector<Edit> edits;
  for (int i = 0; i < 500; ++i) {
    JobRecord t = task;
    t.id = 2 + i;
    t.spec.array_job_id = 2;
    t.spec.array_task_id = i;
    edits.push_back(JobSubmitted{t});
  }
  ASSERT_TRUE(store->Commit(edits).ok());
  ASSERT_TRUE(store
                  ->Commit({Started(3), JobEnded{4, JobState::kCancelled, 3000, 0, 0,
                                                 "cancelled by bob"}})
                  .ok());
  const int64_t records = RecordBytes() - records_before;
  EXPECT_GT(records, 1 << 20);
  EXPECT_LT(records, 2 << 20) << "the script is stored more than once";
  if (!postgres()) {
    const int64_t grown = FileBytes() - file_before;
    EXPECT_GT(grown, 1 << 20);
    EXPECT_LT(grown, 2 << 20) << "the script is stored more than once";
  }

  store.reset();
  std::unique_ptr<SqlStore> reopened = Open();
  StateImage image = MustLoad(*reopened);
  ASSERT_EQ(image.jobs.size(), 501u);
  const JobPayload* shared = image.jobs[2].spec.payload.get();
  ASSERT_NE(shared, nullptr);
  for (JobId id = 2; id < 502; ++id) {
    const JobSpec& spec = image.jobs[id].spec;
    EXPECT_EQ(spec.payload.get(), shared) << id;
    EXPECT_EQ(spec.script(), script) << id;
    ASSERT_EQ(spec.env().size(), 2u) << id;
    EXPECT_EQ(spec.env()[1].second, "/home/bob") << id;
  }
  EXPECT_EQ(image.jobs[3].state, JobState::kRunning);
  EXPECT_EQ(image.jobs[4].state, JobState::kCancelled);
  EXPECT_EQ(image.jobs[1].spec.payload, nullptr);  // a single job: inline, here empty
  Result<std::shared_ptr<const JobPayload>> one = reopened->LoadPayload(300);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ((*one)->script, script);
  EXPECT_EQ(Integrity(), "ok");
}

// The same for an array's argv (`hachi submit --array=1-500 -- cmd <1 MB of arguments>`):
// one copy in the payloads row, none in the tasks' rows, and every loaded task shares
// it, a task whose row was rewritten (started, ended) too. Before, each task row held
// its own: the file grew by 500 MiB.
TEST_P(StoreContractTest, ArrayTasksStoreTheirArgvOnce) {
  std::unique_ptr<SqlStore> store = Open();
  ASSERT_NE(store, nullptr);
  JobRecord single = MakeJob(1);
  single.spec.set_argv({"/bin/true", "x"});
  ASSERT_TRUE(store->Commit({JobSubmitted{single}}).ok());
  const int64_t records_before = RecordBytes();
  const int64_t file_before = FileBytes();
  std::vector<std::string> argv = {"/bin/echo"};
  for (int i = 0; i < 1024; ++i) argv.push_back(std::string(1023, 'a' + i % 26));
  JobRecord task = MakeJob(2);
  task.spec.SetPayload({"", {{"PATH", "/usr/bin:/bin"}}, argv});
  std::vector<Edit> edits;
  for (int i = 0; i < 500; ++i) {
    JobRecord t = task;
    t.id = 2 + i;
    t.spec.array_job_id = 2;
    t.spec.array_task_id = i;
    edits.push_back(JobSubmitted{t});
  }
  ASSERT_TRUE(store->Commit(edits).ok());
  ASSERT_TRUE(store
                  ->Commit({Started(3), JobEnded{4, JobState::kCancelled, 3000, 0, 0,
                                                 "cancelled by bob"}})
                  .ok());
  const int64_t records = RecordBytes() - records_before;
  EXPECT_GT(records, 1 << 20);
  EXPECT_LT(records, 2 << 20) << "the argv is stored more than once";
  if (!postgres()) {
    const int64_t grown = FileBytes() - file_before;
    EXPECT_GT(grown, 1 << 20);
    EXPECT_LT(grown, 2 << 20) << "the argv is stored more than once";
  }

  store.reset();
  std::unique_ptr<SqlStore> reopened = Open();
  StateImage image = MustLoad(*reopened);
  ASSERT_EQ(image.jobs.size(), 501u);
  const JobPayload* shared = image.jobs[2].spec.payload.get();
  ASSERT_NE(shared, nullptr);
  for (JobId id = 2; id < 502; ++id) {
    const JobSpec& spec = image.jobs[id].spec;
    EXPECT_EQ(spec.payload.get(), shared) << id;
    ASSERT_EQ(spec.argv().size(), argv.size()) << id;
    EXPECT_EQ(spec.argv(), argv) << id;
    ASSERT_EQ(spec.env().size(), 1u) << id;
  }
  EXPECT_EQ(image.jobs[3].state, JobState::kRunning);
  EXPECT_EQ(image.jobs[4].state, JobState::kCancelled);
  EXPECT_EQ(image.jobs[1].spec.argv(), single.spec.argv()) << "a single job's: inline";
  Result<std::shared_ptr<const JobPayload>> one = reopened->LoadPayload(4);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ((*one)->argv, argv);
  EXPECT_EQ(Integrity(), "ok");
}

int StoreContractTest::CrashSqliteWriter(const std::string& path, std::mt19937* rng) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  EXPECT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    CrashChild(path, fds[1]);
  }
  close(fds[1]);
  const int kill_after = std::uniform_int_distribution<int>(1, 120)(*rng);
  int acked = -1;
  int value;
  while (acked + 1 < kill_after && read(fds[0], &value, sizeof value) == sizeof value) {
    acked = value;
  }
  RandomPause(rng);
  kill(pid, SIGKILL);
  while (read(fds[0], &value, sizeof value) == sizeof value) acked = value;
  close(fds[0]);
  int wstatus = 0;
  EXPECT_EQ(waitpid(pid, &wstatus, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(wstatus)) << "child ended early: " << wstatus;
  return acked;
}

int StoreContractTest::CrashPostgresServer(testing::ScratchPostgres* pg,
                                           const std::string& conninfo,
                                           std::mt19937* rng) {
  PostgresOptions o;
  o.reconnect_ms = 0;  // the server stays down until the writer has stopped
  Result<std::unique_ptr<Store>> store = OpenPostgresStore(conninfo, o);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (!store.ok()) return -1;
  std::atomic<int> acked{-1};
  std::thread writer([&] {
    for (int i = 0; i < 100000; ++i) {
      if (!(*store)->Commit(CrashEdits(i)).ok()) return;
      acked = i;
    }
  });
  const int kill_after = std::uniform_int_distribution<int>(1, 120)(*rng);
  EXPECT_TRUE(WaitFor([&] { return acked.load() + 1 >= kill_after; }));
  RandomPause(rng);
  pg->Kill();
  writer.join();
  EXPECT_TRUE(pg->Start()) << pg->error();
  return acked.load();
}

// Empties the PostgreSQL database at `conninfo`: the next store makes its tables anew.
bool DropTables(const std::string& conninfo) {
  PgDbOptions o;
  o.conninfo = conninfo;
  Result<std::unique_ptr<PgDb>> db = PgDb::Open(o);
  return db.ok() &&
         (*db)
             ->Exec(
                 "DROP TABLE IF EXISTS jobs, nodes, meta, tokens, payloads, steps, "
                 "usage, hachi_leader")
             .ok();
}

void StoreContractTest::CheckAfterCrash(Store& store, int acked) {
  StateImage image = MustLoad(store);
  const int stored = static_cast<int>(image.jobs.size());
  EXPECT_GE(stored, acked + 1);
  EXPECT_LE(stored, acked + 2);
  EXPECT_EQ(image.last_job_id, stored);
  StateImage expected;
  for (int i = 0; i < stored; ++i) {
    for (const Edit& e : CrashEdits(i)) ASSERT_TRUE(ApplyEdit(&expected, e).ok());
  }
  EXPECT_EQ(Dump(image), Dump(expected));
  EXPECT_TRUE(store.Commit(CrashEdits(stored)).ok());
}

TEST_P(StoreContractTest, AcknowledgedCommitsSurviveACrash) {
  std::mt19937 rng(std::random_device{}());
  // PostgreSQL: a server of its own (the shared one serves other tests meanwhile), its
  // tables made anew each round (a new database would cost its copy, and the crash
  // recovery's fsync of every file, each round), killed while a commit is written.
  std::unique_ptr<testing::ScratchPostgres> pg;
  if (postgres()) {
    pg = std::make_unique<testing::ScratchPostgres>();
    ASSERT_TRUE(pg->ok()) << pg->error();
  }
  const int rounds = postgres() ? 3 : 6;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string name = "crash" + std::to_string(round);
    std::string where;
    int acked = -1;
    if (postgres()) {
      where = pg->conninfo();
      ASSERT_TRUE(DropTables(where));
      acked = CrashPostgresServer(pg.get(), where, &rng);
    } else {
      where = dir_ + "/" + name + ".db";
      acked = CrashSqliteWriter(where, &rng);
      conninfo_ = where;  // Integrity() checks this file
      EXPECT_EQ(Integrity(), "ok");
    }
    ASSERT_GE(acked, 0);
    std::unique_ptr<SqlStore> store = Open(where);
    ASSERT_NE(store, nullptr);
    CheckAfterCrash(*store, acked);
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, StoreContractTest,
                         ::testing::Values("sqlite", "postgres"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param);
                         });

}  // namespace
}  // namespace hachi::state
