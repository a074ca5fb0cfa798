#include "alloc/node_model.h"

#include <gtest/gtest.h>

#include "alloc/link_score.h"
#include "alloc/objective.h"
#include "alloc/testing.h"

namespace hachi::alloc {
namespace {

using testing::TopoBuilder;

struct ScoreCase {
  const char* name;
  const char* cell;
  int score;
};

class LinkScoreTest : public ::testing::TestWithParam<ScoreCase> {};

TEST_P(LinkScoreTest, Scores) {
  bool self = false;
  Result<topo::Link> l = topo::ParseLinkCell(GetParam().cell, &self);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(LinkScore(*l), GetParam().score);
}

INSTANTIATE_TEST_SUITE_P(
    Table, LinkScoreTest,
    ::testing::Values(ScoreCase{"sys", "SYS", 1}, ScoreCase{"soc", "SOC", 1},
                      ScoreCase{"node", "NODE", 2}, ScoreCase{"phb", "PHB", 3},
                      ScoreCase{"pxb", "PXB", 4}, ScoreCase{"pix", "PIX", 5},
                      ScoreCase{"nv1", "NV1", 20}, ScoreCase{"nv2", "NV2", 30},
                      ScoreCase{"nv12", "NV12", 130}, ScoreCase{"nv18", "NV18", 190}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(LinkScore, UnknownIsZeroAndNvLinkHidesPcie) {
  EXPECT_EQ(LinkScore(topo::Link{}), 0);
  EXPECT_EQ(LinkScore(topo::Link{2, topo::PciePath::kPix}), 30);
}

TEST(NodeModel, RejectsTooManyOrNoGpus) {
  EXPECT_EQ(NodeModel::Compile(topo::Topology(17)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NodeModel::Compile(topo::Topology(0)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(NodeModel::Compile(topo::Topology(16)).ok());
}

TEST(NodeModel, AsymmetricMatrixTakesTheBetterDirection) {
  const NodeModel m = TopoBuilder(2).OneWay(0, 1, "NV4").OneWay(1, 0, "SYS").Model();
  EXPECT_EQ(m.score(0, 1), 50);
  EXPECT_EQ(m.score(1, 0), 50);
  EXPECT_EQ(m.link(1, 0).Label(), "NV4");
}

TEST(NodeModel, PcieGroupsAreSwitchComponents) {
  const NodeModel m = testing::NamedModel("pcie8");
  const int want[] = {0, 0, 1, 1, 2, 2, 3, 3};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(m.pcie_group(i), want[i]) << "GPU " << i;
  // PXB joins switches too, transitively: 0-1 PIX, 1-2 PXB -> one group.
  const NodeModel chain =
      TopoBuilder(3).Link(0, 1, "PIX").Link(1, 2, "PXB").Link(0, 2, "SYS").Model();
  EXPECT_EQ(chain.pcie_group(2), 0);
  // nvidia-smi hides PCIe on NVLinked pairs: unknown.
  EXPECT_EQ(testing::NamedModel("nvswitch8").pcie_group(3), -1);
}

TEST(NodeModel, KeyIgnoresNumaNumberingButNotLinks) {
  const uint64_t a = TopoBuilder(4).NvSwitch(12).Numa({0, 0, 1, 1}).Model().key();
  const uint64_t b = TopoBuilder(4).NvSwitch(12).Numa({2, 2, 3, 3}).Model().key();
  const uint64_t c = TopoBuilder(4).NvSwitch(12).Numa({0, 1, 0, 1}).Model().key();
  const uint64_t d =
      TopoBuilder(4).NvSwitch(12).Numa({0, 0, 1, 1}).Link(0, 1, "NV11").Model().key();
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
}

TEST(Objective, GroupSizes) {
  EXPECT_EQ(GroupSizes(8), (std::vector<int>{4, 2}));
  EXPECT_EQ(GroupSizes(16), (std::vector<int>{8, 4, 2}));
  EXPECT_EQ(GroupSizes(10), (std::vector<int>{8, 4, 2}));
  EXPECT_EQ(GroupSizes(3), (std::vector<int>{2}));
  EXPECT_TRUE(GroupSizes(2).empty());
}

TEST(Objective, LexPreferTakesTheLowestDifferingIndex) {
  EXPECT_TRUE(LexPrefer(0b0011, 0b0110));  // {0,1} before {1,2}
  EXPECT_TRUE(LexPrefer(0b1001, 0b0110));  // {0,3} before {1,2}
  EXPECT_FALSE(LexPrefer(0b0110, 0b1001));
}

}  // namespace
}  // namespace hachi::alloc
