#include "state/sqlite_backup.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "state/store.h"
#include "state/testing.h"

namespace hachi::state {
namespace {

class SqliteBackupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = std::filesystem::temp_directory_path() / "hachi-backup-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static Status Submit(Store* store, JobId id) {
    return store->Commit({JobSubmitted{testing::SubmittedJob(id)}});
  }
  std::string dir_;
};

TEST_F(SqliteBackupTest, ACopyOfARunningStoreOpensWithEverythingCommittedBefore) {
  Result<std::unique_ptr<Store>> store = OpenSqliteStore(dir_ + "/hachi.db");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  for (JobId id = 1; id <= 200; ++id) ASSERT_TRUE(Submit(store->get(), id).ok()) << id;
  // Commits go on while the copy runs: it is a snapshot of some moment after job 200.
  std::atomic<bool> stop{false};
  std::atomic<JobId> next{201};
  std::thread writer([&] {
    while (!stop.load() && next.load() < 2000) {
      if (!Submit(store->get(), next.load()).ok()) break;
      next.fetch_add(1);
    }
  });
  Result<SqliteBackupResult> b = BackupSqlite(dir_ + "/hachi.db", dir_ + "/backup.db");
  stop.store(true);
  writer.join();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_GT(b->pages, 0);
  EXPECT_GT(b->bytes, 0);
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/backup.db").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/backup.db.part"));

  Result<std::unique_ptr<Store>> copy = OpenSqliteStore(dir_ + "/backup.db");
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  Result<StateImage> image = (*copy)->Load();
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  ASSERT_GE(image->jobs.size(), 200u);
  // A consistent prefix: jobs 1..N, none missing in between.
  const JobId last = image->jobs.rbegin()->first;
  EXPECT_EQ(image->jobs.size(), static_cast<size_t>(last));
  EXPECT_EQ(image->jobs.at(17).spec.name, testing::FullJob(17).spec.name);
}

TEST_F(SqliteBackupTest, AMissingSourceIsNamed) {
  Result<SqliteBackupResult> b = BackupSqlite(dir_ + "/nope.db", dir_ + "/backup.db");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kNotFound);
  EXPECT_NE(b.status().message().find("nope.db"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/backup.db"));
}

}  // namespace
}  // namespace hachi::state
