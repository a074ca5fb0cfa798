// ClockOffsets (clock_offsets.h): each node's latest offset against the server's clock.
#include "server/clock_offsets.h"

#include <gtest/gtest.h>

#include <chrono>

namespace hachi::server {
namespace {

TEST(ClockOffsets, TheLatestPollsOffsetPerNode) {
  FakeClock clock;
  ClockOffsets offsets(&clock);
  EXPECT_FALSE(offsets.OffsetMs("n1").has_value()) << "unknown before its first poll";
  const int64_t now_ms = clock.NowMicros() / 1000;
  offsets.Note("n1", now_ms + 3600000);  // an hour ahead
  offsets.Note("n2", now_ms - 20);
  EXPECT_EQ(offsets.OffsetMs("n1"), 3600000);
  EXPECT_EQ(offsets.OffsetMs("n2"), -20);
  // Fixed: the next poll says so.
  clock.Advance(std::chrono::seconds(5));
  offsets.Note("n1", now_ms + 5000 + 3);
  EXPECT_EQ(offsets.OffsetMs("n1"), 3);
  EXPECT_FALSE(offsets.OffsetMs("n3").has_value());
}

}  // namespace
}  // namespace hachi::server
