// The user time-limit models: exact, and rounded up to the usual requests.
#include "sim/time_limits.h"

#include <gtest/gtest.h>

namespace hachi::sim {
namespace {

TEST(TimeLimitTest, RoundedUpToUsualRequests) {
  struct Case {
    const char* name;
    Duration run;
    Duration want;
  };
  const Case cases[] = {
      {"1s", 1, 15 * kMinute},
      {"exactly 15m", 15 * kMinute, 15 * kMinute},
      {"15m1s", 15 * kMinute + 1, 30 * kMinute},
      {"45m", 45 * kMinute, kHour},
      {"61m", 61 * kMinute, 2 * kHour},
      {"3h", 3 * kHour, 4 * kHour},
      {"5h", 5 * kHour, 8 * kHour},
      {"9h", 9 * kHour, 12 * kHour},
      {"13h", 13 * kHour, kDay},
      {"25h", 25 * kHour, 2 * kDay},
      {"2d1s", 2 * kDay + 1, 3 * kDay},
      {"4d", 4 * kDay, 7 * kDay},
      {"8d", 8 * kDay, 14 * kDay},
      {"15d", 15 * kDay, 30 * kDay},
      {"1285h (Philly's longest)", 1285 * kHour, 60 * kDay},
      {"61d", 61 * kDay, 90 * kDay},
      {"past 90d keeps its own", 100 * kDay, 100 * kDay},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(RoundUpTimeLimit(c.run), c.want) << c.name;
    EXPECT_EQ(TimeLimitFor(TimeLimitModel::kRounded, c.run), c.want) << c.name;
    EXPECT_EQ(TimeLimitFor(TimeLimitModel::kExact, c.run), c.run) << c.name;
  }
}

TEST(TimeLimitTest, ModelNames) {
  struct Case {
    const char* name;
    bool ok;
    TimeLimitModel want;
  };
  const Case cases[] = {{"rounded", true, TimeLimitModel::kRounded},
                        {"exact", true, TimeLimitModel::kExact},
                        {"Exact", false, TimeLimitModel::kExact},
                        {"", false, TimeLimitModel::kExact}};
  for (const Case& c : cases) {
    Result<TimeLimitModel> m = ParseTimeLimitModel(c.name);
    ASSERT_EQ(m.ok(), c.ok) << c.name;
    if (c.ok) {
      EXPECT_EQ(*m, c.want) << c.name;
      EXPECT_EQ(TimeLimitModelName(*m), c.name);
    }
  }
}

}  // namespace
}  // namespace hachi::sim
