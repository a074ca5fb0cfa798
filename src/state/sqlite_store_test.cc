#include "state/sqlite_store.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/testing/wait_for.h"
#include "state/db.h"
#include "state/row_codec.h"
#include "state/store.h"
#include "state/testing.h"

namespace hachi::state {
namespace {

using testing::FullJob;
using testing::FullNode;
using testing::MakeJob;
using testing::Started;

// Every record as JSON text, for comparing images.
std::string Dump(const StateImage& image) {
  std::string out = "last=" + std::to_string(image.last_job_id) + "\n";
  for (const auto& [id, job] : image.jobs) out += EncodeJobRow(job) + "\n";
  for (const auto& [name, node] : image.nodes) out += EncodeNodeRow(node) + "\n";
  return out;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hachi-state-XXXXXX");
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::unique_ptr<SqlStore> MustOpen(const std::string& path, SqliteOptions options = {}) {
  Result<std::unique_ptr<SqlStore>> store = SqliteStore::Open(path, options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(*store) : nullptr;
}

StateImage MustLoad(Store& store) {
  Result<StateImage> image = store.Load();
  EXPECT_TRUE(image.ok()) << image.status().ToString();
  return image.ok() ? std::move(*image) : StateImage{};
}

std::string IntegrityCheck(const std::string& path) {
  Result<std::unique_ptr<Db>> db = Db::Open(path, 1000);
  if (!db.ok()) return db.status().ToString();
  Result<Stmt> stmt = (*db)->Prepare("PRAGMA integrity_check");
  if (!stmt.ok()) return stmt.status().ToString();
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status().ToString();
  return stmt->ColumnText(0);
}

// Commits `edits` to the store and applies them to `image` as the server would.
void CommitAndApply(Store& store, StateImage* image, const std::vector<Edit>& edits) {
  Status s = store.Commit(edits);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const Edit& e : edits) ASSERT_TRUE(ApplyEdit(image, e).ok());
}

TEST(SqliteStore, ReopenLoadsWhatWasCommitted) {
  TempDir dir;
  const std::string path = dir.File("state.db");
  StateImage expected;
  {
    std::unique_ptr<SqlStore> store = MustOpen(path);
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
  std::unique_ptr<SqlStore> store = MustOpen(path);
  ASSERT_NE(store, nullptr);
  StateImage loaded = MustLoad(*store);
  EXPECT_EQ(Dump(loaded), Dump(expected));
  EXPECT_EQ(loaded.last_job_id, 20);
  EXPECT_EQ(loaded.jobs[8].requeues, 1);
  EXPECT_EQ(loaded.jobs[8].req.time_limit, 1800);
  EXPECT_EQ(loaded.jobs[8].spec.name, "renamed");
  EXPECT_EQ(IntegrityCheck(path), "ok");
}

TEST(SqliteStore, RefusedBatchStoresNothing) {
  TempDir dir;
  std::unique_ptr<SqlStore> store = MustOpen(dir.File("state.db"));
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

TEST(SqliteStore, NewerSchemaIsRefused) {
  TempDir dir;
  const std::string path = dir.File("state.db");
  {
    Result<std::unique_ptr<Db>> db = Db::Open(path, 1000);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 7").ok());
  }
  Result<std::unique_ptr<Store>> store = OpenSqliteStore(path);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("schema version 7 is newer"), std::string::npos)
      << store.status().message();
}

TEST(SqliteStore, BusyDatabaseIsUnavailable) {
  TempDir dir;
  const std::string path = dir.File("state.db");
  SqliteOptions options;
  options.busy_timeout_ms = 50;
  std::unique_ptr<SqlStore> store = MustOpen(path, options);
  Result<std::unique_ptr<Db>> other = Db::Open(path, 0);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->Exec("BEGIN IMMEDIATE").ok());
  Status s = store->Commit({MakeJob(1).Submitted()});
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("locked"), std::string::npos) << s.message();
  ASSERT_TRUE((*other)->Exec("ROLLBACK").ok());
  EXPECT_TRUE(store->Commit({MakeJob(1).Submitted()}).ok());
}

TEST(SqliteStore, ConcurrentCommitsAreGrouped) {
  TempDir dir;
  const std::string path = dir.File("state.db");
  std::unique_ptr<SqlStore> store = MustOpen(path);
  constexpr int kThreads = 16;
  constexpr int kCommits = 200;
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
      for (int k = 0; k < kCommits; ++k) {
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
  EXPECT_EQ(stats.commits, kThreads * kCommits + 1);
  EXPECT_LT(stats.transactions, stats.commits);
  store.reset();
  std::unique_ptr<SqlStore> reopened = MustOpen(path);
  StateImage image = MustLoad(*reopened);
  for (int t = 0; t < kThreads; ++t) {
    const NodeRecord& node = image.nodes["n" + std::to_string(t)];
    EXPECT_EQ(node.state_since, kCommits - 1);
    EXPECT_EQ(node.state_reason, std::to_string(kCommits - 1));
    EXPECT_FALSE(image.jobs[t + 1].held);  // the last commit (k odd) released it
  }
}

TEST(SqliteStore, BadBatchInAGroupFailsAlone) {
  TempDir dir;
  const std::string path = dir.File("state.db");
  std::unique_ptr<SqlStore> store = MustOpen(path);
  ASSERT_TRUE(store
                  ->Commit({MakeJob(1).Submitted(), MakeJob(2).Submitted(),
                            MakeJob(3).Submitted(), MakeJob(4).Submitted()})
                  .ok());
  const int64_t transactions_before = store->stats().transactions;
  // Another connection holds the write lock, so the first caller (the leader) waits in
  // BEGIN while the next three queue up behind it and form one group.
  Result<std::unique_ptr<Db>> other = Db::Open(path, 0);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->Exec("BEGIN IMMEDIATE").ok());
  std::vector<Status> results(4);
  std::vector<std::thread> threads;
  threads.emplace_back([&] { results[0] = store->Commit({Started(4)}); });
  // The leader took its group (itself alone) and began its transaction, which waits
  // for the other connection's lock (the store's busy timeout, 5 s, outlasts this).
  EXPECT_TRUE(WaitFor([&] {
    return store->stats().transactions == transactions_before + 1 &&
           store->QueuedForTesting() == 0;
  }));
  threads.emplace_back([&] { results[1] = store->Commit({Started(1)}); });
  threads.emplace_back([&] { results[2] = store->Commit({Started(2), Started(2)}); });
  threads.emplace_back([&] { results[3] = store->Commit({Started(3)}); });
  EXPECT_TRUE(WaitFor([&] { return store->QueuedForTesting() == 3; }));
  ASSERT_TRUE((*other)->Exec("ROLLBACK").ok());
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

TEST(SqliteStore, DiskFullIsUnavailableAndRecoverable) {
  TempDir dir;
  const std::string path = dir.File("state.db");
  std::unique_ptr<SqlStore> store = MustOpen(path);
  ASSERT_TRUE(store->Commit({MakeJob(1).Submitted()}).ok());
  ASSERT_TRUE(store->SetMaxPageCountForTesting(1).ok());  // capped at today's size

  JobRecord big = MakeJob(2);
  big.spec.set_script(std::string(256 * 1024, 'x'));  // needs new pages
  Status s = store->Commit({MakeJob(3).Submitted(), Started(1)});
  // A small batch may or may not fit in the free pages left; a 256 KiB one cannot.
  if (s.ok()) {
    ASSERT_TRUE(store->Commit({JobEnded{1, JobState::kCancelled, 1, 0, 0, ""}}).ok());
  }
  const std::string fitted = Dump(MustLoad(*store));
  JobRecord big4 = big;
  big4.id = 4;
  s = store->Commit({JobSubmitted{big4}, Started(4)});
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("full"), std::string::npos) << s.message();
  EXPECT_EQ(Dump(MustLoad(*store)), fitted);  // nothing partial

  // Grouped callers all fail alone, none partially.
  std::vector<Status> results(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      JobRecord j = big;
      j.id = 10 + i;
      results[i] = store->Commit({JobSubmitted{j}});
    });
  }
  for (std::thread& th : threads) th.join();
  for (const Status& r : results) EXPECT_EQ(r.code(), StatusCode::kUnavailable);
  EXPECT_EQ(Dump(MustLoad(*store)), fitted);

