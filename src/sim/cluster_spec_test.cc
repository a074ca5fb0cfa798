// Cluster specs: preset items, the Philly machine list, and errors naming the item.
#include "sim/cluster_spec.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/testing/paths.h"

namespace hachi::sim {
namespace {

std::string MachineList() {
  return SourceDir() + "/testdata/traces/philly_cluster_machine_list.csv";
}

TEST(ClusterSpecTest, ValidSpecs) {
  struct Case {
    const char* name;
    const char* spec;
    size_t nodes;
    int gpus;
    size_t blocks;
  };
  const Case cases[] = {
      {"default", "96x8:hgx-h100", 96, 768, 6},
      {"two kinds", "96x8:hgx-h100,32x8:pcie-8x-l40s", 128, 1024, 8},
      {"spaces", " 2x8:dgx-a100 , 1x16:hgx2-16 ", 3, 32, 2},
      {"partial block", "17x8:a800", 17, 136, 2},
      {"philly", "philly", 552, 2490, 15 + 21},
  };
  for (const Case& c : cases) {
    ClusterOptions opts;
    opts.philly_machine_list = MachineList();
    Result<sched::ClusterState> s = BuildCluster(c.spec, opts);
    ASSERT_TRUE(s.ok()) << c.name << ": " << s.status().ToString();
    EXPECT_EQ(s->nodes.size(), c.nodes) << c.name;
    EXPECT_EQ(TotalGpus(*s), c.gpus) << c.name;
    std::set<std::string> blocks;
    for (const sched::Node& n : s->nodes) blocks.insert(n.block);
    EXPECT_EQ(blocks.size(), c.blocks) << c.name;
    ASSERT_EQ(s->partitions.size(), 1u) << c.name;
    EXPECT_EQ(s->partitions[0].name, "default");
    EXPECT_EQ(s->partitions[0].nodes.size(), c.nodes) << c.name;
    EXPECT_EQ(s->partitions[0].max_time, 90 * kDay);
    EXPECT_EQ(s->partitions[0].default_time, 4 * kHour);
  }
}

TEST(ClusterSpecTest, NodesAreNamedIdleAndShareOneModelPerPreset) {
  Result<sched::ClusterState> s = BuildCluster("20x8:hgx-h100,1x8:pcie-8x-l40s");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const sched::Node& first = s->nodes[0];
  EXPECT_EQ(first.name, "n0001");
  EXPECT_EQ(first.block, "b01");
  EXPECT_EQ(s->nodes[16].block, "b02");
  EXPECT_EQ(s->nodes[20].name, "n0021");
  EXPECT_EQ(s->nodes[20].block, "b03");  // a new server type starts a new block
  EXPECT_EQ(first.cpus, 224);
  EXPECT_EQ(first.memory_mib, 2048 * 1024);
  EXPECT_EQ(first.free_cpus, first.cpus);
  EXPECT_EQ(first.free_gpus.size(), 8);
  EXPECT_EQ(first.gpu_model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(first.interconnect, topo::InterconnectClass::kNvSwitch);
  EXPECT_EQ(s->nodes[20].interconnect, topo::InterconnectClass::kPcieOnly);
  EXPECT_EQ(first.model.get(), s->nodes[19].model.get());
  EXPECT_NE(first.model.get(), s->nodes[20].model.get());
  EXPECT_EQ(first.partitions, std::vector<int>{0});
}

TEST(ClusterSpecTest, PhillyHasTwoGpuPcieNodes) {
  ClusterOptions opts;
  opts.philly_machine_list = MachineList();
  Result<sched::ClusterState> s = BuildCluster("philly", opts);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  int eight = 0, two = 0;
  for (const sched::Node& n : s->nodes) {
    (n.gpu_count() == 8 ? eight : two)++;
    EXPECT_EQ(n.interconnect, topo::InterconnectClass::kPcieOnly) << n.name;
  }
  EXPECT_EQ(eight, 231);
  EXPECT_EQ(two, 321);
  EXPECT_EQ(s->nodes.back().gpu_count(), 2);
  EXPECT_EQ(s->nodes.back().model->link(0, 1).pcie, topo::PciePath::kPhb);
}

TEST(ClusterSpecTest, ErrorsNameTheItem) {
  struct Case {
    const char* name;
    const char* spec;
    StatusCode code;
    const char* want;
  };
  const Case cases[] = {
      {"gpu count mismatch", "96x4:hgx-h100", StatusCode::kInvalidArgument,
       "preset hgx-h100 has 8 GPUs, not 4"},
      {"unknown preset", "4x8:dgx-z", StatusCode::kNotFound, "'4x8:dgx-z'"},
      {"no colon", "96x8", StatusCode::kInvalidArgument, "expected COUNTxGPUS:PRESET"},
      {"zero nodes", "0x8:hgx-h100", StatusCode::kInvalidArgument, "node count"},
      {"bad count", "ax8:hgx-h100", StatusCode::kInvalidArgument, "node count"},
      {"empty item", "96x8:hgx-h100,", StatusCode::kInvalidArgument, "item ''"},
      {"empty", "", StatusCode::kInvalidArgument, "empty cluster spec"},
      // Each item within bounds, together 120,000 nodes.
      {"too many in all", "60000x8:hgx-h100,60000x8:hgx-h100",
       StatusCode::kInvalidArgument, "more than 100000 nodes in all"},
  };
  for (const Case& c : cases) {
    Result<sched::ClusterState> s = BuildCluster(c.spec);
    ASSERT_FALSE(s.ok()) << c.name;
    EXPECT_EQ(s.status().code(), c.code) << c.name << ": " << s.status().ToString();
    EXPECT_NE(s.status().message().find(c.want), std::string::npos)
        << c.name << ": " << s.status().message();
  }
}

// The machine list from memory (fuzz_trace reads it so), checked as the file is.
TEST(ClusterSpecTest, MachineListText) {
  ClusterOptions opts;
  opts.philly_machine_list_text =
      "machineId, number of GPUs, single GPU mem\nm0,2, 12GB\nm1,8, 24GB\n\n";
  Result<sched::ClusterState> s = BuildCluster("philly", opts);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->nodes.size(), 2u);
  opts.philly_machine_list_text =
      "machineId, number of GPUs, single GPU mem\nm0,4, 12GB\n";
  s = BuildCluster("philly", opts);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("philly:2: number of GPUs"), std::string::npos)
      << s.status().message();
}

TEST(ClusterSpecTest, MissingMachineListIsNotFound) {
  ClusterOptions opts;
  opts.shared_dir = "/nonexistent";
  Result<sched::ClusterState> s = BuildCluster("philly", opts);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("/nonexistent/traces/philly-atc19"),
            std::string::npos);
}

}  // namespace
}  // namespace hachi::sim
