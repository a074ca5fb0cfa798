#include "sched/fair_share.h"

#include <gtest/gtest.h>

#include <cmath>

namespace hachi::sched {
namespace {

constexpr Duration kHour = 3600;

TEST(DecayedUsage, ARunningGpuAccruesItsSecondsAndHalvesEachHalfLifeAfter) {
  DecayedUsage u(kHour);
  u.AdvanceTo(1000);
  const int a = u.Index("physics");
  EXPECT_EQ(u.Index("physics"), a);
  EXPECT_EQ(u.Find("chem"), -1);
  u.AddRunning(a, 2);
  u.AdvanceTo(1000 + 60);
  // Two GPUs for a minute: about 120 GPU-seconds, a little less for the decay within.
  EXPECT_NEAR(u.usage(a), 2 * kHour / std::log(2.0) * (1 - std::exp2(-60.0 / kHour)),
              1e-9);
  EXPECT_GT(u.usage(a), 119);
  EXPECT_LT(u.usage(a), 120);
  u.AddRunning(a, -2);
  const double then = u.usage(a);
  u.AdvanceTo(1060 + kHour);
  EXPECT_NEAR(u.usage(a), then / 2, 1e-9);
  u.AdvanceTo(1000);  // never back
  EXPECT_EQ(u.now(), 1060 + kHour);
}

TEST(DecayedUsage, APastRunCountsAsIfTheMeterHadWatchedIt) {
  // One meter watches a run; another learns of it after it ended (a server's restart).
  DecayedUsage watched(kHour), told(kHour);
  watched.AdvanceTo(5000);
  const int w = watched.Index("a");
  watched.AddRunning(w, 4);
  watched.AdvanceTo(5000 + 1800);
  watched.AddRunning(w, -4);
  watched.AdvanceTo(20000);
  told.AdvanceTo(20000);
  const int t = told.Index("a");
  told.AddPast(t, 4, 5000, 5000 + 1800);
  EXPECT_NEAR(told.usage(t), watched.usage(w), 1e-6 * watched.usage(w));
  // A run still going: its past part now, its GPUs running from now on.
  DecayedUsage resumed(kHour);
  resumed.AdvanceTo(5000 + 600);
  const int r = resumed.Index("a");
  resumed.AddPast(r, 4, 5000, 5000 + 600);
  resumed.AddRunning(r, 4);
  resumed.AdvanceTo(5000 + 1800);
  resumed.AddRunning(r, -4);
  resumed.AdvanceTo(20000);
  EXPECT_NEAR(resumed.usage(r), watched.usage(w), 1e-6 * watched.usage(w));
  // Clipped to now; nothing for an empty or future run.
  told.AddPast(t, 4, 30000, 40000);
  told.AddPast(t, 0, 0, 100);
  EXPECT_NEAR(told.usage(t), watched.usage(w), 1e-6 * watched.usage(w));
}

TEST(DecayedUsage, NoHalfLifeMeansNoUsage) {
  DecayedUsage u(0);
  u.AdvanceTo(100);
  const int a = u.Index("a");
  u.AddRunning(a, 8);
  u.AddPast(a, 8, 0, 100);
  u.AdvanceTo(1000);
  EXPECT_EQ(u.usage(a), 0);
}

TEST(FairShareFactors, UsageAgainstShareNormalisedOverAccounts) {
  FairShare fs;
  EXPECT_TRUE(FairShareFactors(fs).empty());
  EXPECT_EQ(FactorOf({}, "anyone"), 1.0);
  fs.shares = {{"b", 3}, {"a", 1}};
  fs.usage = {{"a", 50}, {"b", 50}, {"c", 100}};  // c has no share but used half
  const std::vector<FairShareAccount> f = FairShareFactors(fs);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].account, "a");  // ascending
  EXPECT_DOUBLE_EQ(f[0].norm_shares, 0.25);
  EXPECT_DOUBLE_EQ(f[0].norm_usage, 0.25);
  EXPECT_DOUBLE_EQ(f[0].factor, 0.5);  // at its share
  EXPECT_DOUBLE_EQ(f[1].norm_shares, 0.75);
  EXPECT_DOUBLE_EQ(f[1].factor, std::round(std::exp2(-0.25 / 0.75) * 128) / 128);
  EXPECT_EQ(FactorOf(f, "a"), 0.5);
  EXPECT_EQ(FactorOf(f, "c"), 0.0);  // no share while others have one
  fs.usage.clear();
  EXPECT_EQ(FairShareFactors(fs)[1].factor, 1.0);  // nobody used anything
}

}  // namespace
}  // namespace hachi::sched
