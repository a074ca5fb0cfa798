// What only the PostgreSQL store has, on a real PostgreSQL 15 the tests start
// (state/pg_testing.h): a newer layout, an edited row refused by name, what several
// controllers need — the epoch fence, the lease row — and reconnection, a server that
// cannot write, a commit whose answer was lost. The contract both SQL stores keep is
// store_contract_test.cc's.
#include "state/pg_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/testing/wait_for.h"
#include "state/leader_lease.h"
#include "state/pg_db.h"
#include "state/pg_testing.h"
#include "state/sql_store.h"
#include "state/store.h"
#include "state/testing.h"

namespace hachi::state {
namespace {

JobRecord Pending(JobId id) { return testing::SubmittedJob(id); }

// The first COMMIT `raw` sends loses its answer: the client's socket becomes /dev/null
// once the COMMIT is on its way, so the answer can never be read, whatever is buffered.
// *cut says it happened.
void LoseTheFirstCommitsAnswer(PgDb* raw, bool* cut) {
  raw->SetAfterCommitSentForTesting([raw, cut] {
    if (*cut) return;
    *cut = true;
    const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    ::dup2(null, raw->SocketForTesting());
    ::close(null);
  });
}

class PgStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::SkipPostgres()) GTEST_SKIP() << "HACHI_NO_POSTGRES=1";
    std::string why;
    db_ = testing::FreshPostgresDatabase(&why);
    ASSERT_FALSE(db_.empty()) << why;
    pg_ = testing::SharedPostgres(&why);
  }
  std::unique_ptr<Store> Open(PostgresOptions o = {}) {
    Result<std::unique_ptr<Store>> s = OpenPostgresStore(db_, o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::unique_ptr<LeaderLease> Lease(const std::string& holder) {
    Result<std::unique_ptr<LeaderLease>> l = LeaderLease::Open(db_, holder);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return l.ok() ? std::move(*l) : nullptr;
  }
  std::string DbName() const { return db_.substr(db_.rfind('/') + 1); }
  // A PgDb and the store on it, for tests that reach under the Store interface.
  std::unique_ptr<SqlStore> OpenOn(PgDbOptions o, PgDb** raw) {
    o.conninfo = db_;
    Result<std::unique_ptr<PgDb>> db = PgDb::Open(o);
    EXPECT_TRUE(db.ok()) << db.status().ToString();
    if (!db.ok()) return nullptr;
    *raw = db->get();
    EXPECT_TRUE(EnsurePostgresSchema(*raw).ok());
    return std::make_unique<SqlStore>(std::move(*db), "");
  }
  // An integer from this test's database, on a connection of its own.
  int64_t Query(const std::string& sql) {
    PgDbOptions o;
    o.conninfo = db_;
    Result<std::unique_ptr<PgDb>> db = PgDb::Open(o);
    if (!db.ok()) return -1;
    Result<int64_t> v = (*db)->QueryInt(sql);
    return v.ok() ? *v : -1;
  }
  // Whether backend `pid` is gone (pg_terminate_backend returns before it is).
  bool Gone(int pid) {
    return Query("SELECT count(*) FROM pg_stat_activity WHERE pid = " +
                 std::to_string(pid)) == 0;
  }

  std::string db_;
  testing::ScratchPostgres* pg_ = nullptr;
};

TEST_F(PgStoreTest, ARowEditedOutsideHachiIsRefusedByName) {
  {
    std::unique_ptr<Store> s = Open();
    ASSERT_TRUE(s->Commit({JobSubmitted{Pending(4)}}).ok());
  }
  ASSERT_TRUE(
      pg_->Psql("UPDATE jobs SET record = replace(record, 'train', 'TRAIN')", DbName()));
  Result<StateImage> image = Open()->Load();
  ASSERT_FALSE(image.ok());
  EXPECT_NE(image.status().message().find("jobs row 4"), std::string::npos)
      << image.status().ToString();
}

TEST_F(PgStoreTest, ANewerLayoutIsRefused) {
  ASSERT_TRUE(Open());
  ASSERT_TRUE(
      pg_->Psql("UPDATE meta SET value = 99 WHERE key IN ('schema_version', "
                "'min_reader_schema')",
                DbName()));
  Result<std::unique_ptr<Store>> s = OpenPostgresStore(db_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("schema version 99"), std::string::npos)
      << s.status().ToString();
}

TEST_F(PgStoreTest, TheLeaseHasOneHolderAndATakeoverMovesTheEpoch) {
  std::unique_ptr<LeaderLease> a = Lease("a");
  std::unique_ptr<LeaderLease> b = Lease("b");
  ASSERT_TRUE(a && b);
  LeaderInfo info;
  Result<std::optional<int64_t>> won = a->TryAcquire("http://a:8686", 60000, &info);
  ASSERT_TRUE(won.ok()) << won.status().ToString();
  ASSERT_TRUE(won->has_value());
  EXPECT_EQ(**won, 1);
  Result<std::optional<int64_t>> lost = b->TryAcquire("http://b:8686", 60000, &info);
  ASSERT_TRUE(lost.ok());
  EXPECT_FALSE(lost->has_value());
  EXPECT_EQ(info.holder, "a");
  EXPECT_EQ(info.address, "http://a:8686");
  EXPECT_GT(info.remaining_ms, 50000);
  Result<bool> renewed = a->Renew(1, 60000);
  ASSERT_TRUE(renewed.ok());
  EXPECT_TRUE(*renewed);
  ASSERT_TRUE(a->Release(1).ok());  // lapsed now: b takes it, epoch 2
  won = b->TryAcquire("http://b:8686", 60000, &info);
  ASSERT_TRUE(won.ok());
  ASSERT_TRUE(won->has_value());
  EXPECT_EQ(**won, 2);
  renewed = a->Renew(1, 60000);
  ASSERT_TRUE(renewed.ok());
  EXPECT_FALSE(*renewed);  // a's term is over
  Result<LeaderInfo> now = a->Current();
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->epoch, 2);
  EXPECT_EQ(now->holder, "b");
}

