// A standby's copy of the state (state/pg_follow.h) on a real PostgreSQL 15: it matches
// what Load reads after every kind of change, reads only the rows that changed, misses
// nothing a transaction that committed late wrote, and hands a new term's store its
// first Load.
#include "state/pg_follow.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/sha256.h"
#include "state/pg_db.h"
#include "state/pg_store.h"
#include "state/pg_testing.h"
#include "state/row_codec.h"
#include "state/sql_store.h"
#include "state/store.h"
#include "state/testing.h"

namespace hachi::state {
namespace {

using testing::MakeJob;
using testing::MakeStep;

TokenRecord Token(const std::string& id) {
  TokenRecord t;
  t.id = id;
  t.sha256 = Sha256Hex("secret of " + id);
  t.user = "alice";
  t.uid = 1000;
  t.gid = 1000;
  t.created = 1700000000;
  t.created_by = "root";
  return t;
}

std::string Dump(const StateImage& image) { return testing::DumpImage(image); }

class PgFollowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::SkipPostgres()) GTEST_SKIP() << "HACHI_NO_POSTGRES=1";
    std::string why;
    const std::string db = testing::FreshPostgresSchema(&why);
    ASSERT_FALSE(db.empty()) << why;
    ASSERT_NO_FATAL_FAILURE(OpenOn(db));
  }
  // A catch-up starts from the oldest transaction running anywhere on the server (its
  // snapshot's xmin), so other tests' transactions on the shared server make it read
  // again rows it has: a test that counts rows read runs on a server of its own.
  void OnOwnServer() {
    own_ = std::make_unique<testing::ScratchPostgres>();
    ASSERT_TRUE(own_->ok()) << own_->error();
    ASSERT_NO_FATAL_FAILURE(OpenOn(own_->conninfo()));
  }
  // The store and the follower, on database `db` (what they had before is closed).
  void OpenOn(const std::string& db) {
    follower_.reset();
    store_.reset();
    db_ = db;
    Result<std::unique_ptr<Store>> s = OpenPostgresStore(db_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
    Result<std::unique_ptr<PgFollower>> f = PgFollower::Open(db_);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    follower_ = std::move(*f);
  }
  void Commit(const std::vector<Edit>& edits) {
    Status s = store_->Commit(edits);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::string Loaded() {
    Result<StateImage> image = store_->Load();
    EXPECT_TRUE(image.ok()) << image.status().ToString();
    return image.ok() ? Dump(*image) : "";
  }
  std::string Followed() {
    Status s = follower_->CatchUp();
    EXPECT_TRUE(s.ok()) << s.ToString();
    Result<StateImage> image = follower_->Take();
    EXPECT_TRUE(image.ok()) << image.status().ToString();
    return image.ok() ? Dump(*image) : "";
  }

  std::unique_ptr<testing::ScratchPostgres> own_;  // outlives the connections below
  std::string db_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<PgFollower> follower_;
};

TEST_F(PgFollowTest, FollowsEveryKindOfChangeReadingOnlyWhatChanged) {
  ASSERT_NO_FATAL_FAILURE(OnOwnServer());
  // Twenty jobs, a node, two tokens.
  std::vector<Edit> first;
  for (JobId id = 1; id <= 20; ++id) first.push_back(MakeJob(id).Submitted());
  first.push_back(NodeUpserted{testing::FullNode("n1")});
  first.push_back(TokenIssued{Token("t1")});
  first.push_back(TokenIssued{Token("t2")});
  Commit(first);
  ASSERT_TRUE(follower_->CatchUp().ok());
  EXPECT_EQ(follower_->stats().full_reads, 1);
  EXPECT_EQ(follower_->stats().rows_last, 23);
  EXPECT_EQ(follower_->stats().jobs, 20);

  // Nothing changed: nothing read.
  ASSERT_TRUE(follower_->CatchUp().ok());
  EXPECT_EQ(follower_->stats().rows_last, 0);

  // A start, a step, a hold, a revoked token, a new job, the node's state.
  Commit({JobStarted{3, 2000, {{"n1", GpuSet::FirstN(1), 4, 1024, 0, 0}}},
          MakeStep(3, 0, 2000).Started()});
  Commit({JobHeld{4, true}, TokenRevoked{"t1"}, MakeJob(21).Submitted(),
          NodeStateChanged{"n1", NodeState::kDrained, "maintenance"}});
  ASSERT_TRUE(follower_->CatchUp().ok());
  // Jobs 3, 4, 21, the step, the node, the revoked token's note: six rows of 25.
  EXPECT_EQ(follower_->stats().rows_last, 6);
  EXPECT_EQ(follower_->stats().full_reads, 1);
  EXPECT_EQ(Followed(), Loaded());
}

TEST_F(PgFollowTest, ATransactionThatCommitsAfterALaterOneIsNotMissed) {
  Commit({MakeJob(1).Submitted()});
  ASSERT_TRUE(follower_->CatchUp().ok());
  // T1 rewrites job 1 (as the store would: a valid record and checksum) and stays open.
  JobRecord held = MakeJob(1).Held();
  const std::string record = EncodeJobRow(held);
  PgDbOptions o;
  o.conninfo = db_;
  Result<std::unique_ptr<PgDb>> t1 = PgDb::Open(o);
  ASSERT_TRUE(t1.ok()) << t1.status().ToString();
  ASSERT_TRUE((*t1)->Exec("BEGIN").ok());
  Result<Stmt> update =
      (*t1)->Prepare("UPDATE jobs SET record = ?1, sum = ?2 WHERE id = 1");
  ASSERT_TRUE(update.ok());
  update->Bind(1, record).Bind(2, RowSum("1", record));
  ASSERT_TRUE(update->Run().ok());
  // T2, begun later, commits first; the follower sees it, not T1.
  Commit({MakeJob(2).Submitted()});
  ASSERT_TRUE(follower_->CatchUp().ok());
  // Now T1 commits: its row's transaction id is older than what the follower saw.
  ASSERT_TRUE((*t1)->Exec("COMMIT").ok());
  ASSERT_TRUE(follower_->CatchUp().ok());
  Result<StateImage> image = follower_->Take();
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_TRUE(image->jobs.at(1).held);
  EXPECT_EQ(image->jobs.size(), 2u);
  EXPECT_EQ(Dump(*image), Loaded());
}

TEST_F(PgFollowTest, ATermsStoreStartsFromTheFollowedImage) {
  ASSERT_NO_FATAL_FAILURE(OnOwnServer());
  Commit({MakeJob(1).Submitted(), MakeJob(2).Submitted()});
  ASSERT_TRUE(follower_->CatchUp().ok());
  Commit({MakeJob(3).Submitted()});  // after the last catch-up: Take reads it
  const std::string expected = Loaded();
  PostgresOptions po;
  int takes = 0;
  po.first_load = [&]() -> Result<StateImage> {
    ++takes;
    return follower_->Take();
  };
  Result<std::unique_ptr<Store>> term = OpenPostgresStore(db_, po);
  ASSERT_TRUE(term.ok()) << term.status().ToString();
  Result<StateImage> first = (*term)->Load();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(Dump(*first), expected);
  EXPECT_EQ(takes, 1);
  EXPECT_EQ(follower_->stats().rows_last, 1);  // job 3 only
  // Later Loads read the tables, as always.
  Result<StateImage> again = (*term)->Load();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Dump(*again), expected);
  EXPECT_EQ(takes, 1);
  // The follower starts again from every row.
  ASSERT_TRUE(follower_->CatchUp().ok());
  EXPECT_EQ(follower_->stats().full_reads, 2);
}

