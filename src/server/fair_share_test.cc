// Fair share on the Controller: the accounts' decayed usage follows their jobs' runs,
// orders the queue, survives a restart (rebuilt from the records) and is what GET
// /priority shows.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "config/cluster_config.h"
#include "server/testing.h"
#include "topo/topology_testing.h"

namespace hachi::server {
namespace {

using testing::Harness;
using testing::MakeSubmit;

constexpr Duration kHalfLife = kDay;

ControllerOptions SharesOptions(const Clock* clock) {
  return testing::WithConfig(
      "[fairshare]\nshares = { physics = 1, chem = 1 }\nhalf_life = \"1d\"\n", clock);
}

SubmitRequest Whole(const std::string& account) {
  SubmitRequest r = MakeSubmit().Gpus(8).Time(4 * kHour);
  r.req.account = account;
  return r;
}

const sched::FairShareAccount* Find(const report::PriorityReport& r,
                                    const std::string& account) {
  for (const sched::FairShareAccount& a : r.accounts) {
    if (a.account == account) return &a;
  }
  return nullptr;
}

// 8 GPUs for an hour, decayed over `since_end` after it ended.
double EightGpuHour(Duration since_end) {
  const double h = static_cast<double>(kHalfLife);
  return 8 * h / std::log(2.0) * (1 - std::exp2(-3600.0 / h)) *
         std::exp2(-static_cast<double>(since_end) / h);
}

TEST(FairShare, AnAccountThatUsedItsShareWaitsBehindOneThatDidNot) {
  FakeClock clock;
  topo::TempDir dir;
  state::JobId chem = 0, physics_again = 0;
  {
    Result<std::unique_ptr<state::Store>> store =
        state::OpenSqliteStore(dir.path() + "/hachi.db");
    ASSERT_TRUE(store.ok());
    Harness h(SharesOptions(&clock), std::move(*store));
    h.Register("n1");
    const state::JobId first = h.Submit(Whole("physics"));
    h->RunCycle();
    ASSERT_EQ(h.StateOf(first), state::JobState::kRunning);
    clock.Advance(std::chrono::hours(1));
    // While it runs its hour counts already.
    report::PriorityReport mid = h->fair_share().Report();
    ASSERT_NE(Find(mid, "physics"), nullptr);
    EXPECT_NEAR(Find(mid, "physics")->usage, EightGpuHour(0), 1e-6);
    h.Exit("n1", first, 0);

    // physics asks first, chem second: chem's factor (nothing used) puts it ahead.
    physics_again = h.Submit(Whole("physics"));
    clock.Advance(std::chrono::seconds(1));
    chem = h.Submit(Whole("chem"));
    const report::PriorityReport r = h->fair_share().Report();
    EXPECT_TRUE(r.multifactor);
    EXPECT_EQ(r.half_life, kHalfLife);
    ASSERT_EQ(r.accounts.size(), 2u);
    const sched::FairShareAccount* p = Find(r, "physics");
    const sched::FairShareAccount* c = Find(r, "chem");
    ASSERT_TRUE(p != nullptr && c != nullptr);
    EXPECT_NEAR(p->usage, EightGpuHour(1), 1e-6);
    EXPECT_DOUBLE_EQ(p->norm_shares, 0.5);
    EXPECT_DOUBLE_EQ(p->norm_usage, 1.0);
    EXPECT_DOUBLE_EQ(p->factor, 0.25);  // 2^(-1/0.5)
    EXPECT_DOUBLE_EQ(c->usage, 0);
    EXPECT_DOUBLE_EQ(c->factor, 1.0);
    ASSERT_EQ(r.users.size(), 1u);  // alice under physics
    EXPECT_EQ(r.users[0].account, "physics");
    EXPECT_EQ(r.users[0].user, "alice");
    EXPECT_NEAR(r.users[0].usage, p->usage, 1e-9);
    // The pending jobs in the order's order, with the terms that make it.
    ASSERT_EQ(r.jobs.size(), 2u);
    EXPECT_EQ(r.jobs[0].id, chem);
    EXPECT_EQ(r.jobs[1].id, physics_again);
    const sched::PriorityWeights w;
    EXPECT_DOUBLE_EQ(r.jobs[0].terms.fairshare, w.fairshare * 1.0);
    EXPECT_DOUBLE_EQ(r.jobs[1].terms.fairshare, w.fairshare * 0.25);
    EXPECT_DOUBLE_EQ(r.jobs[0].terms.size, w.size);  // 8 of the largest node's 8
    EXPECT_DOUBLE_EQ(r.jobs[0].priority, r.jobs[0].terms.Total());

    h->RunCycle();
    EXPECT_EQ(h.StateOf(chem), state::JobState::kRunning);
    EXPECT_EQ(h.StateOf(physics_again), state::JobState::kPending);
    clock.Advance(std::chrono::minutes(30));
  }
  // A new server (or a standby taking over) rebuilds the usage from the records: the
  // finished hour, and the running half hour of chem, which goes on counting.
  Result<std::unique_ptr<state::Store>> store =
      state::OpenSqliteStore(dir.path() + "/hachi.db");
  ASSERT_TRUE(store.ok());
  Harness h(SharesOptions(&clock), std::move(*store));
  h.Register("n1");
  h->RunCycle();
  clock.Advance(std::chrono::minutes(30));
  const report::PriorityReport r = h->fair_share().Report();
  const sched::FairShareAccount* p = Find(r, "physics");
  const sched::FairShareAccount* c = Find(r, "chem");
  ASSERT_TRUE(p != nullptr && c != nullptr);
  EXPECT_NEAR(p->usage, EightGpuHour(1 + 3600), 1e-6);
  EXPECT_NEAR(c->usage, EightGpuHour(0), 1e-6);  // its hour, as if watched throughout
}

TEST(FairShare, ARequeuedOrCancelledRunStopsCounting) {
  FakeClock clock;
  Harness h(SharesOptions(&clock));
  h.Register("n1");
  SubmitRequest req = Whole("physics");
  req.spec.requeue = true;
  const state::JobId id = h.Submit(req);
  h->RunCycle();
  ASSERT_EQ(h.StateOf(id), state::JobState::kRunning);
  clock.Advance(std::chrono::hours(1));
  h.Work("n1");  // its launch delivered
  ASSERT_TRUE(h->jobs().Requeue(id, testing::kAlice).ok());
  h.Exit("n1", id, 0, api::ExitKind::kCancelled);
  ASSERT_EQ(h.StateOf(id), state::JobState::kPending);
  const double after_hour = Find(h->fair_share().Report(), "physics")->usage;
  EXPECT_NEAR(after_hour, EightGpuHour(0), 1e-6);
  clock.Advance(std::chrono::hours(1));
  EXPECT_NEAR(Find(h->fair_share().Report(), "physics")->usage, EightGpuHour(3600), 1e-6)
      << "pending again: only decay";
}

// A QoS's usage is metered as an account's (scontrol show assoc_mgr's QOS UsageRaw).
TEST(FairShare, EachQosHasItsOwnUsage) {
  FakeClock clock;
  Harness h(testing::WithConfig(
      "[fairshare]\nhalf_life = \"1d\"\n[[qos]]\nname = \"high\"\npriority = 500\n"
      "[[qos]]\nname = \"low\"\npriority = 0\n",
      &clock));
  h.Register("n1");
  SubmitRequest req = Whole("physics");
  req.req.qos = "high";
  const state::JobId id = h.Submit(req);
  h->RunCycle();
  ASSERT_EQ(h.StateOf(id), state::JobState::kRunning);
  clock.Advance(std::chrono::hours(1));
  h.Work("n1");
  h.Exit("n1", id, 0);
  const report::PriorityReport r = h->fair_share().Report();
  ASSERT_EQ(r.qos.size(), 2u);
  EXPECT_EQ(r.qos[0].name, "high");
  EXPECT_EQ(r.qos[0].priority, 500);
  EXPECT_NEAR(r.qos[0].usage, EightGpuHour(0), 1e-6);
  EXPECT_EQ(r.qos[1].usage, 0);
}

}  // namespace
}  // namespace hachi::server
