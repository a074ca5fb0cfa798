// Fragmentation (fragmentation.h): the measure on hand-worked nodes, its memo, the score,
// and `hachi` placement with and without a workload.
#include "sched/fragmentation.h"

#include <gtest/gtest.h>

#include "sched/scheduler.h"
#include "sched/testing.h"

namespace hachi::sched {
namespace {

using testing::MakeCluster;
using testing::MakeJob;

WorkloadClass Whole(int gpus, int cpus = 0) { return {gpus, 0, cpus, 0, "", 1}; }
WorkloadClass Share(int milli, int cpus = 0) { return {1, milli, cpus, 0, "", 1}; }
WorkloadClass CpuOnly(int cpus) { return {0, 0, cpus, 0, "", 1}; }

NodeFree Free(std::vector<int> milli, int cpus = 8, int64_t memory_mib = 1000,
              uint64_t model_ok = ~uint64_t{0}) {
  NodeFree n;
  n.gpus = static_cast<int>(milli.size());
  for (size_t g = 0; g < milli.size(); ++g) n.milli[g] = static_cast<int16_t>(milli[g]);
  n.cpus = cpus;
  n.memory_mib = memory_mib;
  n.model_ok = model_ok;
  return n;
}

struct FragRow {
  const char* name;
  std::vector<WorkloadClass> workload;
  std::vector<double> weights;  // normalised
  NodeFree node;
  double want;
};

class NodeFragmentationTest : public ::testing::TestWithParam<FragRow> {};

TEST_P(NodeFragmentationTest, MatchesHandWorkedValue) {
  const FragRow& r = GetParam();
  EXPECT_DOUBLE_EQ(NodeFragmentation(r.workload, r.weights, r.node), r.want);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, NodeFragmentationTest,
    ::testing::Values(
        // Half shares and whole GPUs, equally often.
        FragRow{"empty_node_hosts_both",
                {Share(500), Whole(1)},
                {0.5, 0.5},
                Free({1000, 1000}),
                0},
        // 500 left on GPU 0: a half share fits it, a whole-GPU job cannot use it.
        FragRow{"half_used_gpu_fragments_whole_jobs",
                {Share(500), Whole(1)},
                {0.5, 0.5},
                Free({500, 1000}),
                0.5 * 500},
        // 300 left: too little for either class.
        FragRow{"small_rest_fragments_both",
                {Share(500), Whole(1)},
                {0.5, 0.5},
                Free({300, 1000}),
                0.5 * 300 + 0.5 * 300},
        FragRow{"no_cpu_left_everything_idle_is_fragment",
                {Share(500, 4), Whole(1, 4)},
                {0.5, 0.5},
                Free({1000, 500}, 3),
                1500},
        FragRow{"short_of_memory_everything_idle_is_fragment",
                {{1, 0, 0, 2000, "", 1}},
                {1.0},
                Free({1000, 1000}, 8, 1999),
                2000},
        FragRow{"wrong_model_everything_idle_is_fragment",
                {Share(500), Whole(1)},
                {0.5, 0.5},
                Free({1000, 400}, 8, 1000, /*model_ok=*/0b01),
                0.5 * 400 + 0.5 * 1400},
        FragRow{"cpu_only_jobs_use_no_gpu", {CpuOnly(1)}, {1.0}, Free({1000, 250}), 1250},
        FragRow{"two_gpu_job_needs_two_whole_gpus",
                {Whole(2)},
                {1.0},
                Free({1000, 600, 0, 0}),
                1600},
        FragRow{"two_gpu_job_fits_rest_is_fragment",
                {Whole(2)},
                {1.0},
                Free({1000, 600, 1000, 0}),
                600},
        FragRow{"full_node_has_no_fragment",
                {Share(500), Whole(1)},
                {0.5, 0.5},
                Free({0, 0}),
                0},
        FragRow{"weights_apply",
                {Share(500), Whole(1)},
                {0.25, 0.75},
                Free({500, 1000}),
                0.75 * 500}),
    [](const auto& row) { return std::string(row.param.name); });

struct ScoreRow {
  const char* name;
  double delta;
  int want;
};

class FragScoreTest : public ::testing::TestWithParam<ScoreRow> {};

TEST_P(FragScoreTest, Sigmoid) {
  EXPECT_EQ(FragScore(GetParam().delta), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(Rows, FragScoreTest,
                         ::testing::Values(ScoreRow{"no_change", 0, 50},
                                           ScoreRow{"small_rise", 30, 49},
                                           ScoreRow{"small_fall", -30, 50},
                                           ScoreRow{"one_gpu_rise", 1000, 26},
                                           ScoreRow{"one_gpu_fall", -1000, 73},
                                           ScoreRow{"huge_fall", -20000, 99}),
                         [](const auto& row) { return std::string(row.param.name); });

TEST(FragMeasureTest, MemoMatchesTheDefinitionWhateverTheGpuOrder) {
  const std::vector<WorkloadClass> w = {
      Share(300, 4), Whole(2, 2), CpuOnly(6), {1, 0, 0, 0, "V100M16|V100M32", 2}};
  FragMeasure m;
  m.Reset(w);
  const std::vector<double> weights = {0.2, 0.2, 0.2, 0.4};
  const std::vector<NodeFree> nodes = {
      Free({1000, 200, 700, 0}, 5), Free({700, 0, 200, 1000}, 5),
      Free({700, 0, 200, 1000}, 1), Free({1000, 1000, 1000, 1000}, 8, 1000, 0b0111),
      Free({1000, 1000, 1000, 1000}, 8, 1000, m.ModelMask("V100M32"))};
  for (int round = 0; round < 2; ++round) {  // the second round hits the memo
    for (const NodeFree& n : nodes) {
      EXPECT_DOUBLE_EQ(m.Frag(n), NodeFragmentation(w, weights, n));
    }
  }
  EXPECT_EQ(m.ModelMask("V100M16"), 0b1111u);
  EXPECT_EQ(m.ModelMask("T4"), 0b0111u);
}

// Two 8-GPU nodes; node 0 runs 3 GPUs' worth, node 1 two: best fit takes node 0 for
// a 2-GPU job, which leaves it 3 free GPUs: no room for the workload's 4-GPU jobs.
ClusterState TwoNodes(std::vector<WorkloadClass> workload) {
  ClusterState s = MakeCluster()
                       .Nodes(2, "hgx-h100")
                       .Partition("shared")
                       .Running(MakeJob(1).Gpus(3), 0)
                       .Running(MakeJob(2).Gpus(2), 1)
                       .Pending(MakeJob(3).Gpus(2))
                       .Build();
  s.workload = std::move(workload);
  return s;
}

Plan Cycle(const ClusterState& s) {
  return (*Scheduler::Create(SchedConfig{}))->Schedule(s, 100);
}

TEST(FragPlacementTest, EmptyWorkloadKeepsBestFit) {
  const Plan plan = Cycle(TwoNodes({}));
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].allocations[0].node, 0);
}

TEST(FragPlacementTest, WorkloadKeepsRoomForItsJobs) {
  const Plan plan = Cycle(TwoNodes({Whole(4)}));
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].allocations[0].node, 1);  // 4 free GPUs stay on node 1
  EXPECT_EQ(plan.starts[0].allocations[0].gpus.size(), 2);
}

