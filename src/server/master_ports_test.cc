// The MASTER_PORT deciders on their own, row by row (master_port_test.cc drives them
// through the Controller).
#include "server/master_ports.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace hachi::server {
namespace {

constexpr PortRange kRange{29500, 4};

struct FreeRow {
  std::string name;
  std::set<int> used;
  PortRange range;
  int want;
};

class LowestFreePortTest : public testing::TestWithParam<FreeRow> {};

TEST_P(LowestFreePortTest, Picks) {
  EXPECT_EQ(LowestFreePort(GetParam().used, GetParam().range), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, LowestFreePortTest,
    testing::Values(FreeRow{"none_used", {}, kRange, 29500},
                    FreeRow{"lowest_taken", {29500}, kRange, 29501},
                    FreeRow{"a_hole_is_filled", {29500, 29502}, kRange, 29501},
                    FreeRow{
                        "outside_the_range_ignored", {1, 29499, 29504}, kRange, 29500},
                    FreeRow{"all_taken", {29500, 29501, 29502, 29503}, kRange, 0},
                    FreeRow{"empty_range", {}, PortRange{29500, 0}, 0}),
    [](const testing::TestParamInfo<FreeRow>& p) { return p.param.name; });

state::JobRecord Running(state::JobId id, const std::string& rank0, int port) {
  state::JobRecord j;
  j.id = id;
  j.state = state::JobState::kRunning;
  j.master_port = port;
  j.allocations.push_back(state::NodeAllocation{rank0, {}, 1, 1, 0, 0, {}});
  return j;
}

struct PortOfRow {
  std::string name;
  state::JobId id;
  int recorded;
  int want;
};

class MasterPortOfTest : public testing::TestWithParam<PortOfRow> {};

TEST_P(MasterPortOfTest, Says) {
  EXPECT_EQ(MasterPortOf(Running(GetParam().id, "n1", GetParam().recorded), kRange),
            GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, MasterPortOfTest,
    testing::Values(PortOfRow{"recorded", 7, 29502, 29502},
                    // Rows from before ports were tracked: base + id mod 1000.
                    PortOfRow{"old_row", 7, 0, 29507},
                    PortOfRow{"old_row_wraps", 2042, 0, 29542}),
    [](const testing::TestParamInfo<PortOfRow>& p) { return p.param.name; });

state::StateImage Image() {
  state::StateImage image;
  image.nodes["a1"].address = "10.0.0.1";
  image.nodes["a2"].address = "10.0.0.1";  // the same host
  image.nodes["b1"].address = "10.0.0.2";
  image.nodes["c1"];  // no address known
  return image;
}

TEST(PortKeyTest, ByAddressElseByNodeName) {
  const state::StateImage image = Image();
  EXPECT_EQ(PortKey(image, "a1"), "10.0.0.1");
  EXPECT_EQ(PortKey(image, "a2"), "10.0.0.1");
  EXPECT_EQ(PortKey(image, "c1"), "node c1");
  EXPECT_EQ(PortKey(image, "gone"), "node gone");
}

TEST(MasterPortsInUseTest, RunningJobsByRankZeroAddress) {
  state::StateImage image = Image();
  image.jobs[1] = Running(1, "a1", 29500);
  image.jobs[2] = Running(2, "a2", 29501);  // a1's host: one range
  image.jobs[3] = Running(3, "b1", 29500);
  image.jobs[4] = Running(4, "c1", 0);  // an old row
  image.jobs[5] = Running(5, "b1", 29503);
  image.jobs[5].state = state::JobState::kCompleted;  // ended: holds nothing
  image.jobs[6] = Running(6, "b1", 29502);
  image.jobs[6].allocations.clear();        // nothing booked: holds nothing
  image.jobs[8] = Running(8, "b1", 29501);  // not active: not looked at
  const PortsInUse used = MasterPortsInUse(image, {1, 2, 3, 4, 5, 6, 7}, kRange);
  EXPECT_EQ(used, (PortsInUse{{"10.0.0.1", {29500, 29501}},
                              {"10.0.0.2", {29500}},
                              {"node c1", {29504}}}));
}

}  // namespace
}  // namespace hachi::server
