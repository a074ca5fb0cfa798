// `hachi doctor --server`'s clock-offset item (cli/clock_check.h): its verdict from the
// server's node list. The item against a real server: cli/faults_e2e_test.cc.
#include "cli/clock_check.h"

#include <gtest/gtest.h>

#include <optional>

namespace hachi::cli {
namespace {

std::vector<state::NodeStatus> NodesWith(std::optional<int64_t> n1_offset_ms) {
  std::vector<state::NodeStatus> nodes(2);
  nodes[0].record.name = "n0";
  nodes[0].clock_offset_ms = 0;
  nodes[1].record.name = "n1";
  nodes[1].clock_offset_ms = n1_offset_ms;
  return nodes;
}

TEST(ClockCheck, FailsPastFiveSecondsEitherWay) {
  struct Row {
    const char* name;
    Result<std::vector<state::NodeStatus>> nodes;
    std::string node;
    diag::CheckStatus want;
    std::string evidence;  // a part of it
  };
  const Row rows[] = {
      {"in sync", NodesWith(12), "n1", diag::CheckStatus::kOk, "n1's clock is +0.01s"},
      {"at the bound", NodesWith(5000), "n1", diag::CheckStatus::kOk, "+5.00s"},
      {"just behind the bound", NodesWith(-5000), "n1", diag::CheckStatus::kOk, "-5.00s"},
      {"just past it", NodesWith(5001), "n1", diag::CheckStatus::kFail,
       "n1's clock is +5.00s off the server's"},
      {"an hour ahead", NodesWith(3600020), "n1", diag::CheckStatus::kFail, "+3600.02s"},
      {"an hour behind", NodesWith(-3600000), "n1", diag::CheckStatus::kFail,
       "-3600.00s"},
      {"no reading (an older agent)", NodesWith(std::nullopt), "n1",
       diag::CheckStatus::kWarn, "no clock reading of node n1"},
      {"no such node", NodesWith(0), "n7", diag::CheckStatus::kWarn, "has no node n7"},
      {"no server", Unavailable("connection refused"), "n1", diag::CheckStatus::kWarn,
       "cannot ask the server unix:/run/hachi.sock: connection refused"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    const diag::CheckItem item = ClockCheckItem("unix:/run/hachi.sock", r.node, r.nodes);
    EXPECT_EQ(item.check, "clock-offset");
    EXPECT_EQ(item.status, r.want);
    EXPECT_NE(item.evidence.find(r.evidence), std::string::npos) << item.evidence;
    if (r.want == diag::CheckStatus::kFail) {
      EXPECT_NE(item.fix.find("time sync"), std::string::npos) << item.fix;
    }
    EXPECT_EQ(item.fix.empty(), r.want == diag::CheckStatus::kOk) << item.fix;
  }
}

}  // namespace
}  // namespace hachi::cli
