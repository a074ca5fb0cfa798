// The "besteffort" port: upstream go-gpuallocator's own test cases (besteffort_test.go,
// common_test.go), then how "hachi" compares with it on every hand-built layout and on
// random ones.
#include "alloc/besteffort_policy.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdio>

#include "alloc/hachi_policy.h"
#include "alloc/reference_testing.h"
#include "alloc/testing.h"

namespace hachi::alloc {
namespace {

using testing::TopoBuilder;

// Upstream's NewDGX1VoltaNode(): the DGX-1 NVLink mesh plus its P2P table (single
// switch within (0,1) (2,3) (4,5) (6,7), host bridge within a socket, cross-CPU across).
NodeModel UpstreamDgx1Volta() {
  topo::Topology t = TopoBuilder::Dgx1().Build();
  for (int a = 0; a < 8; ++a) {
    for (int c = 0; c < 8; ++c) {
      if (a == c) continue;
      topo::Link l = t.link(a, c);  // keeps NV<n>, adds the PCIe part
      l.pcie = a / 4 != c / 4   ? topo::PciePath::kSys
               : a / 2 == c / 2 ? topo::PciePath::kPix
                                : topo::PciePath::kPhb;
      t.SetLink(a, c, l);
    }
  }
  return *NodeModel::Compile(t);
}

// Upstream's New4xRTX8000Node(): NV2 bridges (0,3) (1,2); same CPU (0,1) (2,3).
NodeModel UpstreamRtx8000() {
  return TopoBuilder(4)
      .Link(0, 1, "NODE")
      .Link(2, 3, "NODE")
      .Link(0, 2, "SYS")
      .Link(1, 3, "SYS")
      .Link(0, 3, "NV2")
      .Link(1, 2, "NV2")
      .Model();
}

struct UpstreamCase {
  const char* name;
  std::vector<int> free;
  std::vector<int> required;
  int count;
  std::vector<int> want;  // empty: upstream returns nothing; we return an error
};

class BestEffortUpstreamTest : public ::testing::TestWithParam<UpstreamCase> {};

TEST_P(BestEffortUpstreamTest, MatchesUpstream) {
  const UpstreamCase& c = GetParam();
  const NodeModel m = UpstreamDgx1Volta();
  Result<Choice> got = BestEffortPolicy().Choose(
      m, GpuSet::FromIndices(c.free), {c.count, GpuSet::FromIndices(c.required)});
  if (c.want.empty()) {
    EXPECT_FALSE(got.ok());
    return;
  }
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->gpus.ToString(), GpuSet::FromIndices(c.want).ToString());
}

void PrintTo(const UpstreamCase& c, std::ostream* os) { *os << c.name; }

// TestBestEffortAllocate, row by row.
INSTANTIATE_TEST_SUITE_P(
    Upstream, BestEffortUpstreamTest,
    ::testing::Values(
        UpstreamCase{"single_nvlink_prefer_same_switch", {0, 2, 4, 5}, {}, 2, {4, 5}},
        UpstreamCase{"single_nvlink_prefer_same_socket", {0, 4, 5, 6}, {}, 2, {5, 6}},
        UpstreamCase{"prefer_dual_nvlink_same_socket", {0, 3, 1}, {}, 2, {0, 3}},
        UpstreamCase{"prefer_dual_nvlink_cross_socket", {0, 1, 4}, {}, 2, {0, 4}},
        UpstreamCase{"must_include_size_1", {0, 1, 2, 3, 4, 5, 6, 7}, {4}, 1, {4}},
        UpstreamCase{"must_include_size_2", {0, 1, 2, 3, 4, 5, 6, 7}, {4}, 2, {4, 7}},
        UpstreamCase{
            "must_include_size_4", {0, 1, 2, 3, 4, 5, 6, 7}, {4}, 4, {4, 5, 6, 7}},
        UpstreamCase{
            "must_include_unavailable", {1, 2, 3, 4, 5, 6, 7}, {0, 1, 2, 3}, 4, {}},
        UpstreamCase{"must_include_full_set",
                     {0, 1, 2, 3, 4, 5, 6, 7},
                     {0, 2, 4, 6},
                     4,
                     {0, 2, 4, 6}},
        UpstreamCase{
            "must_include_too_many", {0, 1, 2, 3, 4, 5, 6, 7}, {1, 2, 3, 4, 5, 6}, 4, {}},
        UpstreamCase{
            "required_more_than_free", {1, 2, 3, 4, 5}, {1, 2, 3, 4, 5, 6}, 1, {}}),
    [](const auto& p) { return std::string(p.param.name); });

// Upstream's Allocator tests: allocate in sequence from a full node until busy.
struct SequenceCase {
  const char* name;
  NodeModel (*model)();
  int count;
  std::vector<std::vector<int>> want;  // one set per allocation, then busy
};

void PrintTo(const SequenceCase& c, std::ostream* os) { *os << c.name; }

class BestEffortSequenceTest : public ::testing::TestWithParam<SequenceCase> {};

TEST_P(BestEffortSequenceTest, AllocatesInUpstreamOrder) {
  const SequenceCase& c = GetParam();
  const NodeModel m = c.model();
  GpuSet free = m.all_gpus();
  for (const std::vector<int>& want : c.want) {
    Result<Choice> got = BestEffortPolicy().Choose(m, free, {c.count, {}});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->gpus.ToString(), GpuSet::FromIndices(want).ToString());
    free = free - got->gpus;
  }
  EXPECT_EQ(BestEffortPolicy().Choose(m, free, {1, {}}).status().code(),
            StatusCode::kBusy);
}

