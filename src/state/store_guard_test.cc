// A state database that lost its schema is not a first start, and a
// row edited outside Hachi is found at the next start (docs/storage.md, "Guarding
// the file").
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "state/db.h"
#include "state/row_codec.h"
#include "state/sqlite_store.h"
#include "state/testing.h"

namespace hachi::state {
namespace {

using testing::MakeJob;
using testing::MakeStep;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hachi-guard-XXXXXX");
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void ExecSql(const std::string& path, const std::string& sql) {
  Result<std::unique_ptr<Db>> db = Db::Open(path, 1000);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  Status s = (*db)->Exec(sql);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

// A database with jobs 1..3 committed, closed.
void MakeDatabase(const std::string& path) {
  Result<std::unique_ptr<SqlStore>> store = SqliteStore::Open(path, {});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)
                  ->Commit({MakeJob(1).Submitted(), MakeJob(2).Submitted(),
                            MakeJob(3).Submitted()})
                  .ok());
}

TEST(StoreGuard, ANewFileIsAFirstStart) {
  TempDir dir;
  const std::string path = dir.File("hachi.db");
  Result<std::unique_ptr<SqlStore>> store = SqliteStore::Open(path, {});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Result<StateImage> image = (*store)->Load();
  ASSERT_TRUE(image.ok());
  EXPECT_EQ(image->last_job_id, 0);
}

// Truncated to nothing: refused, naming the file and the flag; --init then starts an
// empty cluster on it.
TEST(StoreGuard, AnEmptyFileIsRefusedUnlessInitialised) {
  TempDir dir;
  const std::string path = dir.File("hachi.db");
  MakeDatabase(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
  std::filesystem::resize_file(path, 0);

  Result<std::unique_ptr<SqlStore>> refused = SqliteStore::Open(path, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      refused.status().message(),
      path +
          ": the state database is empty (0 bytes); refusing to start a new cluster "
          "on it (job ids would start again at 1). Restore it from a backup, or "
          "start with --init to make a new, empty one");
  EXPECT_EQ(std::filesystem::file_size(path), 0u) << "a refused file is left as it was";

  SqliteOptions init;
  init.initialize = true;
  Result<std::unique_ptr<SqlStore>> store = SqliteStore::Open(path, init);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->Commit({MakeJob(1).Submitted()}).ok());
  store->reset();
  // Initialised once, it opens without the flag.
  Result<std::unique_ptr<SqlStore>> again = SqliteStore::Open(path, {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  Result<StateImage> image = (*again)->Load();
  ASSERT_TRUE(image.ok());
  EXPECT_EQ(image->jobs.size(), 1u);
}

TEST(StoreGuard, AFileWithoutTheSchemaIsRefused) {
  TempDir dir;
  const std::string path = dir.File("hachi.db");
  MakeDatabase(path);
  ExecSql(
      path,
      "DROP TABLE jobs; DROP TABLE nodes; DROP TABLE meta; DROP TABLE tokens; "
      "DROP TABLE payloads; DROP TABLE steps; DROP TABLE usage; PRAGMA user_version = 0");
  Result<std::unique_ptr<SqlStore>> refused = SqliteStore::Open(path, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(path + ": the state database holds no Hachi "
                                                   "tables; refusing"),
            std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("--init"), std::string::npos);

  // One table lost, the layout version kept.
  const std::string other = dir.File("other.db");
  MakeDatabase(other);
  ExecSql(other, "DROP TABLE jobs");
  refused = SqliteStore::Open(other, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("lost some of its tables (2 of jobs, nodes, "
                                            "meta are there)"),
            std::string::npos)
      << refused.status().message();
  SqliteOptions init;
  init.initialize = true;
  Result<std::unique_ptr<SqlStore>> store = SqliteStore::Open(other, init);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Result<StateImage> image = (*store)->Load();
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_TRUE(image->jobs.empty());
  EXPECT_EQ(image->last_job_id, 3) << "meta survived: ids go on after 3";
}

// A job row changed with sqlite3 (its owner made another user) without its checksum: the
// next Load refuses, naming the row; --accept-edited-rows keeps it, naming it once.
TEST(StoreGuard, AnEditedRowIsReportedByName) {
  TempDir dir;
  const std::string path = dir.File("hachi.db");
  MakeDatabase(path);
  ExecSql(path,
          "UPDATE jobs SET record = replace(record, '\"user\":\"bob\"', "
          "'\"user\":\"eve\"') WHERE id = 2");
  {
    Result<std::unique_ptr<SqlStore>> store = SqliteStore::Open(path, {});
    ASSERT_TRUE(store.ok()) << store.status().ToString();  // found by Load, per row
    Result<StateImage> image = (*store)->Load();
    ASSERT_FALSE(image.ok());
    EXPECT_EQ(
        image.status().message(),
        path +
            ": jobs row 2: its checksum does not match its record (edited outside "
            "hachi, or damaged); restore the file from a backup, or start once with "
            "--accept-edited-rows to keep the row as it is");
  }
  std::vector<std::string> warned;
  SqliteOptions accept;
  accept.accept_edited_rows = true;
  accept.warn = [&](const std::string& line) { warned.push_back(line); };
  {
    Result<std::unique_ptr<SqlStore>> store = SqliteStore::Open(path, accept);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    Result<StateImage> image = (*store)->Load();
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    EXPECT_EQ(image->jobs.size(), 3u);
  }
  EXPECT_EQ(warned, std::vector<std::string>{
                        path + ": jobs row 2: its checksum did not match; kept as it is "
                               "(--accept-edited-rows)"});
  // Resealed: a plain open loads it from now on.
  Result<std::unique_ptr<SqlStore>> store = SqliteStore::Open(path, {});
  ASSERT_TRUE(store.ok());
  EXPECT_TRUE((*store)->Load().ok());
  // A checksum removed is reported too.
  store->reset();
  ExecSql(path, "UPDATE jobs SET sum = NULL WHERE id = 3");
  store = SqliteStore::Open(path, {});
  ASSERT_TRUE(store.ok());
  Result<StateImage> image = (*store)->Load();
  ASSERT_FALSE(image.ok());
  EXPECT_NE(image.status().message().find("jobs row 3: has no checksum"),
            std::string::npos)
      << image.status().message();
}

// A step row is guarded as the others are: edited, or moved to another key,
// it is refused by name; --accept-edited-rows reseals it under the same key text the
// store writes (kSummed's SQL and StepRowKey agree).
TEST(StoreGuard, AnEditedStepRowIsReportedByName) {
  TempDir dir;
  const std::string path = dir.File("hachi.db");
  MakeDatabase(path);
  {
    Result<std::unique_ptr<SqlStore>> store = SqliteStore::Open(path, {});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Commit({testing::Started(1), MakeStep(1, 0).Started()}).ok());
  }
  ExecSql(path,
          "UPDATE steps SET record = replace(record, '\"user\":\"bob\"', "
          "'\"user\":\"eve\"')");
  auto load = [&](const SqliteOptions& options) {
    Result<std::unique_ptr<SqlStore>> store = SqliteStore::Open(path, options);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? (*store)->Load() : Result<StateImage>(store.status());
  };
  Result<StateImage> image = load({});
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().message(),
            path +
                ": steps row 1.0@2000: its checksum does not match its record (edited "
                "outside hachi, or damaged); restore the file from a backup, or start "
                "once with --accept-edited-rows to keep the row as it is");
  std::vector<std::string> warned;
  SqliteOptions accept;
  accept.accept_edited_rows = true;
  accept.warn = [&](const std::string& line) { warned.push_back(line); };
  image = load(accept);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->steps.at({1, 2000, 0}).user, "eve");
  EXPECT_EQ(warned, std::vector<std::string>{
                        path + ": steps row 1.0@2000: its checksum did not match; kept "
                               "as it is (--accept-edited-rows)"});
  image = load({});
  ASSERT_TRUE(image.ok()) << image.status().ToString();

