// ClockOffsets (clock_offsets.h): each node's latest offset against the server's clock.
#include "server/clock_offsets.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

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

// The server's log says a node's clock went past the bound once, and once when it is
// back: every poll is a reading, and a log line each would be spam.
TEST(ClockOffsets, LoggedOnceWhenPastTheBoundAndOnceWhenBack) {
  FakeClock clock;
  ClockOffsets offsets(&clock);
  const int64_t now_ms = clock.NowMicros() / 1000;
  ::testing::internal::CaptureStderr();
  offsets.Note("n1", now_ms + 40);  // within: nothing to say
  for (int i = 0; i < 3; ++i) offsets.Note("n1", now_ms + 3600000 + i);
  offsets.Note("n1", now_ms - 5001);  // still past it, the other way
  for (int i = 0; i < 3; ++i) offsets.Note("n1", now_ms + i);
  const std::string said = ::testing::internal::GetCapturedStderr();
  const std::string past =
      "hachi server: node n1: its clock is +3600.00s off the server's: fix its time sync";
  const std::string back =
      "hachi server: node n1: its clock agrees with the server's again (+0.00s)";
  EXPECT_EQ(said.find(past), 0u) << said;
  EXPECT_EQ(said.find(past, 1), std::string::npos) << said;
  EXPECT_NE(said.find(back), std::string::npos) << said;
  EXPECT_EQ(said.find("hachi server", said.find(back) + 1), std::string::npos) << said;
}

}  // namespace
}  // namespace hachi::server
