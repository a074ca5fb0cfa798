// Score and select: which node(s) and GPUs a job gets, one row per rule.
#include "sched/placement.h"

#include <gtest/gtest.h>

#include <functional>

#include "sched/fragmentation.h"
#include "sched/scheduler.h"
#include "sched/testing.h"

namespace hachi::sched {
namespace {

using testing::ClusterBuilder;
using testing::MakeCluster;
using testing::MakeJob;

struct Share {
  int node;
  const char* gpus;  // GpuSet::ToString() form
};

struct Row {
  const char* name;
  const char* policy;
  std::function<ClusterBuilder()> cluster;
  testing::JobBuilder job;
  std::vector<Share> want;  // empty: the job does not start
};

class PlacementTest : public ::testing::TestWithParam<Row> {};

TEST_P(PlacementTest, Chooses) {
  const ClusterState s = GetParam().cluster().Pending(GetParam().job).Build();
  SchedConfig c;
  c.policy = GetParam().policy;
  const Plan plan = (*Scheduler::Create(c))->Schedule(s, 1000);
  if (GetParam().want.empty()) {
    EXPECT_TRUE(plan.starts.empty());
    return;
  }
  ASSERT_EQ(plan.starts.size(), 1u);
  const auto& allocs = plan.starts[0].allocations;
  ASSERT_EQ(allocs.size(), GetParam().want.size());
  for (size_t i = 0; i < allocs.size(); ++i) {
    EXPECT_EQ(allocs[i].node, GetParam().want[i].node) << "share " << i;
    EXPECT_EQ(allocs[i].gpus.ToString(), GetParam().want[i].gpus) << "share " << i;
  }
}

// n0 busy on GPUs 0-2, n1 idle, n2 busy on 0-5.
ClusterBuilder ThreeH100() {
  return MakeCluster()
      .Nodes(3, "hgx-h100")
      .Partition("p")
      .Running(MakeJob(90).Gpus(3), 0)
      .Running(MakeJob(91).Gpus(6), 2);
}

// Two 4090 boxes (NVLink pairs 0-1, 2-3, ...): n0 has GPU 0 busy, n1 is idle.
ClusterBuilder Pairs() {
  return MakeCluster()
      .Nodes(2, "pcie-8x-4090-nv4-pairs")
      .Partition("p")
      .Running(MakeJob(90).Gpus(1), 0, "0");
}

// n0, n1 hgx-h100 (NVSwitch); n2, n3 pcie-8x-l40s (PCIe only), all idle.
ClusterBuilder Mixed() {
  return MakeCluster().Nodes(2, "hgx-h100").Nodes(2, "pcie-8x-l40s").Partition("p");
}

// Block a: n0 idle, n1 half busy. Block b: n2, n3 idle, n4 busy on one GPU.
ClusterBuilder Blocks() {
  return MakeCluster()
      .Nodes(2, "hgx-h100", "a")
      .Nodes(3, "hgx-h100", "b")
      .Partition("p")
      .Running(MakeJob(90).Gpus(4), 1)
      .Running(MakeJob(91).Gpus(1), 4);
}

// GPU shares. Partition p shares, nos does not. n0: GPU 0 holds 700 milli / 40000 MiB,
// GPU 1 holds 300 / 0, GPUs 2-7 free. n1: GPU 2 holds 600 / 30000, 3-7 run a
// whole-GPU job, 0-1 free (the busier node).
ClusterBuilder Shared() {
  return MakeCluster()
      .Nodes(2, "hgx-h100")
      .Partition("p")
      .AllowSharing()
      .Partition("nos")
      .Running(MakeJob(90).Share(700, 40000), 0, "0")
      .Running(MakeJob(91).Share(300), 0, "1")
      .Running(MakeJob(92).Share(600, 30000), 1, "2")
      .Running(MakeJob(93).Gpus(5), 1, "3-7");
}

INSTANTIATE_TEST_SUITE_P(
    Shares, PlacementTest,
    ::testing::Values(Row{"share_packs_onto_fullest_gpu_that_fits",
                          "hachi",
                          Shared,
                          MakeJob(1).Share(300),
                          {{0, "0"}}},
                      Row{"share_skips_gpu_without_room",
                          "hachi",
                          Shared,
                          MakeJob(1).Share(400),
                          {{1, "2"}}},
                      Row{"share_respects_gpu_memory",
                          "hachi",
                          Shared,
                          MakeJob(1).Share(100, 60000),
                          {{0, "1"}}},
                      Row{"share_packs_under_first_fit_too",
                          "fifo",
                          Shared,
                          MakeJob(1).Share(300),
                          {{0, "0"}}},
                      Row{"share_takes_a_free_gpu_when_none_has_room",
                          "fifo",
                          Shared,
                          MakeJob(1).Share(800),
                          {{0, "2"}}},
                      Row{"whole_gpu_job_never_on_a_shared_gpu",
                          "fifo",
                          Shared,
                          MakeJob(1).Gpus(1),
                          {{0, "2"}}},
                      Row{"whole_gpu_job_best_fit_skips_shared_gpu",
                          "hachi",
                          Shared,
                          MakeJob(1).Gpus(2),
                          {{1, "0,1"}}},
                      // One user per GPU (MPS): another user's share skips the
                      // shared GPUs with room for a free one.
                      Row{"share_skips_gpus_of_another_user",
                          "hachi",
                          Shared,
                          MakeJob(1).Share(300).User("bob"),
                          {{1, "0"}}},
                      Row{"share_skips_gpus_of_another_user_first_fit",
                          "fifo",
                          Shared,
                          MakeJob(1).Share(300).User("bob"),
                          {{0, "2"}}},
                      Row{"share_never_in_partition_without_sharing",
                          "hachi",
                          Shared,
                          MakeJob(1).Share(100).Partition("nos"),
                          {}}),
    [](const auto& row) { return std::string(row.param.name); });

INSTANTIATE_TEST_SUITE_P(
    Rows, PlacementTest,
    ::testing::Values(
        Row{"hachi_packs_onto_busiest_node_that_fits",
            "hachi",
            ThreeH100,
            MakeJob(1).Gpus(2),
            {{2, "6,7"}}},
        Row{"hachi_keeps_idle_node_whole",
            "hachi",
            ThreeH100,
            MakeJob(1).Gpus(5),
            {{0, "3-7"}}},
        Row{"hachi_takes_idle_node_when_nothing_else_fits",
            "hachi",
            ThreeH100,
            MakeJob(1).Gpus(6),
            {{1, "0-5"}}},
        Row{"fifo_first_fit_lowest_node_lowest_gpus",
            "fifo",
            ThreeH100,
            MakeJob(1).Gpus(2),
            {{0, "3,4"}}},
        Row{"easy_first_fit_skips_nodes_too_full",
            "easy",
            ThreeH100,
            MakeJob(1).Gpus(6),
            {{1, "0-5"}}},
        Row{"hachi_one_gpu_keeps_nvlink_pairs",
            "hachi",
            Pairs,
            MakeJob(1).Gpus(1),
            {{0, "1"}}},
        Row{"hachi_two_gpus_take_an_intact_pair",
            "hachi",
            Pairs,
            MakeJob(1).Gpus(2),
            {{0, "2,3"}}},
        Row{"fifo_two_gpus_break_pairs", "fifo", Pairs, MakeJob(1).Gpus(2), {{0, "1,2"}}},
        Row{"gang_never_mixes_classes", "hachi", Mixed, MakeJob(1).Gang(3, 8), {}},
        Row{"gang_stays_in_one_class",
            "hachi",
            Mixed,
            MakeJob(1).Gang(2, 8),
            {{0, "0-7"}, {1, "0-7"}}},
        Row{"gang_prefers_one_block",
            "hachi",
            Blocks,
            MakeJob(1).Gang(2, 8),
            {{2, "0-7"}, {3, "0-7"}}},
        Row{"gang_best_fit_block",
            "hachi",
            Blocks,
            MakeJob(1).Gang(2, 4),
            {{0, "0-3"}, {1, "4-7"}}},
        Row{"gang_spreads_when_no_block_holds_it",
            "hachi",
            Blocks,
            MakeJob(1).Gang(3, 8),
            {{0, "0-7"}, {2, "0-7"}, {3, "0-7"}}},
        Row{"fifo_gang_lowest_nodes",
            "fifo",
            Blocks,
            MakeJob(1).Gang(2, 8),
            {{0, "0-7"}, {2, "0-7"}}}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(PlacementTest, WholeNodeJobGetsEveryGpu) {
  const ClusterState s = MakeCluster()
                             .Nodes(2, "hgx-h100")
                             .Partition("gpu8", PartitionMode::kWholeNode)
                             .Pending(MakeJob(1).Gpus(3))
                             .Build();
  ASSERT_EQ(s.pending[0].req.GpusPerNode(), 8);  // rounded up at validation
  const Plan plan = (*Scheduler::Create({}))->Schedule(s, 0);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].allocations[0].gpus, GpuSet::FirstN(8));
}

TEST(PlacementTest, BottleneckOfSets) {
  const auto model = testing::PresetModel("pcie-8x-4090-nv4-pairs");
  EXPECT_EQ(Bottleneck(*model, GpuSet::FromIndices({3})), alloc::ScoreParts::kNoPair);
  EXPECT_GT(Bottleneck(*model, GpuSet::FromIndices({0, 1})),
            Bottleneck(*model, GpuSet::FromIndices({1, 2})));
}

// Best fit whose allocator always fails (as a bug in alloc/ would): the placement
// must fail visibly, never fall back to some other GPUs.
class FailingAllocator final : public Scorer {
 public:
  FailingAllocator() : real_(MakeScorer(PlacementStyle::kBestFit)) {}
  Result<GpuSet> ChooseGpus(CycleContext&, const JobShape&, const Node&,
                            GpuSet) override {
    return Internal("injected failure");
  }
  bool ByFragmentation(const CycleContext& c, const JobShape& j) const override {
    return real_->ByFragmentation(c, j);
  }
  bool Visits(const Best& b, int node) const override { return real_->Visits(b, node); }
  bool Offer(CycleContext& c, const JobShape& j, int node, GpuSet g, Best* b) override {
    return real_->Offer(c, j, node, g, b);
  }
  bool Settled(const Best& b) const override { return real_->Settled(b); }
  std::vector<int> SelectGang(const CycleContext& c, const JobShape& j,
                              const std::vector<int>& cands,
                              const std::vector<int>& counts) const override {
    return real_->SelectGang(c, j, cands, counts);
  }