TEST_F(PgStoreTest, TwoAtOnceMakeOneLeader) {
  std::vector<std::unique_ptr<LeaderLease>> leases;
  for (int i = 0; i < 6; ++i) leases.push_back(Lease("c" + std::to_string(i)));
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  for (auto& l : leases) {
    threads.emplace_back([&l, &winners] {
      LeaderInfo info;
      Result<std::optional<int64_t>> won = l->TryAcquire("http://x", 60000, &info);
      if (won.ok() && won->has_value()) ++winners;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(winners.load(), 1);
}

TEST_F(PgStoreTest, ADeposedLeadersWritesAreRefusedByTheEpoch) {
  std::unique_ptr<LeaderLease> a = Lease("a");
  std::unique_ptr<LeaderLease> b = Lease("b");
  LeaderInfo info;
  ASSERT_EQ(**a->TryAcquire("http://a", 60000, &info), 1);
  int deposed = 0;
  std::string why;
  PostgresOptions o;
  o.epoch = 1;
  o.on_deposed = [&](const Status& s) {
    ++deposed;
    why = s.message();
  };
  std::unique_ptr<Store> old_leader = Open(o);
  ASSERT_TRUE(old_leader->Commit({JobSubmitted{Pending(1)}}).ok());
  // a is frozen past its lease; b takes over.
  ASSERT_TRUE(a->Release(1).ok());
  ASSERT_EQ(**b->TryAcquire("http://b", 60000, &info), 2);
  Status late = old_leader->Commit({JobSubmitted{Pending(2)}});
  EXPECT_EQ(late.code(), StatusCode::kUnavailable);
  EXPECT_NE(late.message().find("no longer the leader: epoch 1 ended"), std::string::npos)
      << late.ToString();
  EXPECT_NE(late.message().find("epoch 2, leader b)"), std::string::npos)
      << late.ToString();
  Status later = old_leader->SaveUsage({JobUsage{}});
  EXPECT_FALSE(later.ok());
  EXPECT_EQ(deposed, 1);  // said once
  EXPECT_EQ(why, late.message());
  PostgresOptions ob;
  ob.epoch = 2;
  std::unique_ptr<Store> new_leader = Open(ob);
  ASSERT_TRUE(new_leader->Commit({JobSubmitted{Pending(3)}}).ok());
  Result<StateImage> image = new_leader->Load();
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->jobs.count(1), 1u);
  EXPECT_EQ(image->jobs.count(2), 0u);  // refused: never stored
  EXPECT_EQ(image->jobs.count(3), 1u);
}

TEST_F(PgStoreTest, ALapsedLeaseRefusesWritesEvenBeforeATakeover) {
  std::unique_ptr<LeaderLease> a = Lease("a");
  LeaderInfo info;
  ASSERT_EQ(**a->TryAcquire("http://a", 60000, &info), 1);
  PostgresOptions o;
  o.epoch = 1;
  std::unique_ptr<Store> s = Open(o);
  ASSERT_TRUE(s->Commit({JobSubmitted{Pending(1)}}).ok());
  ASSERT_TRUE(a->Release(1).ok());  // the lease's end, by the database's clock
  Status late = s->Commit({JobSubmitted{Pending(2)}});
  EXPECT_EQ(late.code(), StatusCode::kUnavailable);
  EXPECT_NE(late.message().find("its lease lapsed"), std::string::npos)
      << late.ToString();
}

TEST_F(PgStoreTest, ACommitAfterTheServerRestartedReconnectsAndIsStoredOnce) {
  testing::ScratchPostgres own;  // the shared one serves other tests meanwhile
  ASSERT_TRUE(own.ok()) << own.error();
  Result<std::unique_ptr<Store>> s = OpenPostgresStore(own.conninfo());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE((*s)->Commit({JobSubmitted{Pending(1)}}).ok());
  ASSERT_TRUE(own.Restart());  // the store's connection is gone
  Status st = (*s)->Commit({JobSubmitted{Pending(2)}});
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(own.Restart());  // and again, before a read
  Result<StateImage> image = (*s)->Load();
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->jobs.size(), 2u);
}

TEST_F(PgStoreTest, ACommitWhoseAnswerWasLostIsResolvedFromTheDatabase) {
  PgDbOptions o;
  o.conninfo = db_;
  Result<std::unique_ptr<PgDb>> db = PgDb::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  PgDb* raw = db->get();
  ASSERT_TRUE(EnsurePostgresSchema(raw).ok());
  SqlStore store(std::move(*db), "");
  bool cut = false;
  LoseTheFirstCommitsAnswer(raw, &cut);
  Status st = store.Commit({JobSubmitted{Pending(7)}});
  ASSERT_TRUE(cut);
  EXPECT_TRUE(st.ok()) << st.ToString();  // pg_xact_status said 'committed'
  EXPECT_EQ(raw->resolved_for_testing(), 1);
  Result<StateImage> image = store.Load();
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->jobs.size(), 1u);
  EXPECT_EQ(image->jobs.count(7), 1u);
  EXPECT_EQ(image->last_job_id, 7);
}

