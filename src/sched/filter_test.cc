// Filter phase: one row per node verdict and per job-level reason; quotas and hard
// isolation through whole cycles.
#include "sched/filter.h"

#include <gtest/gtest.h>

#include <functional>

#include "sched/scheduler.h"
#include "sched/testing.h"

namespace hachi::sched {
namespace {

using testing::ClusterBuilder;
using testing::MakeCluster;
using testing::MakeJob;

constexpr Time kNow = 1000;

// n0: hgx-h100, n1: pcie-8x-l40s. "shared" over both, "gpu8" whole-node over both.
ClusterBuilder Base() {
  return MakeCluster()
      .Nodes(1, "hgx-h100")
      .Nodes(1, "pcie-8x-l40s")
      .Partition("shared")
      .Partition("gpu8", PartitionMode::kWholeNode);
}

struct NodeRow {
  const char* name;
  std::function<void(ClusterBuilder&)> setup;
  testing::JobBuilder job;
  int node;
  NodeVerdict want;
};

class NodeVerdictTest : public ::testing::TestWithParam<NodeRow> {};

TEST_P(NodeVerdictTest, Verdict) {
  ClusterBuilder b = Base();
  GetParam().setup(b);
  b.Pending(GetParam().job);
  const ClusterState s = b.Build();
  alloc::AllocCache cache;
  CycleContext ctx(s, kNow, &cache);
  ctx.Init();
  const JobShape shape = ctx.Shape(s.pending.back());
  Timeline::Offer offer;
  EXPECT_EQ(CheckNode(ctx, shape, GetParam().node, kNow, &offer), GetParam().want);
}

auto Nothing = [](ClusterBuilder&) {};

INSTANTIATE_TEST_SUITE_P(
    Rows, NodeVerdictTest,
    ::testing::Values(
        NodeRow{"fits", Nothing, MakeJob(1).Gpus(4), 0, NodeVerdict::kFits},
        NodeRow{"down", [](ClusterBuilder& b) { b.NodeState(0, NodeState::kDrained); },
                MakeJob(1).Gpus(1), 0, NodeVerdict::kDown},
        NodeRow{"wrong_model", Nothing, MakeJob(1).Gpus(1).Model("L40S"), 0,
                NodeVerdict::kIneligible},
        NodeRow{"right_model", Nothing, MakeJob(1).Gpus(1).Model("l40s"), 1,
                NodeVerdict::kFits},
        NodeRow{"too_little_gpu_memory", Nothing,
                MakeJob(1).Gpus(1).MinGpuMemoryMib(60000), 1, NodeVerdict::kIneligible},
        NodeRow{"not_in_partition",
                [](ClusterBuilder& b) {
                  b.Partition("only_n1", PartitionMode::kShared, {1});
                },
                MakeJob(1).Gpus(1).Partition("only_n1"), 0, NodeVerdict::kIneligible},
        NodeRow{"too_few_free_gpus",
                [](ClusterBuilder& b) { b.Running(MakeJob(9).Gpus(6), 0); },
                MakeJob(1).Gpus(4), 0, NodeVerdict::kGpus},
        NodeRow{"too_few_cpus",
                [](ClusterBuilder& b) { b.Running(MakeJob(9).Gpus(1).Cpus(120), 0); },
                MakeJob(1).Gpus(1).Cpus(16), 0, NodeVerdict::kCpus},
        NodeRow{"too_little_memory",
                [](ClusterBuilder& b) {
                  b.Running(MakeJob(9).Gpus(1).MemoryMib((1 << 20) - 10), 0);
                },
                MakeJob(1).Gpus(1).MemoryMib(100), 0, NodeVerdict::kMemory},
        NodeRow{"shared_job_on_whole_node_job",
                [](ClusterBuilder& b) {
                  b.Running(MakeJob(9).Gpus(8).Partition("gpu8"), 0);
                  b.state().nodes[0].free_gpus = GpuSet::FirstN(2);  // lagging caller
                },
                MakeJob(1).Gpus(1), 0, NodeVerdict::kIsolation},
        NodeRow{"whole_node_job_on_shared_job",
                [](ClusterBuilder& b) { b.Running(MakeJob(9).Gpus(1), 0); },
                MakeJob(1).Gpus(8).Partition("gpu8"), 0, NodeVerdict::kIsolation},
        NodeRow{"whole_node_job_on_free_node", Nothing,
                MakeJob(1).Gpus(8).Partition("gpu8"), 1, NodeVerdict::kFits}),
    [](const auto& row) { return std::string(row.param.name); });

struct JobRow {
  const char* name;
  std::function<void(ClusterBuilder&)> setup;
  testing::JobBuilder job;
  Reason want;
  int used, limit;
};

class JobReasonTest : public ::testing::TestWithParam<JobRow> {};

TEST_P(JobReasonTest, Reason) {
  ClusterBuilder b = Base();
  GetParam().setup(b);
  b.Pending(GetParam().job);
  const ClusterState s = b.Build();
  alloc::AllocCache cache;
  CycleContext ctx(s, kNow, &cache);
  ctx.Init();
  int used = 0, limit = 0;
  EXPECT_EQ(CheckJob(ctx, ctx.Shape(s.pending.back()), &used, &limit), GetParam().want);
  EXPECT_EQ(used, GetParam().used);
  EXPECT_EQ(limit, GetParam().limit);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, JobReasonTest,
    ::testing::Values(
        JobRow{"passes", Nothing, MakeJob(1).Gpus(1), Reason::kNone, 0, 0},
        JobRow{"held", Nothing, MakeJob(1).Gpus(1).Held(), Reason::kHeld, 0, 0},
        JobRow{"dependency_waiting", Nothing,
               MakeJob(1).Gpus(1).Deps(DependencyState::kWaiting), Reason::kDependency, 0,
               0},
        JobRow{"dependency_never_met", Nothing,
               MakeJob(1).Gpus(1).Deps(DependencyState::kNeverMet),
               Reason::kDependencyNeverMet, 0, 0},
        JobRow{"user_at_quota",
               [](ClusterBuilder& b) {
                 b.UserQuota("ann", 4).Running(MakeJob(9).Gpus(3).User("ann"), 0);
               },
               MakeJob(1).Gpus(2).User("ann"), Reason::kUserQuota, 3, 4},
        JobRow{"user_just_under_quota",
               [](ClusterBuilder& b) {
                 b.UserQuota("ann", 4).Running(MakeJob(9).Gpus(3).User("ann"), 0);
               },
               MakeJob(1).Gpus(1).User("ann"), Reason::kNone, 3, 4},
        JobRow{"account_at_quota",
               [](ClusterBuilder& b) {
                 b.AccountQuota("ml-infra", 8)
                     .Running(MakeJob(9).Gpus(8).Account("ml-infra"), 1);
               },
               MakeJob(1).Gpus(1).Account("ml-infra"), Reason::kAccountQuota, 8, 8}),
    [](const auto& row) { return std::string(row.param.name); });

Plan Cycle(const ClusterState& s, const char* policy = "hachi") {
  SchedConfig c;
  c.policy = policy;
  return (*Scheduler::Create(c))->Schedule(s, kNow);
}

TEST(QuotaTest, CountsStartsOfThisCycle) {
  const ClusterState s = Base()
                             .UserQuota("ann", 3)
                             .Pending(MakeJob(1).Gpus(2).User("ann").Submit(1))
                             .Pending(MakeJob(2).Gpus(2).User("ann").Submit(2))
                             .Pending(MakeJob(3).Gpus(1).User("ann").Submit(3))
                             .Build();
  const Plan plan = Cycle(s, "easy");
  ASSERT_EQ(plan.starts.size(), 2u);
  EXPECT_EQ(plan.starts[0].job, 1);
  EXPECT_EQ(plan.starts[1].job, 3);
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].reason, Reason::kUserQuota);
  EXPECT_EQ(plan.pending[0].quota_used, 2);
}

