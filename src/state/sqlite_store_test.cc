// What only the SQLite store has: a newer file, a busy file, a full disk; and the
// memory store. The contract both SQL stores keep is store_contract_test.cc's.
#include "state/sqlite_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "state/db.h"
#include "state/row_codec.h"
#include "state/store.h"
#include "state/testing.h"

namespace hachi::state {
namespace {

using testing::FullNode;
using testing::MakeJob;
using testing::Started;

std::string Dump(const StateImage& image) { return testing::DumpImage(image); }

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

TEST(SqliteStore, NewerSchemaIsRefused) {
  TempDir dir;
  const std::string path = dir.File("state.db");
  {
    Result<std::unique_ptr<Db>> db = Db::Open(path, 1000);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 8").ok());
  }
  Result<std::unique_ptr<Store>> store = OpenSqliteStore(path);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("schema version 8 is newer"), std::string::npos)
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
