// hachi admin migrate's copy: SQLite -> PostgreSQL -> SQLite, every table, verified, and
// the stores at both ends load the same state.
#include "state/migrate.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

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

TEST(Migrate, SqliteToPostgresAndBackLosesNothing) {
  if (testing::SkipPostgres()) GTEST_SKIP() << "HACHI_NO_POSTGRES=1";
  std::string tmpl = std::filesystem::temp_directory_path() / "hachi-migrate-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::string dir = tmpl;
  std::string why;
  const std::string pg = testing::FreshPostgresDatabase(&why);
  ASSERT_FALSE(pg.empty()) << why;

  StateImage before;
  {
    Result<std::unique_ptr<Store>> s = OpenSqliteStore(dir + "/a.db");
    ASSERT_TRUE(s.ok());
    // An array of three tasks (one payload row), a plain job held, a node, usage.
    for (JobId id = 10; id <= 12; ++id) {
      JobRecord j = testing::FullJob(id);
      j.state = JobState::kPending;
      j.held = false;
      j.spec.array_job_id = 10;
      j.spec.array_task_id = static_cast<int>(id - 10);
      j.allocations.clear();
      j.start_time = j.end_time = 0;
      ASSERT_TRUE((*s)->Commit({JobSubmitted{j}}).ok());
    }
    ASSERT_TRUE((*s)->Commit({JobHeld{11, true}}).ok());
    NodeRecord n;
    n.name = "gpu01";
    ASSERT_TRUE((*s)->Commit({NodeUpserted{n}}).ok());
    JobUsage u;
    u.job = 12;
    u.start_time = 1700000000;
    ASSERT_TRUE((*s)->SaveUsage({u}).ok());
    ASSERT_TRUE(
        (*s)->SavePowerSpells({{"b1", 1700000000, 1700000600, true, "burst", 8, 2.5}})
            .ok());
    Result<StateImage> image = (*s)->Load();
    ASSERT_TRUE(image.ok());
    before = *image;
  }
  auto pg_db = [&] {
    PgDbOptions o;
    o.conninfo = pg;
    Result<std::unique_ptr<PgDb>> db = PgDb::Open(o);
    EXPECT_TRUE(db.ok()) << db.status().ToString();
    EXPECT_TRUE(EnsurePostgresSchema(db->get()).ok());
    return std::unique_ptr<Db>(std::move(*db));
  };
  {
    Result<std::unique_ptr<Db>> a = Db::Open(dir + "/a.db", 1000);
    ASSERT_TRUE(a.ok());
    std::unique_ptr<Db> p = pg_db();
    Result<MigrateReport> r = CopyState(a->get(), p.get());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->rows.at("jobs"), 3);
    EXPECT_EQ(r->rows.at("payloads"), 1);
    EXPECT_EQ(r->rows.at("nodes"), 1);
    EXPECT_EQ(r->rows.at("usage"), 1);
    EXPECT_EQ(r->rows.at("power"), 1);
    // Into a store that holds jobs: refused, naming the table.
    Result<MigrateReport> again = CopyState(a->get(), p.get());
    ASSERT_FALSE(again.ok());
    EXPECT_NE(again.status().message().find("its payloads table holds 1 rows"),
              std::string::npos)
        << again.status().ToString();
  }
  Result<std::unique_ptr<Store>> on_pg = OpenPostgresStore(pg);
  ASSERT_TRUE(on_pg.ok());
  Result<StateImage> pg_image = (*on_pg)->Load();
  ASSERT_TRUE(pg_image.ok()) << pg_image.status().ToString();
  EXPECT_EQ(pg_image->last_job_id, 12);
  ASSERT_EQ(pg_image->jobs.size(), 3u);
  for (const auto& [id, job] : before.jobs) {
    EXPECT_EQ(EncodeJobRow(pg_image->jobs.at(id)), EncodeJobRow(job)) << id;
  }
  Result<std::vector<JobUsage>> usage = (*on_pg)->LoadUsage(12);
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ(usage->size(), 1u);
  Result<std::vector<PowerSpell>> spells = (*on_pg)->LoadPowerSpells(0, 1800000000);
  ASSERT_TRUE(spells.ok()) << spells.status().ToString();
  ASSERT_EQ(spells->size(), 1u);
  EXPECT_EQ((*spells)[0].price_per_gpu_hour, 2.5);
  {
    ASSERT_TRUE(SqliteStore::Open(dir + "/b.db", {}).ok());  // its tables
    Result<std::unique_ptr<Db>> b = Db::Open(dir + "/b.db", 1000);
    ASSERT_TRUE(b.ok());
    std::unique_ptr<Db> p = pg_db();
    Result<MigrateReport> r = CopyState(p.get(), b->get());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  Result<std::unique_ptr<Store>> back = OpenSqliteStore(dir + "/b.db");
  ASSERT_TRUE(back.ok());
  Result<StateImage> back_image = (*back)->Load();
  ASSERT_TRUE(back_image.ok());
  EXPECT_EQ(back_image->nodes.count("gpu01"), 1u);
  for (const auto& [id, job] : before.jobs) {
    EXPECT_EQ(EncodeJobRow(back_image->jobs.at(id)), EncodeJobRow(job)) << id;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hachi::state
