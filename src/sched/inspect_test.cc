// FragmentedGpus and ExplainNodes: the cycle's node check asked outside a cycle.
#include "sched/inspect.h"

#include <gtest/gtest.h>

#include "sched/testing.h"

namespace hachi::sched {
namespace {

using testing::ClusterBuilder;
using testing::JobBuilder;
using testing::MakeCluster;
using testing::MakeJob;

constexpr Time kNow = 13 * kHour;

int V(const NodeBreakdown& b, NodeVerdict v) { return b.verdicts[static_cast<int>(v)]; }

// 4 nodes of 8 GPUs; n0 has 3 free (5 taken), n1 6 free, n2 and n3 8 taken.
ClusterBuilder Busy() {
  return MakeCluster()
      .Nodes(4, "hgx-h100")
      .Partition("p")
      .Running(MakeJob(1).Gpus(5), 0)
      .Running(MakeJob(2).Gpus(2), 1)
      .Running(MakeJob(3).Gpus(8), 2)
      .Running(MakeJob(4).Gpus(8), 3);
}

struct FragRow {
  const char* name;
  std::vector<JobBuilder> pending;
  int want;
};

TEST(FragmentedGpus, CountsFreeGpusTheSmallestMultiGpuJobCannotUse) {
  const std::vector<FragRow> rows = {
      {"no pending job: nothing is stranded", {}, 0},
      {"1-GPU jobs do not count", {MakeJob(10).Gpus(1)}, 0},
      {"4 GPUs: n0's 3 free are stranded, n1's 6 serve", {MakeJob(10).Gpus(4)}, 3},
      {"the smallest decides: 2 GPUs fit both",
       {MakeJob(10).Gpus(8), MakeJob(11).Gpus(2)},
       0},
      {"7 GPUs: both nodes' free sets are stranded", {MakeJob(10).Gpus(7)}, 9},
      {"held jobs are not waiting", {MakeJob(10).Gpus(7).Held(), MakeJob(11).Gpus(4)}, 3},
      {"CPUs count, not just GPUs: 4 GPUs with 200 CPUs fit nowhere",
       {MakeJob(10).Gpus(4).Cpus(200)},
       9},
      {"any job of the smallest size that fits clears the node",
       {MakeJob(10).Gpus(4).Cpus(200), MakeJob(11).Gpus(4)},
       3},
  };
  for (const FragRow& r : rows) {
    ClusterBuilder b = Busy();
    for (const JobBuilder& j : r.pending) b.Pending(j);
    const ClusterState s = b.Build();
    const std::vector<int> got = FragmentedGpus(s, kNow);
    ASSERT_EQ(got.size(), 1u) << r.name;
    EXPECT_EQ(got[0], r.want) << r.name;
  }
}

TEST(FragmentedGpus, PerPartitionAndDownNodesLeftOut) {
  ClusterState s = MakeCluster()
                       .Nodes(3, "hgx-h100")
                       .Partition("a", PartitionMode::kShared, {0, 1})
                       .Partition("b", PartitionMode::kShared, {2})
                       .Running(MakeJob(1).Gpus(6).Partition("a"), 0)
                       .Running(MakeJob(2).Gpus(6).Partition("b"), 2)
                       .NodeState(1, NodeState::kDrained)
                       .Pending(MakeJob(10).Gpus(4).Partition("a"))
                       .Build();
  // a: n0's 2 free are stranded, drained n1 does not count; b: no multi-GPU job waits.
  EXPECT_EQ(FragmentedGpus(s, kNow), (std::vector<int>{2, 0}));
}

TEST(ExplainNodes, CountsEachNodeOnceByReason) {
  ClusterState s = MakeCluster()
                       .Nodes(6, "hgx-h100")
                       .Partition("p", PartitionMode::kShared, {0, 1, 2, 3, 4})
                       .Partition("other", PartitionMode::kShared, {5})
                       .Running(MakeJob(1).Gpus(5), 0)
                       .Running(MakeJob(2).Gpus(7), 1)
                       .NodeState(2, NodeState::kDrained)
                       .NodeState(3, NodeState::kDown)
                       .Pending(MakeJob(10).Gpus(4))
                       .Build();
  const NodeBreakdown b = ExplainNodes(s, s.pending[0], kNow);
  EXPECT_EQ(b.nodes, 6);
  EXPECT_EQ(b.not_in_partition, 1);
  EXPECT_EQ(b.unsuitable, 0);
  EXPECT_EQ(V(b, NodeVerdict::kGpus), 2);  // n0 (3 free) and n1 (1 free)
  EXPECT_EQ(b.largest_free[static_cast<int>(NodeVerdict::kGpus)], 3);
  EXPECT_EQ(V(b, NodeVerdict::kDown), 2);  // drained n2, down n3
  EXPECT_EQ(b.drained, 1);
  EXPECT_EQ(V(b, NodeVerdict::kFits), 1);  // n4
  EXPECT_EQ(b.largest_free_gpus, 8);
  EXPECT_EQ(b.largest_free_node, 4);
  EXPECT_EQ(b.free_gpus, 3 + 1 + 8);
}

TEST(ExplainNodes, TooSmallNodesAreUnsuitable) {
  ClusterState s = MakeCluster()
                       .Nodes(2, "hgx-h100")
                       .Partition("p")
                       .Pending(MakeJob(10).Gpus(4).Model("NVIDIA A100-SXM4-80GB"))
                       .Build();
  const NodeBreakdown b = ExplainNodes(s, s.pending[0], kNow);
  EXPECT_EQ(b.unsuitable, 2);
  EXPECT_EQ(b.largest_free_node, -1);
}

// A GPU share without a free GPU: a node whose shared GPU with room is its user's
// fits; one whose shared GPUs with room hold another user's shares counts apart (MPS
// serves one user per GPU), still under the kGpus verdict.
TEST(ExplainNodes, SharesCountGpusOfTheirUserAndOfOthers) {
  testing::ClusterBuilder b =
      MakeCluster().Nodes(3, "hgx-h100").Partition("p").AllowSharing();
  for (int node = 0; node < 3; ++node) {
    b.Running(MakeJob(10 + node).Gpus(6).User("carol"), node, "2-7");
  }
  b.Running(MakeJob(20).Share(500).User("alice"), 0, "0")
      .Running(MakeJob(21).Share(900).User("alice"), 0, "1")  // no room for 250
      .Running(MakeJob(22).Share(500).User("bob"), 1, "0")
      .Running(MakeJob(23).Share(500).User("alice"), 1, "1")
      .Running(MakeJob(24).Share(500).User("alice"), 2, "0")
      .Running(MakeJob(25).Share(500).User("alice"), 2, "1")
      .Pending(MakeJob(30).Share(250).User("bob"));
  const ClusterState s = b.Build();
  const NodeBreakdown nb = ExplainNodes(s, s.pending[0], kNow);
  EXPECT_EQ(V(nb, NodeVerdict::kFits), 1);  // n1: bob's GPU 0
  EXPECT_EQ(V(nb, NodeVerdict::kGpus), 2);
  EXPECT_EQ(nb.other_user, 2);       // n0, n2
  EXPECT_EQ(nb.other_user_gpus, 3);  // n0 GPU 0; n2 GPUs 0, 1
}

}  // namespace
}  // namespace hachi::sched
