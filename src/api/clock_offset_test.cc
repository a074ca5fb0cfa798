// An agent's clock offset as shown (api/clock_offset.h) and carried in a node's JSON.
#include "api/clock_offset.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/record_json.h"

namespace hachi::api {
namespace {

TEST(ClockOffset, Formats) {
  EXPECT_EQ(FormatClockOffset(std::nullopt), "unknown");
  EXPECT_EQ(FormatClockOffset(0), "+0.00s");
  EXPECT_EQ(FormatClockOffset(3600020), "+3600.02s");
  EXPECT_EQ(FormatClockOffset(-10), "-0.01s");
  EXPECT_EQ(FormatClockOffset(-3599995), "-3599.99s");
}

TEST(ClockOffset, AProblemPastFiveSecondsEitherWay) {
  EXPECT_FALSE(ClockOffsetIsProblem(0));
  EXPECT_FALSE(ClockOffsetIsProblem(5000));
  EXPECT_FALSE(ClockOffsetIsProblem(-5000));
  EXPECT_TRUE(ClockOffsetIsProblem(5001));
  EXPECT_TRUE(ClockOffsetIsProblem(-3600000));
}

TEST(ClockOffset, InANodesJsonNullWhenUnknown) {
  state::NodeStatus n;
  n.record.name = "n1";
  nlohmann::json j = nlohmann::json::parse(NodeStatusToJson(n));
  ASSERT_TRUE(j.contains("clock_offset_ms"));
  EXPECT_TRUE(j["clock_offset_ms"].is_null());
  Result<state::NodeStatus> back = NodeStatusFromJson(j.dump());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_FALSE(back->clock_offset_ms.has_value());

  n.clock_offset_ms = -3600012;
  j = nlohmann::json::parse(NodeStatusToJson(n));
  EXPECT_EQ(j["clock_offset_ms"], -3600012);
  back = NodeStatusFromJson(j.dump());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->clock_offset_ms, -3600012);

  j["clock_offset_ms"] = "soon";
  back = NodeStatusFromJson(j.dump());
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("clock_offset_ms"), std::string::npos);
}

}  // namespace
}  // namespace hachi::api