// Node 0's GPU 0 holds 500 milli of shares, node 1's GPU 0 holds 700. A 200 share:
// without a workload it packs onto the fullest GPU (node 1). Against a workload of
// 300 shares and 1-GPU jobs, half each: on node 0 the rest drops from 500 to 300, still
// usable by a share and 200 less fragment for 1-GPU jobs (ΔF = -100, score 52); on node
// 1 from 300 to 100, a fragment for shares now (ΔF = 0.5·100 - 0.5·200 = -50, score
// 51); a free GPU would leave 800 that 1-GPU jobs cannot use (ΔF = +400, score 40).
ClusterState Shares(std::vector<WorkloadClass> workload) {
  ClusterState s = MakeCluster()
                       .Nodes(2, "hgx-h100")
                       .Partition("shared")
                       .AllowSharing()
                       .Running(MakeJob(1).Share(500), 0, "0")
                       .Running(MakeJob(2).Share(700), 1, "0")
                       .Pending(MakeJob(3).Share(200))
                       .Build();
  s.workload = std::move(workload);
  return s;
}

TEST(FragPlacementTest, EmptyWorkloadPacksTheFullestSharedGpu) {
  const Plan plan = Cycle(Shares({}));
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].allocations[0].node, 1);
  EXPECT_EQ(plan.starts[0].allocations[0].gpus.ToString(), "0");
}

TEST(FragPlacementTest, ShareGoesWhereItsRestStaysUsable) {
  const Plan plan = Cycle(Shares({Share(300), Whole(1)}));
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].allocations[0].node, 0);
  EXPECT_EQ(plan.starts[0].allocations[0].gpus.ToString(), "0");
  EXPECT_EQ(plan.starts[0].allocations[0].share_milli, 200);
}

TEST(FragPlacementTest, ModelConstraintBeatsFragmentation) {
  // Node 0 (H100) is where fragmentation would put the job; it asks for an A100.
  ClusterState s = MakeCluster()
                       .Nodes(1, "hgx-h100")
                       .Nodes(1, "dgx-a100")
                       .Partition("shared")
                       .Running(MakeJob(1).Gpus(7), 0)
                       .Running(MakeJob(2).Gpus(2), 1)
                       .Pending(MakeJob(3).Gpus(1).Model("H800|A100"))
                       .Build();
  s.workload = {Whole(2)};
  const Plan plan = Cycle(s);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].allocations[0].node, 1);
  s.pending[0].req.gpu_model = "";
  EXPECT_EQ(Cycle(s).starts[0].allocations[0].node,
            0);  // no constraint: the last free GPU
}

TEST(FragPlacementTest, MultiGpuJobGetsAWellConnectedSet) {
  // pcie-8x-4090-nv4-pairs: NVLink pairs only. With one node, fragmentation ties
  // between GPU sets, and alloc/ picks an NVLinked pair.
  ClusterState s = MakeCluster()
                       .Nodes(1, "pcie-8x-4090-nv4-pairs")
                       .Partition("shared")
                       .Pending(MakeJob(1).Gpus(2))
                       .Build();
  s.workload = {Whole(1), Whole(2)};
  const Plan plan = Cycle(s);
  ASSERT_EQ(plan.starts.size(), 1u);
  const GpuSet gpus = plan.starts[0].allocations[0].gpus;
  ClusterState none = s;
  none.workload.clear();
  EXPECT_EQ(gpus, Cycle(none).starts[0].allocations[0].gpus);
}

}  // namespace
}  // namespace hachi::sched