INSTANTIATE_TEST_SUITE_P(
    Upstream, BestEffortSequenceTest,
    ::testing::Values(
        SequenceCase{"rtx8000_one", UpstreamRtx8000, 1, {{0}, {1}, {2}, {3}}},
        SequenceCase{"rtx8000_two", UpstreamRtx8000, 2, {{0, 3}, {1, 2}}},
        SequenceCase{"rtx8000_four", UpstreamRtx8000, 4, {{0, 1, 2, 3}}},
        SequenceCase{"dgx1_volta_one",
                     UpstreamDgx1Volta,
                     1,
                     {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}},
        SequenceCase{
            "dgx1_volta_two", UpstreamDgx1Volta, 2, {{0, 3}, {1, 2}, {4, 7}, {5, 6}}},
        SequenceCase{
            "dgx1_volta_four", UpstreamDgx1Volta, 4, {{0, 1, 2, 3}, {4, 5, 6, 7}}},
        SequenceCase{
            "dgx1_volta_eight", UpstreamDgx1Volta, 8, {{0, 1, 2, 3, 4, 5, 6, 7}}}),
    [](const auto& p) { return std::string(p.param.name); });

// TestBestEffortAllocateRetainsBestPartition: the best set sits in the last slot of
// the best partition (upstream once lost it to slice aliasing).
TEST(BestEffortUpstream, RetainsBestPartition) {
  TopoBuilder b(14);
  for (int i = 0; i < 12; i += 2) b.Link(i, i + 1, "NV2");
  b.Link(12, 13, "NV4");
  const NodeModel m = b.Model();
  Result<Choice> got = BestEffortPolicy().Choose(m, m.all_gpus(), {2, {}});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->gpus.ToString(), "12,13");
}

TEST(BestEffortPairScore, FollowsUpstreamTable) {
  const NodeModel m = UpstreamDgx1Volta();
  EXPECT_EQ(BestEffortPairScore(m, 0, 1), 50 + 100);  // PIX + NV1
  EXPECT_EQ(BestEffortPairScore(m, 0, 3), 30 + 200);  // PHB + NV2
  EXPECT_EQ(BestEffortPairScore(m, 0, 5), 10);        // SYS
  const NodeModel d = testing::NamedModel("dgx1");    // nvidia-smi hides PCIe on NV pairs
  EXPECT_EQ(BestEffortPairScore(d, 0, 3), 200);
}

}  // namespace
}  // namespace hachi::alloc
