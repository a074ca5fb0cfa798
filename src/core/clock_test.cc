#include "core/clock.h"

#include <gtest/gtest.h>

#include <ctime>
#include <string>
#include <thread>
#include <vector>

namespace hachi {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(RealClockTest, ReadsTheSystemClocks) {
  const Clock* c = RealClock();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c, RealClock()) << "one process-wide instance";
  const Time before = static_cast<Time>(std::time(nullptr));
  const Time now = c->Now();
  const Time after = static_cast<Time>(std::time(nullptr));
  EXPECT_GE(now, before);
  EXPECT_LE(now, after);
  const int64_t m1 = c->MonotonicMicros();
  const int64_t m2 = c->MonotonicMicros();
  EXPECT_LE(m1, m2);
  EXPECT_EQ(c->MonotonicMs() / 1000, c->MonotonicMicros() / 1'000'000);
}

// Whole seconds and milliseconds round down, as std::time and duration_cast do, also
// before the epoch (a wall clock set back that far is the only way to get there).
struct RoundingCase {
  std::string name;
  int64_t wall_us;
  Time want_seconds;
};

class FakeClockRoundingTest : public testing::TestWithParam<RoundingCase> {};

TEST_P(FakeClockRoundingTest, NowRoundsDown) {
  FakeClock c;
  c.SetMicros(GetParam().wall_us);
  EXPECT_EQ(c.NowMicros(), GetParam().wall_us);
  EXPECT_EQ(c.Now(), GetParam().want_seconds);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, FakeClockRoundingTest,
    testing::Values(RoundingCase{"zero", 0, 0},
                    RoundingCase{"just_under_one", 999'999, 0},
                    RoundingCase{"one", 1'000'000, 1},
                    RoundingCase{"one_and_a_half", 1'500'000, 1},
                    RoundingCase{"before_epoch", -1, -1},
                    RoundingCase{"minus_one_exactly", -1'000'000, -1},
                    RoundingCase{"minus_one_and_a_bit", -1'000'001, -2}),
    [](const testing::TestParamInfo<RoundingCase>& row) { return row.param.name; });

// Advance moves both clocks by the same amount; a negative step is refused, so the
// monotonic clock never goes back.
struct AdvanceCase {
  std::string name;
  std::vector<microseconds> steps;
  int64_t want_us;  // both clocks, from their starts
};

class FakeClockAdvanceTest : public testing::TestWithParam<AdvanceCase> {};

TEST_P(FakeClockAdvanceTest, MovesBothClocks) {
  FakeClock c(1000);
  for (microseconds d : GetParam().steps) c.Advance(d);
  EXPECT_EQ(c.NowMicros(), 1000 * 1'000'000 + GetParam().want_us);
  EXPECT_EQ(c.MonotonicMicros(), FakeClock::kMonotonicStart + GetParam().want_us);
  EXPECT_EQ(c.Now(), 1000 + GetParam().want_us / 1'000'000);
  EXPECT_EQ(c.MonotonicMs(), (FakeClock::kMonotonicStart + GetParam().want_us) / 1000);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, FakeClockAdvanceTest,
    testing::Values(AdvanceCase{"none", {}, 0},
                    AdvanceCase{"seconds", {seconds(2)}, 2'000'000},
                    AdvanceCase{
                        "milliseconds", {milliseconds(220), milliseconds(220)}, 440'000},
                    AdvanceCase{"microseconds", {microseconds(1)}, 1},
                    AdvanceCase{"negative_refused", {seconds(1), seconds(-5)}, 1'000'000},
                    AdvanceCase{"zero", {seconds(0)}, 0}),
    [](const testing::TestParamInfo<AdvanceCase>& row) { return row.param.name; });

TEST(FakeClockTest, StartsAtTheGivenTime) {
  FakeClock c;
  EXPECT_EQ(c.Now(), FakeClock::kDefaultStart);
  EXPECT_EQ(c.MonotonicMicros(), FakeClock::kMonotonicStart);
  FakeClock d(42);
  EXPECT_EQ(d.Now(), 42);
  EXPECT_EQ(d.NowMicros(), 42'000'000);
}

TEST(FakeClockTest, SetMovesTheWallClockOnly) {
  FakeClock c(5000);
  c.Advance(seconds(10));
  const int64_t mono = c.MonotonicMicros();
  c.Set(100);  // back, as an operator might set a real one
  EXPECT_EQ(c.Now(), 100);
  EXPECT_EQ(c.MonotonicMicros(), mono);
  c.Set(9000);
  EXPECT_EQ(c.Now(), 9000);
  EXPECT_EQ(c.MonotonicMicros(), mono);
}

TEST(FakeClockTest, ConcurrentAdvancesAllCount) {
  FakeClock c(0);
  constexpr int kThreads = 4;
  constexpr int kSteps = 10000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      int64_t last = 0;
      for (int i = 0; i < kSteps; ++i) {
        c.Advance(microseconds(3));
        const int64_t m = c.MonotonicMicros();
        EXPECT_GE(m, last) << "went back";
        last = m;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(c.NowMicros(), int64_t{kThreads} * kSteps * 3);
  EXPECT_EQ(c.MonotonicMicros(),
            FakeClock::kMonotonicStart + int64_t{kThreads} * kSteps * 3);
}

// Through the interface, as the server and agent hold it.
TEST(FakeClockTest, ReadThroughTheInterface) {
  FakeClock fake(77);
  const Clock* c = &fake;
  EXPECT_EQ(c->Now(), 77);
  fake.Advance(seconds(3));
  EXPECT_EQ(c->Now(), 80);
}

}  // namespace
}  // namespace hachi