TEST(IsolationTest, WholeNodeReservationKeepsSharedJobsOff) {
  // n0 runs a 1-GPU shared job for 1 h; n1 runs 4 GPUs for 1 h. The whole-node job
  // reserves the node that frees first (n0); a shared 1-GPU job may not go there even
  // though it would end in time, so it goes to n1.
  const ClusterState s = Base()
                             .Running(MakeJob(8).Gpus(1).Limit(kHour).Start(0), 0)
                             .Running(MakeJob(9).Gpus(4).Limit(2 * kHour).Start(0), 1)
                             .Pending(MakeJob(1).Gpus(8).Partition("gpu8").Submit(1))
                             .Pending(MakeJob(2).Gpus(1).Limit(60).Submit(2))
                             .Build();
  const Plan plan = Cycle(s, "easy");
  ASSERT_EQ(plan.reservations.size(), 1u);
  EXPECT_EQ(plan.reservations[0].allocations[0].node, 0);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].allocations[0].node, 1);
}

TEST(IsolationTest, SharedJobWaitsWithIsolationReason) {
  ClusterBuilder b = MakeCluster()
                         .Nodes(1, "hgx-h100")
                         .Partition("shared")
                         .Partition("gpu8", PartitionMode::kWholeNode)
                         .Running(MakeJob(9).Gpus(8).Partition("gpu8"), 0);
  b.state().nodes[0].free_gpus = GpuSet::FirstN(1);  // the caller says one is free
  const Plan plan = Cycle(b.Pending(MakeJob(1).Gpus(1)).Build());
  EXPECT_TRUE(plan.starts.empty());
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].reason, Reason::kIsolation);
}

}  // namespace
}  // namespace hachi::sched
