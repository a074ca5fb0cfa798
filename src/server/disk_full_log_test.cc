// DiskFullLog: one line when writes start failing for lack of space, none while they
// do, one when a write succeeds again; with SQLite's own full-disk failure (a database
// capped at its size) as well as written-out ones.
#include "server/disk_full_log.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "state/sqlite_store.h"
#include "state/store.h"
#include "state/testing.h"

namespace hachi::server {
namespace {

const Status kFull =
    Unavailable("/var/lib/hachi/hachi.db: COMMIT: database or disk is full");
const Status kBusy = Unavailable("/var/lib/hachi/hachi.db: BEGIN: database is locked");

struct Lines {
  std::vector<std::string> got;
  DiskFullLog::Sink Sink() {
    return [this](const std::string& line) { got.push_back(line); };
  }
};

std::optional<int64_t> TwelveMiB(const std::string&) { return 12 << 20; }

TEST(DiskFullLog, OneLineAnEpisodeStartsAndOneWhenAWriteSucceedsAgain) {
  Lines lines;
  DiskFullLog log("/var/lib/hachi/hachi.db", lines.Sink(), TwelveMiB);
  log.Note(Status::Ok());
  EXPECT_TRUE(lines.got.empty());
  log.Note(kFull);
  ASSERT_EQ(lines.got.size(), 1u);
  EXPECT_EQ(lines.got[0],
            "hachi server: the state store's writes fail for lack of space "
            "(/var/lib/hachi/hachi.db: COMMIT: database or disk is full; 12.0 MiB free "
            "beside /var/lib/hachi/hachi.db); said once until a write succeeds again");
  // While it lasts: nothing, whatever the failure.
  for (int i = 0; i < 1000; ++i) log.Note(kFull);
  log.Note(kBusy);
  EXPECT_EQ(lines.got.size(), 1u);
  log.Note(Status::Ok());
  ASSERT_EQ(lines.got.size(), 2u);
  EXPECT_EQ(lines.got[1],
            "hachi server: the state store's writes succeed again after 1002 failed");
  log.Note(Status::Ok());
  EXPECT_EQ(lines.got.size(), 2u);
  // The next episode is said again.
  log.Note(kFull);
  log.Note(Status::Ok());
  ASSERT_EQ(lines.got.size(), 4u);
  EXPECT_EQ(lines.got[3],
            "hachi server: the state store's writes succeed again after 1 failed");
}

TEST(DiskFullLog, OtherFailuresAreNotItsConcern) {
  Lines lines;
  DiskFullLog log("", lines.Sink(), TwelveMiB);
  log.Note(kBusy);
  log.Note(Internal("disk or database is full, says a bug"));  // not the store's kind
  log.Note(Status::Ok());
  EXPECT_TRUE(lines.got.empty());
  // A store without a file: no free space to tell.
  log.Note(
      Unavailable("fsync: disk I/O error (" + std::string(state::kNoSpaceLeft) + ")"));
  ASSERT_EQ(lines.got.size(), 1u);
  EXPECT_EQ(lines.got[0].find("free beside"), std::string::npos) << lines.got[0];
}

// The real thing: SQLite refusing a write because its file cannot grow (capped at its
// size, as a full disk does), then taking one again.
TEST(DiskFullLog, SqlitesFullDiskIsRecognised) {
  char tmpl[] = "/tmp/hachi-disk-full-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/state.db";
  {
    Result<std::unique_ptr<state::SqlStore>> store = state::SqliteStore::Open(path, {});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ((*store)->path(), path);
    ASSERT_TRUE((*store)->Commit({state::testing::MakeJob(1).Submitted()}).ok());
    ASSERT_TRUE((*store)->SetMaxPageCountForTesting(1).ok());
    state::JobRecord big = state::testing::MakeJob(2);
    big.spec.set_script(std::string(256 * 1024, 'x'));  // needs pages it cannot have
    const Status full = (*store)->Commit({state::JobSubmitted{big}});
    EXPECT_TRUE(state::IsNoSpace(full)) << full.ToString();
    Lines lines;
    DiskFullLog log((*store)->path(), lines.Sink());
    log.Note(full);
    ASSERT_EQ(lines.got.size(), 1u);
    EXPECT_NE(lines.got[0].find("MiB free beside " + path), std::string::npos)
        << lines.got[0];
    ASSERT_TRUE((*store)->SetMaxPageCountForTesting(0).ok());
    log.Note((*store)->Commit({state::JobSubmitted{big}}));
    ASSERT_EQ(lines.got.size(), 2u);
    EXPECT_EQ(lines.got[1],
              "hachi server: the state store's writes succeed again after 1 failed");
  }
  std::filesystem::remove_all(tmpl);
}

TEST(DiskFullLog, FreeBytesBesideAFile) {
  EXPECT_GT(FreeBytesBeside("/tmp/no-such-file-needed").value_or(-1), 0);
  EXPECT_FALSE(FreeBytesBeside("/no/such/dir/hachi.db").has_value());
}

}  // namespace
}  // namespace hachi::server
