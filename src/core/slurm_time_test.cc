// Slurm's --begin / --deadline forms against a fixed "now".
#include "core/slurm_time.h"

#include <gtest/gtest.h>

namespace hachi {
namespace {

// 2026-12-02 (a Wednesday) 14:30:00 UTC.
constexpr Time kNow = 1796221800;
constexpr Time kMidnight = 1796169600;  // 2026-12-02T00:00:00Z

struct Row {
  const char* text;
  int64_t offset;  // local - UTC
  Time want;
};

class SlurmTimeTest : public ::testing::TestWithParam<Row> {};

TEST_P(SlurmTimeTest, Parses) {
  Result<Time> t = ParseSlurmTime(GetParam().text, kNow, GetParam().offset);
  ASSERT_TRUE(t.ok()) << GetParam().text << ": " << t.status().ToString();
  EXPECT_EQ(*t, GetParam().want)
      << GetParam().text << " (" << *t - GetParam().want << "s off)";
}

INSTANTIATE_TEST_SUITE_P(
    Forms, SlurmTimeTest,
    ::testing::Values(
        Row{"16:00", 0, kMidnight + 16 * kHour},         // later today
        Row{"10:00", 0, kMidnight + kDay + 10 * kHour},  // passed: tomorrow
        Row{"16:00:30", 0, kMidnight + 16 * kHour + 30},
        Row{"4:00PM", 0, kMidnight + 16 * kHour}, Row{"12:00am", 0, kMidnight + kDay},
        Row{"now", 0, kNow}, Row{"now+60", 0, kNow + 60},  // bare: seconds
        Row{"now+1hour", 0, kNow + kHour}, Row{"now+2hours", 0, kNow + 2 * kHour},
        Row{"now+30minutes", 0, kNow + 30 * kMinute},
        Row{"now+3days", 0, kNow + 3 * kDay}, Row{"now+1week", 0, kNow + 7 * kDay},
        Row{"NOW+1HOUR", 0, kNow + kHour},
        Row{"2026-12-03T10:00:00", 0, kMidnight + kDay + 10 * kHour},
        Row{"2026-12-03T10:00", 0, kMidnight + kDay + 10 * kHour},
        Row{"2026-12-03", 0, kMidnight + kDay}, Row{"today", 0, kMidnight},
        Row{"tomorrow", 0, kMidnight + kDay}, Row{"midnight", 0, kMidnight + kDay},
        Row{"noon", 0, kMidnight + kDay + 12 * kHour},  // 12:00 has passed
        Row{"teatime", 0, kMidnight + 16 * kHour}, Row{"12/25", 0, kMidnight + 23 * kDay},
        Row{"12/25/27", 0, kMidnight + (23 + 365) * kDay},
        Row{"1225", 0, kMidnight + 23 * kDay},
        Row{"01/15", 0, kMidnight + 44 * kDay},  // past this year: next one
        // Local time two hours ahead of UTC (16:30 there): 16:00 has passed.
        Row{"16:00", 2 * kHour, kMidnight + kDay + 14 * kHour},
        Row{"2026-12-03T10:00:00", 2 * kHour, kMidnight + kDay + 8 * kHour}),
    [](const auto& row) { return "row" + std::to_string(row.index); });

TEST(SlurmTimeTest, Errors) {
  for (const char* bad :
       {"", "16:75", "25:00", "now+", "now+1fortnight", "now*2", "2026-02-30",
        "2026-13-01", "13/01", "yesterday", "1600", "2026-12-03X10:00"}) {
    Result<Time> t = ParseSlurmTime(bad, kNow, 0);
    ASSERT_FALSE(t.ok()) << "'" << bad << "' parsed as " << *t;
    EXPECT_NE(t.status().message().find("is not a time"), std::string::npos);
  }
}

}  // namespace
}  // namespace hachi