  // Space returns: the same store goes on.
  ASSERT_TRUE(store->SetMaxPageCountForTesting(0).ok());
  s = store->Commit({JobSubmitted{big4}, Started(4)});
  ASSERT_TRUE(s.ok()) << s.ToString();
  store.reset();
  std::unique_ptr<SqlStore> reopened = MustOpen(path);
  StateImage image = MustLoad(*reopened);
  EXPECT_EQ(image.jobs[4].state, JobState::kRunning);
  EXPECT_EQ(image.jobs[4].spec.script().size(), big.spec.script().size());
  EXPECT_EQ(image.jobs.count(10), 0u);
  EXPECT_EQ(IntegrityCheck(path), "ok");
}

// The database's logical size (pages of the latest commit, WAL included), in bytes.
int64_t StateBytes(const std::string& path) {
  Result<std::unique_ptr<Db>> db = Db::Open(path, 1000);
  EXPECT_TRUE(db.ok());
  if (!db.ok()) return -1;
  Result<int64_t> pages = (*db)->QueryInt("PRAGMA page_count");
  Result<int64_t> size = (*db)->QueryInt("PRAGMA page_size");
  EXPECT_TRUE(pages.ok() && size.ok());
  return pages.ok() && size.ok() ? *pages * *size : -1;
}