  // The same record under another key: its checksum covers the key.
  ExecSql(path, "UPDATE steps SET step = 1");
  image = load({});
  ASSERT_FALSE(image.ok());
  EXPECT_NE(image.status().message().find(
                "steps row 1.1@2000: its checksum does not match its record"),
            std::string::npos)
      << image.status().message();
  // Resealed by hand, it is still refused: the row holds another step than its key.
  image = load(accept);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().message(), path + ": steps row 1.1@2000 holds step 1.0@2000");
}

// SQLite's quick_check at open: a page of the file overwritten is refused.
TEST(StoreGuard, ADamagedFileFailsTheQuickCheck) {
  TempDir dir;
  const std::string path = dir.File("hachi.db");
  {
    Result<std::unique_ptr<SqlStore>> store = SqliteStore::Open(path, {});
    ASSERT_TRUE(store.ok());
    std::vector<Edit> edits;
    for (JobId id = 1; id <= 200; ++id) edits.push_back(MakeJob(id).Submitted());
    ASSERT_TRUE((*store)->Commit(edits).ok());
  }
  ExecSql(path, "PRAGMA wal_checkpoint(TRUNCATE)");
  const int64_t page = 4096;
  ASSERT_GT(std::filesystem::file_size(path), static_cast<uintmax_t>(4 * page));
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2 * page + 8);  // inside a b-tree page, past its header's first bytes
    const std::string junk(512, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  Result<std::unique_ptr<SqlStore>> refused = SqliteStore::Open(path, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("quick_check"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace hachi::state
