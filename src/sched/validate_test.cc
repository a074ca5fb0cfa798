// ValidateRequest: one row per refusal, then the defaults it fills.
#include <gtest/gtest.h>

#include <utility>

#include "sched/scheduler.h"
#include "sched/testing.h"

namespace hachi::sched {
namespace {

using testing::MakeCluster;
using testing::MakeJob;

// n0-n3: hgx-h100; n4-n5: pcie-8x-l40s.
//   shared  (shared, every node)   gpu8 (whole-node, n0-n3, accounts ml only)
//   small   (shared, n0-n3, 1-4 GPUs, at most 1 day)   mps (shared, every node, GPU
//   shares)
ClusterState Cluster() {
  return MakeCluster()
      .Nodes(4, "hgx-h100")
      .Nodes(2, "pcie-8x-l40s")
      .Partition("shared")
      .Partition("gpu8", PartitionMode::kWholeNode, {0, 1, 2, 3})
      .AllowAccounts({"ml"})
      .Partition("small", PartitionMode::kShared, {0, 1, 2, 3})
      .MaxGpus(4)
      .Partition("mps")
      .AllowSharing()
      .Qos("high", 500)
      .Build();
}

struct Row {
  const char* name;
  testing::JobBuilder job;
  StatusCode code;
  const char* message;  // a substring of the message
};

class ValidateRefusal : public ::testing::TestWithParam<Row> {};

TEST_P(ValidateRefusal, RefusesWithReason) {
  ClusterState s = Cluster();
  s.partitions[2].max_time = kDay;
  Result<Job> r = ValidateRequest(s, GetParam().job.job().req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), GetParam().code) << r.status().ToString();
  EXPECT_NE(r.status().message().find(GetParam().message), std::string::npos)
      << r.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Rows, ValidateRefusal,
    ::testing::Values(
        // A job without GPUs only where the partition takes them.
        Row{"zero_gpus", MakeJob(1).Gpus(0), StatusCode::kUnsatisfiable,
            "cannot run in partition shared: it takes no CPU-only jobs (its config needs "
            "allow_cpu_jobs = true"},
        Row{"share_negative", MakeJob(1).Share(-1).Partition("mps"),
            StatusCode::kInvalidArgument, "negative"},
        Row{"share_whole_gpu", MakeJob(1).Share(1000).Partition("mps"),
            StatusCode::kInvalidArgument, "1..999"},
        Row{"share_of_two_gpus", MakeJob(1).Share(250).Gpus(2).Partition("mps"),
            StatusCode::kInvalidArgument, "fraction of one GPU; it asks for 2"},
        Row{"gpu_memory_without_share", MakeJob(1).Share(0, 1024).Partition("mps"),
            StatusCode::kInvalidArgument, "shared jobs only"},
        Row{"share_where_not_allowed", MakeJob(1).Share(250).Partition("shared"),
            StatusCode::kUnsatisfiable, "partition shared does not allow GPU sharing"},
        Row{"share_in_whole_node_partition",
            MakeJob(1).Share(250).Partition("gpu8").Account("ml"),
            StatusCode::kUnsatisfiable, "partition gpu8 does not allow GPU sharing"},
        Row{"share_memory_above_gpu", MakeJob(1).Share(250, 200000).Partition("mps"),
            StatusCode::kUnsatisfiable, "200000 MiB of GPU memory"},
        Row{"negative_gpus", MakeJob(1).Gpus(-2), StatusCode::kInvalidArgument,
            "negative"},
        Row{"negative_limit", MakeJob(1).Gpus(1).Limit(-5), StatusCode::kInvalidArgument,
            "negative"},
        Row{"gang_not_divisible", MakeJob(1).Gpus(10).Gang(3, 0).Gpus(10),
            StatusCode::kInvalidArgument, "do not divide"},
        Row{"unknown_partition", MakeJob(1).Gpus(1).Partition("nope"),
            StatusCode::kNotFound, "no partition 'nope'"},
        Row{"unknown_qos", MakeJob(1).Gpus(1).Qos("gold"), StatusCode::kNotFound,
            "no QoS 'gold'"},
        Row{"nine_gpus_one_node", MakeJob(1).Gpus(9), StatusCode::kUnsatisfiable,
            "asks for 9 GPUs on one node; the largest node in partition shared has 8"},
        Row{"over_partition_max", MakeJob(1).Gpus(6).Partition("small"),
            StatusCode::kUnsatisfiable, "at most 4"},
        Row{"time_over_max", MakeJob(1).Gpus(1).Partition("small").Limit(2 * kDay),
            StatusCode::kUnsatisfiable, "exceeds partition small's maximum"},
        Row{"no_such_model", MakeJob(1).Gpus(1).Model("A100"), StatusCode::kUnsatisfiable,
            "has GPU model A100"},
        Row{"too_little_gpu_memory", MakeJob(1).Gpus(1).MinGpuMemoryMib(100000),
            StatusCode::kUnsatisfiable, "100000 MiB of GPU memory"},
        Row{"too_many_cpus", MakeJob(1).Gpus(1).Cpus(4096), StatusCode::kUnsatisfiable,
            "4096 CPUs"},
        Row{"gang_across_classes", MakeJob(1).Gang(5, 8), StatusCode::kUnsatisfiable,
            "at most 4 alike"},
        Row{"more_nodes_than_partition", MakeJob(1).Gang(7, 1),
            StatusCode::kUnsatisfiable, "partition shared has 6"},
        Row{"account_not_allowed", MakeJob(1).Gpus(8).Partition("gpu8").Account("web"),
            StatusCode::kInvalidArgument, "allowed accounts: ml"}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(ValidateTest, FillsPartitionAndTimeLimit) {
  Result<Job> r = ValidateRequest(Cluster(), MakeJob(1).Gpus(2).job().req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->req.partition, "shared");
  EXPECT_EQ(r->partition, 0);
  EXPECT_EQ(r->req.time_limit, 4 * kHour);
}

TEST(ValidateTest, AcceptsShareAndRequiresItsMemoryPerGpu) {
  Result<Job> r =
      ValidateRequest(Cluster(), MakeJob(1).Share(250, 20480).Partition("mps").job().req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->req.gpu_share_milli, 250);
  EXPECT_EQ(r->req.min_gpu_memory_mib, 20480);
}

// A job that asks for no memory had no memory limit at all.
TEST(ApplyDefaultMemoryTest, BoundedDefaultWhenTheJobAsksForNone) {
  ClusterState s = Cluster();
  auto given = [&](const testing::JobBuilder& b) {
    Result<Job> j = ValidateRequest(s, b.job().req);
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    if (!j.ok()) return std::pair<int64_t, int64_t>{-1, -1};
    ApplyDefaultMemory(s, &*j);
    return std::pair{j->req.memory_mib, j->req.memory_mib_per_gpu};
  };
  // The built-in default: the smallest node memory per GPU of the partition's nodes.
  int64_t smallest = 0;
  for (int n : s.partitions[0].nodes) {
    const int64_t per = s.nodes[n].memory_mib / s.nodes[n].gpu_count();
    if (smallest == 0 || per < smallest) smallest = per;
  }
  ASSERT_GT(smallest, 0);
  EXPECT_EQ(given(MakeJob(1).Gpus(2)), (std::pair<int64_t, int64_t>{0, smallest}));
  // What the job asked for stays.
  EXPECT_EQ(given(MakeJob(1).Gpus(2).MemoryMib(1000)),
            (std::pair<int64_t, int64_t>{1000, 0}));
  // --mem=0: the memory of the partition's smallest node, all of a node's where they
  // are alike.
  int64_t smallest_node = 0;
  for (int n : s.partitions[0].nodes) {
    const int64_t m = s.nodes[n].memory_mib;
    if (smallest_node == 0 || m < smallest_node) smallest_node = m;
  }
  EXPECT_EQ(given(MakeJob(1).Gpus(2).MemoryMib(kAllOfNodeMemory)),
            (std::pair<int64_t, int64_t>{smallest_node, 0}));
  // The partition's own default.
  s.partitions[0].default_mem_per_gpu_mib = 65536;
  EXPECT_EQ(given(MakeJob(1).Gpus(4)), (std::pair<int64_t, int64_t>{0, 65536}));
  // A GPU share gets its fraction of a GPU's default.
  s.partitions[3].default_mem_per_gpu_mib = 40000;
  EXPECT_EQ(given(MakeJob(1).Share(250, 1024).Partition("mps")),
            (std::pair<int64_t, int64_t>{10000, 0}));
  // Nodes that say no memory give no default.
  ClusterState none = Cluster();
  for (Node& n : none.nodes) n.memory_mib = 0;
  Result<Job> j = ValidateRequest(none, MakeJob(1).Gpus(1).job().req);
  ASSERT_TRUE(j.ok());
  ApplyDefaultMemory(none, &*j);
  EXPECT_EQ(j->req.memory_mib_per_gpu, 0);
}

// A GPU job that asked for no CPUs held none in the scheduler's books (NumCPUs=0, the
// node's CPUAlloc 0 while it ran) and was pinned to every CPU of its node.
TEST(ApplyDefaultCpusTest, TheGpusShareOfTheNodesCpusWhenTheJobAsksForNone) {
  ClusterState s = Cluster();
  auto given = [&](const testing::JobBuilder& b) {
    Result<Job> j = ValidateRequest(s, b.job().req);
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    if (!j.ok()) return std::pair<int, int>{-1, -1};
    ApplyDefaultCpus(s, &*j);
    return std::pair{j->req.cpus, j->req.cpus_per_gpu};
  };
  // The built-in default: the smallest CPUs per GPU of the partition's nodes.
  int smallest = 0;
  for (int n : s.partitions[0].nodes) {
    const int per = s.nodes[n].cpus / s.nodes[n].gpu_count();
    if (smallest == 0 || per < smallest) smallest = per;
  }
  ASSERT_GT(smallest, 0);
  EXPECT_EQ(given(MakeJob(1).Gpus(2)), (std::pair<int, int>{0, smallest}));
  // A whole node's job: the node's CPUs.
  Result<Job> whole =
      ValidateRequest(s, MakeJob(1).Gpus(8).Partition("gpu8").Account("ml").job().req);
  ASSERT_TRUE(whole.ok());
  ApplyDefaultCpus(s, &*whole);
  const Node& node = s.nodes[s.partitions[whole->partition].nodes[0]];
  EXPECT_EQ(NodeCpus(whole->req), node.cpus / node.gpu_count() * node.gpu_count());
  // What the job asked for stays.
  EXPECT_EQ(given(MakeJob(1).Gpus(2).Cpus(3)), (std::pair<int, int>{3, 0}));
  // The partition's own default (Slurm's DefCpuPerGPU).
  s.partitions[0].default_cpus_per_gpu = 5;
  EXPECT_EQ(given(MakeJob(1).Gpus(4)), (std::pair<int, int>{0, 5}));
  // A GPU share gets its fraction of a GPU's, at least one.
  s.partitions[3].default_cpus_per_gpu = 8;
  EXPECT_EQ(given(MakeJob(1).Share(250, 1024).Partition("mps")),
            (std::pair<int, int>{2, 0}));
  s.partitions[3].default_cpus_per_gpu = 2;
  EXPECT_EQ(given(MakeJob(1).Share(250, 1024).Partition("mps")),
            (std::pair<int, int>{1, 0}));
  // Nodes that say no CPUs give no default.
  ClusterState none = Cluster();
  for (Node& n : none.nodes) n.cpus = 0;
  Result<Job> j = ValidateRequest(none, MakeJob(1).Gpus(1).job().req);
  ASSERT_TRUE(j.ok());
  ApplyDefaultCpus(none, &*j);
  EXPECT_EQ(NodeCpus(j->req), 0);
}

TEST(ValidateTest, EmptyPartitionSkipsPartitionsTheUserMayNotUse) {
  ClusterState s = Cluster();
  s.partitions[0].allowed_users = {"alice"};
  Result<Job> r = ValidateRequest(s, MakeJob(1).Gpus(8).Account("ml").job().req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->req.partition, "gpu8");
}

struct RoundRow {
  const char* name;
  testing::JobBuilder job;
  int gpus, nodes, gpus_per_node;
};

class ValidateWholeNode : public ::testing::TestWithParam<RoundRow> {};

TEST_P(ValidateWholeNode, RoundsUpToWholeNodes) {
  Result<Job> r = ValidateRequest(Cluster(), GetParam().job.job().req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->req.TotalGpus(), GetParam().gpus);
  EXPECT_EQ(r->req.nodes, GetParam().nodes);
  EXPECT_EQ(r->req.GpusPerNode(), GetParam().gpus_per_node);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, ValidateWholeNode,
    ::testing::Values(
        RoundRow{"three_gpus_get_a_node",
                 MakeJob(1).Gpus(3).Partition("gpu8").Account("ml"), 8, 1, 8},
        RoundRow{"twelve_gpus_get_two_nodes",
                 MakeJob(1).Gpus(12).Partition("gpu8").Account("ml"), 16, 2, 8},
        RoundRow{"gang_of_halves_gets_whole_nodes",
                 MakeJob(1).Gang(2, 4).Partition("gpu8").Account("ml"), 8, 1, 8},
        RoundRow{"exclusive_in_shared_partition", MakeJob(1).Gpus(2).Exclusive(), 8, 1,
                 8},
        RoundRow{"shared_job_unchanged", MakeJob(1).Gpus(2), 2, 1, 2}),
    [](const auto& row) { return std::string(row.param.name); });

}  // namespace
}  // namespace hachi::sched