TEST_F(PgFollowTest, AFirstLoadThatFailsReadsEveryRowInstead) {
  Commit({MakeJob(1).Submitted()});
  PostgresOptions po;
  std::string warned;
  po.first_load = []() -> Result<StateImage> { return Unavailable("no image"); };
  po.warn = [&](const std::string& line) { warned += line; };
  Result<std::unique_ptr<Store>> term = OpenPostgresStore(db_, po);
  ASSERT_TRUE(term.ok());
  Result<StateImage> image = (*term)->Load();
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->jobs.size(), 1u);
  EXPECT_NE(warned.find("no image"), std::string::npos) << warned;
}

TEST_F(PgFollowTest, ALayoutOneDatabaseIsUpgradedAndFollowed) {
  ASSERT_NO_FATAL_FAILURE(OnOwnServer());
  // As a layout-1 server left it: no tx columns, no triggers, no notes.
  Commit({MakeJob(1).Submitted()});
  PgDbOptions o;
  o.conninfo = db_;
  Result<std::unique_ptr<PgDb>> raw = PgDb::Open(o);
  ASSERT_TRUE(raw.ok());
  ASSERT_TRUE(
      (*raw)
          ->Exec("DROP TRIGGER hachi_stamp ON jobs; DROP TRIGGER hachi_stamp ON "
                 "nodes; DROP TRIGGER hachi_stamp ON tokens; DROP TRIGGER "
                 "hachi_stamp ON steps; ALTER TABLE jobs DROP COLUMN tx; ALTER "
                 "TABLE nodes DROP COLUMN tx; ALTER TABLE tokens DROP COLUMN tx; "
                 "ALTER TABLE steps DROP COLUMN tx; DROP TABLE hachi_gone; UPDATE "
                 "meta SET value = 1 WHERE key = 'schema_version'")
          .ok());
  Result<std::unique_ptr<PgFollower>> f = PgFollower::Open(db_);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE((*f)->CatchUp().ok());
  Commit({MakeJob(2).Submitted()});
  ASSERT_TRUE((*f)->CatchUp().ok());
  EXPECT_EQ((*f)->stats().rows_last, 1);
  EXPECT_EQ(
      (*raw)->QueryInt("SELECT value FROM meta WHERE key = 'schema_version'").value(),
      kPostgresSchemaVersion);
  Result<StateImage> image = (*f)->Take();
  ASSERT_TRUE(image.ok());
  EXPECT_EQ(Dump(*image), Loaded());
}

}  // namespace
}  // namespace hachi::state