// The 500 tasks of an array with a 1 MiB script keep one copy of it (and of
// the environment) on disk, and the loaded tasks share one copy in memory. Before, each
// task row held its own: the file grew by 500 MiB.
TEST(SqliteStore, ArrayTasksStoreTheirPayloadOnce) {
  TempDir dir;
  const std::string path = dir.File("state.db");
  std::unique_ptr<SqlStore> store = MustOpen(path);
  ASSERT_TRUE(store->Commit({MakeJob(1).Submitted()}).ok());
  const int64_t before = StateBytes(path);
  const std::string script = "#!/bin/sh\n" + std::string(1 << 20, 'x') + "\n";
  JobRecord task = MakeJob(2);
  task.spec.SetPayload(script, {{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/bob"}});
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
  const int64_t grown = StateBytes(path) - before;
  EXPECT_GT(grown, 1 << 20);
  EXPECT_LT(grown, 2 << 20) << "the script is stored more than once";

  store.reset();
  std::unique_ptr<SqlStore> reopened = MustOpen(path);
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
  EXPECT_EQ(IntegrityCheck(path), "ok");
}

// The edits of commit i (0-based) in the crash test: job i+1 submitted; every third
// commit also starts it, in the same batch.
std::vector<Edit> CrashEdits(int i) {
  std::vector<Edit> edits = {MakeJob(i + 1).Submitted()};
  if (i % 3 == 2) edits.push_back(Started(i + 1));
  return edits;
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

TEST(SqliteStore, AcknowledgedCommitsSurviveSigkill) {
  TempDir dir;
  std::mt19937 rng(std::random_device{}());
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string path = dir.File("crash" + std::to_string(round) + ".db");
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      CrashChild(path, fds[1]);
    }
    close(fds[1]);
    const int kill_after = std::uniform_int_distribution<int>(1, 120)(rng);
    int acked = -1;
    int value;
    while (acked + 1 < kill_after && read(fds[0], &value, sizeof value) == sizeof value) {
      acked = value;
    }
    // Land the kill at a random point of the next commits: a random number of yields
    // (a few microseconds each, about 0-3 ms in all) spreads it as a random sleep did,
    // without the test waiting on time.
    for (int n = std::uniform_int_distribution<int>(0, 2000)(rng); n > 0; --n) {
      sched_yield();
    }
    kill(pid, SIGKILL);
    while (read(fds[0], &value, sizeof value) == sizeof value) acked = value;
    close(fds[0]);
    int wstatus = 0;
    ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child ended early: " << wstatus;
    ASSERT_GE(acked, 0);

    EXPECT_EQ(IntegrityCheck(path), "ok");
    std::unique_ptr<SqlStore> store = MustOpen(path);
    ASSERT_NE(store, nullptr);
    StateImage image = MustLoad(*store);
    // Every acknowledged commit, whole; at most the one in flight beyond them, whole.
    const int stored = static_cast<int>(image.jobs.size());
    EXPECT_GE(stored, acked + 1);
    EXPECT_LE(stored, acked + 2);
    EXPECT_EQ(image.last_job_id, stored);
    StateImage expected;
    for (int i = 0; i < stored; ++i) {
      for (const Edit& e : CrashEdits(i)) ASSERT_TRUE(ApplyEdit(&expected, e).ok());
    }
    EXPECT_EQ(Dump(image), Dump(expected));
    // And the store goes on from there.
    EXPECT_TRUE(store->Commit(CrashEdits(stored)).ok());
  }
}

// The same contract, in memory.
TEST(MemoryStore, AppliesAtomicallyAndInjectsFailures) {
  std::unique_ptr<Store> store = NewMemoryStore(/*fail_after=*/3);
  StateImage expected;
  CommitAndApply(*store, &expected,
                 {MakeJob(1).Submitted(), NodeUpserted{FullNode("n1")}});
  EXPECT_EQ(store->Commit({MakeJob(2).Submitted(), Started(3)}).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(Dump(MustLoad(*store)), Dump(expected));
  CommitAndApply(*store, &expected, {Started(1)});
  CommitAndApply(*store, &expected,
                 {JobEnded{1, JobState::kCompleted, 9, 0, 0, ""},
                  NodeStateChanged{"n1", NodeState::kUp, "", 9}});
  Status s = store->Commit({MakeJob(2).Submitted()});
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(Dump(MustLoad(*store)), Dump(expected));
  EXPECT_EQ(store->stats().commits, 5);
}

}  // namespace
}  // namespace hachi::state