 private:
  std::unique_ptr<Scorer> real_;
};

struct AllocFailRow {
  const char* name;
  testing::JobBuilder job;
  bool workload;  // fragmentation-aware placement (ClusterState::workload)
};

class AllocatorFailureTest : public ::testing::TestWithParam<AllocFailRow> {};

TEST_P(AllocatorFailureTest, IsAnInternalErrorNotAFallback) {
  ClusterState s = MakeCluster()
                       .Nodes(2, "hgx-h100")
                       .Partition("gpu")
                       .AllowSharing()
                       .Pending(GetParam().job)
                       .Build();
  if (GetParam().workload) s.workload = {WorkloadClass{2, 0, 0, 0, "", 1}};
  alloc::AllocCache cache;
  FragMeasure frag;
  CycleContext ctx(s, 0, &cache);
  if (GetParam().workload) {
    frag.Reset(s.workload);
    ctx.frag = &frag;
  }
  ctx.Init();
  const JobShape shape = ctx.Shape(s.pending[0]);
  std::vector<Allocation> out;
  VerdictTally tally;
  // The real best fit places the job here...
  Placer real(PlacementStyle::kBestFit);
  ASSERT_TRUE(real.PlaceNow(ctx, shape, &out, &tally));
  EXPECT_FALSE(real.failed());
  EXPECT_TRUE(real.TakeErrors().empty());
  // ...a failing allocator leaves it unplaced and says why.
  Placer failing(std::make_unique<FailingAllocator>());
  EXPECT_FALSE(failing.PlaceNow(ctx, shape, &out, &tally));
  EXPECT_TRUE(failing.failed());
  EXPECT_TRUE(out.empty());
  const std::vector<std::string> errors = failing.TakeErrors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("job 1 on node n0: allocator: injected failure"),
            std::string::npos)
      << errors[0];
  EXPECT_TRUE(failing.TakeErrors().empty());  // taken
}

INSTANTIATE_TEST_SUITE_P(
    Rows, AllocatorFailureTest,
    ::testing::Values(AllocFailRow{"single_node", MakeJob(1).Gpus(2), false},
                      AllocFailRow{"by_fragmentation", MakeJob(1).Gpus(2), true},
                      AllocFailRow{"gang", MakeJob(1).Gang(2, 4), false}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(Diagnosis, InternalSaysSo) {
  Diagnosis d;
  d.job = 1;
  d.reason = Reason::kInternal;
  EXPECT_EQ(ReasonName(Reason::kInternal), "Internal");
  EXPECT_EQ(d.Format(ClusterState{}, 0).rfind("internal: allocator", 0), 0u);
}

}  // namespace
}  // namespace hachi::sched
