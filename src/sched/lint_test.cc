#include "sched/lint.h"

#include <gtest/gtest.h>

#include "sched/testing.h"

namespace hachi::sched {
namespace {

TEST(LintPartitionsTest, OneClassIsQuiet) {
  ClusterState s = testing::MakeCluster().Nodes(4, "hgx-h100").Partition("gpu").Build();
  EXPECT_TRUE(LintPartitions(s).empty());
}

TEST(LintPartitionsTest, MixedClassesAndModelsAreNamed) {
  ClusterState s = testing::MakeCluster()
                       .Nodes(2, "hgx-h100")
                       .Nodes(3, "pcie-8x-l40s")
                       .Partition("all")
                       .Partition("nv", PartitionMode::kShared, {0, 1})
                       .Build();
  std::vector<PolicyWarning> w = LintPartitions(s);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].partition, "all");
  EXPECT_EQ(w[0].code, "mixed-interconnect");
  EXPECT_NE(w[0].message.find("2 nvswitch, 3 pcie-only"), std::string::npos)
      << w[0].message;
  EXPECT_EQ(w[1].code, "mixed-gpu-models");
  EXPECT_NE(w[1].message.find("3 NVIDIA L40S"), std::string::npos) << w[1].message;
}

TEST(LintPartitionsTest, EmptyPartition) {
  ClusterState s = testing::MakeCluster().Nodes(1, "hgx-h100").Partition("a").Build();
  s.partitions[0].nodes.clear();
  std::vector<PolicyWarning> w = LintPartitions(s);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].code, "no-nodes");
}

}  // namespace
}  // namespace hachi::sched
