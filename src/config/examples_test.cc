// The example configs (examples/*.toml) load against the default simulated cluster
// (96x8:hgx-h100) and say what their comments promise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/cluster_config.h"
#include "core/testing/paths.h"
#include "sim/cluster_spec.h"

namespace hachi::config {
namespace {

using ::testing::HasSubstr;

struct Loaded {
  ClusterConfig config;
  sched::ClusterState state;
};

Loaded Load(const std::string& name) {
  const std::string path = SourceDir() + "/examples/" + name;
  Result<ClusterConfig> c = LoadClusterConfig(path);
  EXPECT_TRUE(c.ok()) << c.status().message();
  Result<sched::ClusterState> s = sim::BuildCluster(sim::kDefaultClusterSpec);
  EXPECT_TRUE(s.ok()) << s.status().message();
  Loaded l{c.ok() ? std::move(*c) : ClusterConfig{}, std::move(*s)};
  Status st = ApplyClusterConfig(l.config, &l.state);
  EXPECT_TRUE(st.ok()) << st.message();
  return l;
}

TEST(ExamplesTest, Gpu8Shared) {
  Loaded l = Load("gpu8-shared.toml");
  const sched::ClusterState& s = l.state;
  ASSERT_EQ(s.partitions.size(), 2u);
  const sched::Partition& gpu8 = s.partitions[s.PartitionIndex("gpu8")];
  const sched::Partition& shared = s.partitions[s.PartitionIndex("gpu-shared")];
  EXPECT_EQ(gpu8.mode, sched::PartitionMode::kWholeNode);
  EXPECT_EQ(gpu8.nodes.size(), 64u);
  EXPECT_EQ(shared.mode, sched::PartitionMode::kShared);
  EXPECT_EQ(shared.min_gpus, 1);
  EXPECT_EQ(shared.max_gpus, 4);
  EXPECT_EQ(shared.nodes.size(), 40u);
  // The overlap: n0057..n0064 are in both partitions, n0065.. in gpu-shared only.
  EXPECT_EQ(s.nodes[56].partitions.size(), 2u);
  EXPECT_EQ(s.nodes[55].partitions.size(), 1u);
  EXPECT_EQ(s.nodes[64].partitions.size(), 1u);
  EXPECT_EQ(s.nodes[95].block, "shared");
  EXPECT_FALSE(s.limits.user_gpus.empty());
  EXPECT_DOUBLE_EQ(s.fairshare.shares.at("team-a"), 2);
  EXPECT_EQ(s.qos.size(), 2u);
}

TEST(ExamplesTest, DayNight) {
  Loaded l = Load("day-night.toml");
  const sched::ClusterState& s = l.state;
  ASSERT_EQ(s.partitions.size(), 2u);
  const sched::Partition& inf = s.partitions[0];
  const sched::Partition& train = s.partitions[1];
  EXPECT_EQ(inf.name, "inference");
  EXPECT_EQ(inf.tier, 2);
  EXPECT_TRUE(inf.preempt_lower_tiers);
  EXPECT_EQ(inf.grace, 5 * kMinute);
  ASSERT_EQ(inf.windows.size(), 1u);
  EXPECT_EQ(inf.windows[0].start_minute, 8 * 60);
  EXPECT_EQ(inf.windows[0].end_minute, 20 * 60);
  EXPECT_EQ(inf.window_nodes.size(), 16u);
  EXPECT_EQ(train.name, "training");
  EXPECT_EQ(train.tier, 1);
  EXPECT_EQ(train.nodes.size(), 96u);
  EXPECT_EQ(train.preempt_mode, sched::PreemptMode::kRequeue);
}

// The examples are strict TOML for this parser: a typo in them would be an error.
TEST(ExamplesTest, ATypoIsAnError) {
  Result<ClusterConfig> c = ParseClusterConfig(
      "[[partition]]\nname = \"x\"\nnodes = \"all\"\ntier = 1\nteir = 2\n", "typo.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(),
              HasSubstr("typo.toml:5: partition[0].teir: unknown key"));
}

}  // namespace
}  // namespace hachi::config