// The answer was lost and the old backend is still committing when the new connection
// asks: "in progress" is no verdict, so the store asks again until there is one. A
// deferred trigger that sleeps makes the COMMIT itself slow.
TEST_F(PgStoreTest, ACommitStillRunningWhenAskedIsAskedAgainUntilItEnds) {
  PgDb* raw = nullptr;
  std::unique_ptr<SqlStore> store = OpenOn({}, &raw);
  ASSERT_TRUE(store);
  ASSERT_TRUE(pg_->Psql(
      "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS "
      "$$ BEGIN PERFORM pg_sleep(0.5); RETURN NULL; END $$; "
      "CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON jobs DEFERRABLE INITIALLY "
      "DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()",
      DbName()));
  bool cut = false;
  LoseTheFirstCommitsAnswer(raw, &cut);
  Status st = store->Commit({JobSubmitted{Pending(9)}});
  ASSERT_TRUE(cut);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(raw->resolved_for_testing(), 1);  // one verdict, however often it asked
  Result<StateImage> image = Open()->Load();
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->jobs.count(9), 1u);
}

// The group's COMMIT went out, its answer was lost, and the database cannot be asked in
// time: the group may be stored, so its batches are not written again one by one (a
// JobSubmitted would then be refused as a duplicate of itself, a toggle applied twice).
TEST_F(PgStoreTest, AGroupWhoseCommitOutcomeIsUnknownIsNotWrittenAgain) {
  PgDbOptions o;
  o.reconnect_ms = 100;
  PgDb* raw = nullptr;
  std::unique_ptr<SqlStore> store = OpenOn(o, &raw);
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Commit({JobSubmitted{Pending(1)}}).ok());
  int sent = 0;  // the writer's thread only
  raw->SetAfterCommitSentForTesting([&] {
    if (++sent != 2) return;  // the first is the leader's own, alone
    EXPECT_TRUE(pg_->Psql("ALTER DATABASE " + DbName() + " ALLOW_CONNECTIONS false"));
    const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    ::dup2(null, raw->SocketForTesting());
    ::close(null);
  });
  // Another connection holds jobs, so the leader waits in its transaction while the
  // next two callers form a group.
  PgDbOptions bo;
  bo.conninfo = db_;
  Result<std::unique_ptr<PgDb>> blocker = PgDb::Open(bo);
  ASSERT_TRUE(blocker.ok());
  ASSERT_TRUE((*blocker)->Exec("BEGIN; LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE").ok());
  const int64_t before = store->stats().transactions;
  std::vector<Status> results(3);
  std::vector<std::thread> threads;
  threads.emplace_back([&] { results[0] = store->Commit({JobSubmitted{Pending(2)}}); });
  EXPECT_TRUE(WaitFor([&] {
    return store->stats().transactions == before + 1 && store->QueuedForTesting() == 0;
  }));
  threads.emplace_back([&] { results[1] = store->Commit({JobSubmitted{Pending(3)}}); });
  threads.emplace_back([&] { results[2] = store->Commit({JobSubmitted{Pending(4)}}); });
  EXPECT_TRUE(WaitFor([&] { return store->QueuedForTesting() == 2; }));
  ASSERT_TRUE((*blocker)->Exec("ROLLBACK").ok());
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(pg_->Psql("ALTER DATABASE " + DbName() + " ALLOW_CONNECTIONS true"));
  EXPECT_TRUE(results[0].ok()) << results[0].ToString();
  for (int i : {1, 2}) {
    EXPECT_EQ(results[i].code(), StatusCode::kUnavailable) << results[i].ToString();
    EXPECT_NE(results[i].message().find("could not be learned"), std::string::npos)
        << results[i].ToString();
  }
  EXPECT_TRUE(raw->OutcomeUnknown());
  EXPECT_EQ(store->stats().transactions - before, 2);  // the leader's, the group's
  Result<StateImage> image = Open()->Load();
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->jobs.size(), 4u);  // the group did commit, once
}

