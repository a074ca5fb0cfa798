// ApplyClusterConfig onto clusters built from a spec: what it installs, the checks that
// need the cluster's nodes (each naming file, line and key), that a refused config
// leaves the state as it was, and that a partition's mode carries hard isolation into
// the scheduler.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/cluster_config.h"
#include "sched/scheduler.h"
#include "sim/cluster_spec.h"

namespace hachi::config {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

sched::ClusterState Cluster(const char* spec = "4x8:hgx-h100") {
  Result<sched::ClusterState> s = sim::BuildCluster(spec);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(*s);
}

ClusterConfig Parse(const std::string& text) {
  Result<ClusterConfig> c = ParseClusterConfig(text, "c.toml");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? std::move(*c) : ClusterConfig{};
}

TEST(ApplyClusterConfigTest, InstallsThePolicy) {
  sched::ClusterState s = Cluster();
  s.fairshare.usage["team-a"] = 42;
  ClusterConfig c = Parse(R"(
[[partition]]
name = "big"
nodes = "n[0001-0003]"
mode = "whole-node"
tier = 2
window = { start = "08:00", end = "20:00", nodes = "n0003" }
[[partition]]
name = "small"
nodes = ["n0003", "n0004"]
max_gpus = 4
[[qos]]
name = "high"
priority = 900
[limits]
user_gpus = { alice = 16 }
account_gpus = { team-a = 24 }
[fairshare]
shares = { team-a = 3 }
[priority]
tier = 7
[node."n[0001-0002]"]
block = "b42"
)");
  ASSERT_TRUE(ApplyClusterConfig(c, &s).ok());
  ASSERT_EQ(s.partitions.size(), 2u);
  EXPECT_EQ(s.partitions[0].name, "big");
  EXPECT_THAT(s.partitions[0].nodes, ElementsAre(0, 1, 2));
  EXPECT_EQ(s.partitions[0].mode, sched::PartitionMode::kWholeNode);
  EXPECT_EQ(s.partitions[0].tier, 2);
  EXPECT_THAT(s.partitions[0].window_nodes, ElementsAre(2));
  EXPECT_EQ(s.partitions[0].windows.size(), 1u);
  EXPECT_THAT(s.partitions[1].nodes, ElementsAre(2, 3));
  EXPECT_EQ(s.partitions[1].mode, sched::PartitionMode::kShared);
  EXPECT_EQ(s.partitions[1].max_gpus, 4);
  EXPECT_THAT(s.nodes[0].partitions, ElementsAre(0));
  EXPECT_THAT(s.nodes[2].partitions, ElementsAre(0, 1));  // in both: isolation applies
  EXPECT_THAT(s.nodes[3].partitions, ElementsAre(1));
  EXPECT_EQ(s.nodes[0].block, "b42");
  EXPECT_EQ(s.nodes[2].block, "b01");
  ASSERT_EQ(s.qos.size(), 1u);
  EXPECT_EQ(s.qos[0].priority, 900);
  EXPECT_EQ(s.limits.user_gpus.at("alice"), 16);
  EXPECT_EQ(s.limits.account_gpus.at("team-a"), 24);
  EXPECT_DOUBLE_EQ(s.fairshare.shares.at("team-a"), 3);
  EXPECT_DOUBLE_EQ(s.fairshare.usage.at("team-a"), 42);  // usage is kept
  EXPECT_DOUBLE_EQ(s.weights.tier, 7);
  EXPECT_DOUBLE_EQ(s.weights.age, sched::PriorityWeights{}.age);
}

TEST(ApplyClusterConfigTest, WindowNodesDefaultToThePartition) {
  sched::ClusterState s = Cluster();
  ClusterConfig c = Parse(
      "[[partition]]\nname = \"inf\"\nnodes = \"n[0001-0002]\"\n"
      "window = { start = \"08:00\", end = \"20:00\" }\n");
  ASSERT_TRUE(ApplyClusterConfig(c, &s).ok());
  EXPECT_THAT(s.partitions[0].window_nodes, ElementsAre(0, 1));
}

TEST(ApplyClusterConfigTest, NoPartitionsKeepsTheClustersOwn) {
  sched::ClusterState s = Cluster();
  ASSERT_TRUE(ApplyClusterConfig(Parse("[limits]\nuser_gpus = { bob = 8 }\n"), &s).ok());
  ASSERT_EQ(s.partitions.size(), 1u);
  EXPECT_EQ(s.partitions[0].name, "default");
  EXPECT_THAT(s.nodes[3].partitions, ElementsAre(0));
  EXPECT_EQ(s.limits.user_gpus.at("bob"), 8);
}

TEST(ApplyClusterConfigTest, JobsKeepTheirPartitions) {
  sched::ClusterState s = Cluster();
  sched::Job j;
  j.id = 7;
  j.partition = 0;  // "default"
  s.pending.push_back(j);
  ClusterConfig keeps = Parse(
      "[[partition]]\nname = \"new\"\nnodes = \"n0001\"\n"
      "[[partition]]\nname = \"default\"\nnodes = \"all\"\n");
  ASSERT_TRUE(ApplyClusterConfig(keeps, &s).ok());
  EXPECT_EQ(s.pending[0].partition, 1);

  ClusterConfig drops = Parse("[[partition]]\nname = \"other\"\nnodes = \"all\"\n");
  Status st = ApplyClusterConfig(drops, &s);
  EXPECT_THAT(st.message(), HasSubstr("partition default has job 7"));
  EXPECT_EQ(s.partitions.size(), 2u);  // unchanged
}

// Errors that need the cluster, and that a refused config changes nothing.
TEST(ApplyClusterConfigTest, Errors) {
  struct Case {
    const char* name;
    const char* text;
    const char* want;
  };
  const Case cases[] = {
      {"unknown node", "[[partition]]\nname = \"p\"\nnodes = \"n[0003-0005]\"\n",
       "c.toml:3: partition[0].nodes: no node 'n0005' (the cluster has 4 nodes, n0001 .. "
       "n0004)"},
      {"unknown window node",
       "[[partition]]\nname = \"p\"\nnodes = \"all\"\n"
       "window = { start = \"08:00\", end = \"09:00\", nodes = \"x1\" }\n",
       "c.toml:4: partition[0].window.nodes: no node 'x1'"},
      {"window node outside the partition",
       "[[partition]]\nname = \"p\"\nnodes = \"n0001\"\n"
       "window = { start = \"08:00\", end = \"09:00\", nodes = \"n0002\" }\n",
       "c.toml:4: partition[0].window.nodes: node n0002 is not in partition p"},
      {"two windows own a node",
       "[[partition]]\nname = \"a\"\nnodes = \"all\"\n"
       "window = { start = \"08:00\", end = \"09:00\", nodes = \"n0002\" }\n"
       "[[partition]]\nname = \"b\"\nnodes = \"n0002\"\n"
       "window = { start = \"10:00\", end = \"11:00\" }\n",
       "c.toml:5: partition[1]: window: node n0002 is already owned by the window of "
       "partition a"},
      {"unknown override node", "[node.n0009]\nblock = \"b1\"\n",
       "c.toml:1: node.n0009: no node 'n0009'"},
      {"conflicting overrides",
       "[node.\"n[0001-0002]\"]\nblock = \"b1\"\n[node.n0002]\nblock = \"b2\"\n",
       "node n0002 is also set at c.toml:"},
  };
  for (const Case& c : cases) {
    sched::ClusterState s = Cluster();
    const std::string before_block = s.nodes[1].block;
    ClusterConfig config = Parse(c.text);
    Status st = ApplyClusterConfig(config, &s);
    ASSERT_FALSE(st.ok()) << c.name;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(st.message(), HasSubstr(c.want)) << c.name;
    // Nothing was lost.
    ASSERT_EQ(s.partitions.size(), 1u) << c.name;
    EXPECT_EQ(s.partitions[0].name, "default") << c.name;
    EXPECT_THAT(s.nodes[1].partitions, ElementsAre(0)) << c.name;
    EXPECT_EQ(s.nodes[1].block, before_block) << c.name;
  }
}

// A node in a whole-node and a shared partition: while a whole-node job runs there, a
// shared job goes elsewhere.
TEST(ApplyClusterConfigTest, WholeNodeModeIsolatesSharedJobs) {
  sched::ClusterState s = Cluster("2x8:hgx-h100");
  ClusterConfig c = Parse(R"(
[[partition]]
name = "big"
nodes = "all"
mode = "whole-node"
[[partition]]
name = "small"
nodes = "all"
max_gpus = 4
)");
  ASSERT_TRUE(ApplyClusterConfig(c, &s).ok());
  sched::JobRequest big;
  big.gpus = 8;
  big.partition = "big";
  big.user = big.account = "u";
  Result<sched::Job> running = sched::ValidateRequest(s, big);
  ASSERT_TRUE(running.ok()) << running.status().message();
  running->id = 1;
  sched::Allocation a;
  a.node = 0;
  a.gpus = s.nodes[0].free_gpus;
  running->allocations = {a};
  s.nodes[0].whole_node_jobs = 1;
  s.running.push_back(*running);
  // The whole-node job holds all 8 GPUs. Mark 4 of them free anyway, so that only the
  // isolation flag, not the GPU count, can keep the shared job off the busy node
  // (which packing would otherwise prefer).
  s.nodes[0].free_gpus = GpuSet(uint64_t{0xF0});

  sched::JobRequest small;
  small.gpus = 1;
  small.partition = "small";
  small.user = small.account = "u";
  Result<sched::Job> pending = sched::ValidateRequest(s, small);
  ASSERT_TRUE(pending.ok()) << pending.status().message();
  pending->id = 2;
  s.pending.push_back(*pending);

  Result<std::unique_ptr<sched::Scheduler>> sched =
      sched::Scheduler::Create(sched::SchedConfig{});
  ASSERT_TRUE(sched.ok());
  sched::Plan plan = (*sched)->Schedule(s, 0);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].job, 2);
  ASSERT_EQ(plan.starts[0].allocations.size(), 1u);
  EXPECT_EQ(plan.starts[0].allocations[0].node, 1);
}

}  // namespace
}  // namespace hachi::config
