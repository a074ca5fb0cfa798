// Submit idempotency (item 10): a submit whose reply was lost is sent again by
// the CLI with the same key; the server answers with the first submit's job ids.
#include "server/submit_keys.h"

#include <gtest/gtest.h>

#include <vector>

#include "server/controller.h"
#include "server/testing.h"
#include "state/store.h"
#include "topo/topology_testing.h"

namespace hachi::server {
namespace {

using testing::Harness;
using testing::kAlice;
using testing::MakeSubmit;

TEST(SubmitKeys, FindReserveStoreForget) {
  SubmitKeys keys;
  EXPECT_EQ(keys.Find(1000, "k", 100), nullptr);
  keys.Reserve(1000, "k", 7, 3, 100);
  ASSERT_NE(keys.Find(1000, "k", 101), nullptr);
  EXPECT_FALSE(keys.Find(1000, "k", 101)->stored);
  EXPECT_EQ(keys.Find(1001, "k", 101), nullptr) << "keys are per uid";
  keys.Stored(1000, "k");
  EXPECT_TRUE(keys.Find(1000, "k", 101)->stored);
  EXPECT_EQ(keys.Find(1000, "k", 101)->first, 7);
  EXPECT_EQ(keys.Find(1000, "k", 101)->count, 3);
  keys.Forget(1000, "k");
  EXPECT_EQ(keys.Find(1000, "k", 101), nullptr);
}

TEST(SubmitKeys, BoundedByTheWindowAndTheCap) {
  SubmitKeys keys(/*max_keys=*/2);
  keys.Reserve(1, "a", 1, 1, 100);
  keys.Reserve(1, "b", 2, 1, 101);
  keys.Reserve(1, "c", 3, 1, 102);
  EXPECT_EQ(keys.Find(1, "a", 102), nullptr) << "the oldest beyond the cap";
  EXPECT_NE(keys.Find(1, "c", 102), nullptr);
  EXPECT_EQ(keys.Find(1, "b", 101 + SubmitKeys::kWindow), nullptr) << "out of the window";
  EXPECT_LE(keys.size(), 2u);
}

TEST(SubmitKeys, LoadRebuildsAnArraysEntry) {
  SubmitKeys keys;
  for (state::JobId id : {10, 11, 12}) keys.Load(1000, "k", id, 500, 600);
  keys.Load(1000, "old", 9, 500, 500 + SubmitKeys::kWindow);
  const SubmitKeys::Entry* e = keys.Find(1000, "k", 600);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->first, 10);
  EXPECT_EQ(e->count, 3);
  EXPECT_TRUE(e->stored);
}

TEST(SubmitIdempotency, TheSameKeyTwiceMakesOneSubmit) {
  Harness h;
  h.Register("n1");
  SubmitRequest r = MakeSubmit().Gpus(1).Array({0, 1, 2}, 0).Hold();
  r.idempotency_key = "k-1";
  Result<std::vector<state::JobId>> first = h->jobs().Submit(r, kAlice);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  Result<std::vector<state::JobId>> again = h->jobs().Submit(r, kAlice);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *first);
  EXPECT_EQ(h->job_views().Jobs(true).size(), 3u) << "no second array";
  // Another user's key is another key; another key is another submit.
  const Caller bob{"bob", 1001, 1001, true, false};
  Result<std::vector<state::JobId>> bobs = h->jobs().Submit(r, bob);
  ASSERT_TRUE(bobs.ok());
  EXPECT_NE(bobs->front(), first->front());
  r.idempotency_key = "k-2";
  Result<std::vector<state::JobId>> other = h->jobs().Submit(r, kAlice);
  ASSERT_TRUE(other.ok());
  EXPECT_GT(other->front(), bobs->back());
  EXPECT_EQ(h->job_views().Jobs(true).size(), 9u);
  // Without a key every submit is new, as before.
  r.idempotency_key.clear();
  EXPECT_NE(h->jobs().Submit(r, kAlice)->front(), h->jobs().Submit(r, kAlice)->front());
}

// Durable: the key is in the job records, so a retry after a restart finds the job.
TEST(SubmitIdempotency, ARetryAfterARestartFindsTheFirstJob) {
  topo::TempDir dir;
  SubmitRequest r = MakeSubmit().Gpus(1).Hold();
  r.idempotency_key = "retry-after-restart";
  std::vector<state::JobId> first;
  {
    Result<std::unique_ptr<state::Store>> store =
        state::OpenSqliteStore(dir.path() + "/hachi.db");
    ASSERT_TRUE(store.ok());
    Harness h(ControllerOptions{}, std::move(*store));
    h.Register("n1");
    Result<std::vector<state::JobId>> ids = h->jobs().Submit(r, kAlice);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    first = *ids;
  }
  Result<std::unique_ptr<state::Store>> store =
      state::OpenSqliteStore(dir.path() + "/hachi.db");
  ASSERT_TRUE(store.ok());
  Harness h(ControllerOptions{}, std::move(*store));
  h.Register("n1");
  Result<std::vector<state::JobId>> again = h->jobs().Submit(r, kAlice);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, first);
  EXPECT_EQ(h->job_views().Jobs(true).size(), 1u);
}

}  // namespace
}  // namespace hachi::server