// A server that cannot write (in recovery, or read-only) is waited for like one that
// cannot be reached: a new connection, until one can write, within reconnect_ms.
TEST_F(PgStoreTest, AServerThatCannotWriteIsWaitedForLikeAnUnreachableOne) {
  std::unique_ptr<LeaderLease> a = Lease("a");
  LeaderInfo info;
  ASSERT_EQ(**a->TryAcquire("http://a", 60000, &info), 1);
  PgDbOptions o;
  o.epoch = 1;
  PgDb* raw = nullptr;
  std::unique_ptr<SqlStore> store = OpenOn(o, &raw);
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Commit({JobSubmitted{Pending(1)}}).ok());
  const int pid = raw->BackendPidForTesting();
  EXPECT_EQ(Query("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                  "'hachi' AND pid = " +
                  std::to_string(pid)),
            1);
  // New sessions of this database cannot write; the store's session ends.
  ASSERT_TRUE(pg_->Psql("ALTER DATABASE " + DbName() +
                        " SET default_transaction_read_only = on; SELECT "
                        "pg_terminate_backend(" +
                        std::to_string(pid) + ")"));
  ASSERT_TRUE(WaitFor([&] { return Gone(pid); }));
  Status st;
  std::thread writer([&] { st = store->Commit({JobSubmitted{Pending(2)}}); });
  // Reconnected after the termination, refused (25006), and reconnected again.
  EXPECT_TRUE(WaitFor([&] { return raw->reconnects_for_testing() >= 2; }));
  ASSERT_TRUE(
      pg_->Psql("ALTER DATABASE " + DbName() + " RESET default_transaction_read_only"));
  writer.join();
  EXPECT_TRUE(st.ok()) << st.ToString();
  Result<StateImage> image = store->Load();
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->jobs.size(), 2u);
}

TEST_F(PgStoreTest, TheLeaseRowReconnectsOnceAndKnowsItsOwnLease) {
  std::unique_ptr<LeaderLease> a = Lease("a");
  LeaderInfo info;
  ASSERT_EQ(**a->TryAcquire("http://a", 60000, &info), 1);
  // Asked again while it holds the lease (its first answer lost): the same epoch.
  Result<std::optional<int64_t>> again = a->TryAcquire("http://a", 60000, &info);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_TRUE(again->has_value());
  EXPECT_EQ(**again, 1);
  // Its connection ends (a restart, a switchover): the next call reconnects.
  ASSERT_TRUE(
      pg_->Psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                "datname = '" +
                DbName() + "' AND application_name = 'hachi'"));
  ASSERT_TRUE(WaitFor([&] {
    return Query("SELECT count(*) FROM pg_stat_activity WHERE datname = '" + DbName() +
                 "' AND pid <> pg_backend_pid()") == 0;
  }));
  Result<bool> renewed = a->Renew(1, 60000);
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  EXPECT_TRUE(*renewed);
}

}  // namespace
}  // namespace hachi::state
