// Diagnoses: the text of each reason (Diagnosis::Format) and the numbers a cycle
// fills in.
#include "sched/diagnose.h"

#include <gtest/gtest.h>

#include "sched/scheduler.h"
#include "sched/testing.h"

namespace hachi::sched {
namespace {

using testing::MakeCluster;
using testing::MakeJob;

constexpr Time kNow = 13 * kHour;  // 13:00 on day 0

ClusterState FourNodes() {
  return MakeCluster()
      .Nodes(4, "hgx-h100")
      .Partition("p")
      .Pending(MakeJob(7).Gpus(8).User("ann").Account("ml-infra"))
      .Build();
}

struct Row {
  const char* name;
  Diagnosis d;
  const char* want;
};

Diagnosis D(Reason r) {
  Diagnosis d;
  d.job = 7;
  d.reason = r;
  d.needed_gpus = 8;
  return d;
}

template <typename F>
Diagnosis With(Reason r, F f) {
  Diagnosis d = D(r);
  f(d);
  return d;
}

class FormatTest : public ::testing::TestWithParam<Row> {};

TEST_P(FormatTest, Text) {
  EXPECT_EQ(GetParam().d.Format(FourNodes(), kNow), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, FormatTest,
    ::testing::Values(
        Row{"resources_with_earliest_start",
            With(Reason::kResources,
                 [](Diagnosis& d) {
                   d.largest_free = 5;
                   d.largest_free_node = 3;
                   d.earliest_start = 14 * kHour + 20 * kMinute;
                   d.earliest_node = 1;
                   d.blocking_job = 812;
                 }),
            "needs 8 GPUs on one node; largest free set is 5 (node n3); earliest start "
            "14:20 on n1 when job 812 hits its time limit"},
        Row{"resources_tomorrow",
            With(Reason::kResources,
                 [](Diagnosis& d) {
                   d.largest_free_node = 0;
                   d.largest_free = 2;
                   d.earliest_start = kDay + 9 * kHour;
                   d.earliest_node = 2;
                 }),
            "needs 8 GPUs on one node; largest free set is 2 (node n0); earliest start "
            "09:00 (+1d) on n2"},
        Row{"nothing_free", D(Reason::kResources),
            "needs 8 GPUs on one node; no GPU is free"},
        Row{"fragmented",
            With(Reason::kFragmented,
                 [](Diagnosis& d) {
                   d.largest_free = 4;
                   d.largest_free_node = 2;
                   d.free_gpus = 12;
                 }),
            "needs 8 GPUs on one node; largest free set is 4 (node n2), 12 free in all"},
        Row{"gang", With(Reason::kResources, [](Diagnosis& d) { d.needed_nodes = 4; }),
            "needs 4 nodes with 8 GPUs each; no GPU is free"},
        Row{"account_quota",
            With(Reason::kAccountQuota,
                 [](Diagnosis& d) {
                   d.quota_used = 32;
                   d.quota_limit = 32;
                 }),
            "account ml-infra at quota: 32/32 GPUs"},
        Row{"user_quota",
            With(Reason::kUserQuota,
                 [](Diagnosis& d) {
                   d.quota_used = 6;
                   d.quota_limit = 8;
                 }),
            "user ann at quota: 6/8 GPUs"},
        Row{"priority",
            With(Reason::kPriority, [](Diagnosis& d) { d.queue_position = 12; }),
            "waiting behind higher-priority jobs (position 12)"},
        Row{"held", D(Reason::kHeld), "held"},
        Row{"dependency", D(Reason::kDependency), "waiting for a job it depends on"},
        Row{"dependency_never_met", D(Reason::kDependencyNeverMet),
            "a job it depends on failed; it can never run"},
        Row{"isolation", D(Reason::kIsolation),
            "needs 8 GPUs on one node; the free GPUs are on nodes held by whole-node "
            "jobs"},
        Row{"reserved", D(Reason::kReservedForOther),
            "needs 8 GPUs on one node; the fitting GPUs are reserved for jobs ahead"},
        Row{"nodes_unavailable", D(Reason::kNodesUnavailable),
            "needs 8 GPUs on one node; every fitting node is down or drained"}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(DiagnoseTest, CycleFillsNumbersForTheText) {
  // n0-n2 busy (n3 partly: 5 free); job 812 holds n1 until 14:20.
  const ClusterState s =
      MakeCluster()
          .Nodes(4, "hgx-h100")
          .Partition("p")
          .Running(MakeJob(810).Gpus(8).Start(0).Limit(20 * kHour), 0)
          .Running(MakeJob(812).Gpus(8).Start(kNow - kHour).Limit(kHour + 80 * kMinute),
                   1)
          .Running(MakeJob(813).Gpus(8).Start(0).Limit(20 * kHour), 2)
          .Running(MakeJob(814).Gpus(3).Start(0).Limit(20 * kHour), 3)
          .Pending(MakeJob(7).Gpus(8).Submit(1))
          .Build();
  const Plan plan = (*Scheduler::Create({}))->Schedule(s, kNow);
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].Format(s, kNow),
            "needs 8 GPUs on one node; largest free set is 5 (node n3); earliest start "
            "14:20 on n1 when job 812 hits its time limit");
  EXPECT_EQ(ReasonName(plan.pending[0].reason), "Resources");
}

TEST(DiagnoseTest, FragmentedWhenEnoughGpusAreFreeApart) {
  const ClusterState s = MakeCluster()
                             .Nodes(2, "hgx-h100")
                             .Partition("p")
                             .Running(MakeJob(90).Gpus(4), 0)
                             .Running(MakeJob(91).Gpus(4), 1)
                             .Pending(MakeJob(7).Gpus(8))
                             .Build();
  const Plan plan = (*Scheduler::Create({}))->Schedule(s, kNow);
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].reason, Reason::kFragmented);
  EXPECT_EQ(plan.pending[0].free_gpus, 8);
}

TEST(DiagnoseTest, DrainedPartition) {
  const ClusterState s = MakeCluster()
                             .Nodes(1, "hgx-h100")
                             .NodeState(0, NodeState::kDown)
                             .Partition("p")
                             .Pending(MakeJob(7).Gpus(1))
                             .Build();
  const Plan plan = (*Scheduler::Create({}))->Schedule(s, kNow);
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].reason, Reason::kNodesUnavailable);
  EXPECT_TRUE(plan.reservations.empty());
}

// GPU shares, one user per GPU (gpu_share.h): alice's shares fill every GPU of n0 to
// half (n1's GPUs run a whole-GPU job until 15:00), so bob's share waits, and says why
// with the count, under every policy and with fragmentation-aware placement; alice's
// own share packs beside hers.
TEST(DiagnoseTest, ShareWaitsForGpusHoldingOtherUsersShares) {
  testing::ClusterBuilder b =
      MakeCluster().Nodes(2, "hgx-h100").Partition("p").AllowSharing();
  for (int g = 0; g < 8; ++g) {
    b.Running(MakeJob(80 + g).Share(500).User("alice"), 0, std::to_string(g));
  }
  b.Running(MakeJob(90).Gpus(8).User("carol").Start(kNow - kHour).Limit(3 * kHour), 1);
  b.Pending(MakeJob(7).Share(250).User("bob").Submit(1));
  b.Pending(MakeJob(8).Share(250).User("alice").Submit(2));
  ClusterState s = b.Build();
  for (bool workload : {false, true}) {
    s.workload.clear();
    if (workload) s.workload = {{1, 250, 0, 0, "", 1}};
    for (const char* policy : {"hachi", "easy"}) {
      SchedConfig c;
      c.policy = policy;
      const Plan plan = (*Scheduler::Create(c))->Schedule(s, kNow);
      SCOPED_TRACE(std::string(policy) + (workload ? " with a workload" : ""));
      ASSERT_EQ(plan.starts.size(), 1u);
      EXPECT_EQ(plan.starts[0].job, 8);
      ASSERT_EQ(plan.pending.size(), 1u);
      const Diagnosis& d = plan.pending[0];
      EXPECT_EQ(d.reason, Reason::kMpsOtherUser);
      EXPECT_EQ(ReasonName(d.reason), "MpsOtherUser");
      EXPECT_EQ(d.other_user_gpus, 8);
      EXPECT_EQ(d.Format(s, kNow),
                "needs a 0.25 share of one GPU; 8 shared GPUs with room hold other "
                "users' shares (MPS serves one user per GPU); earliest start 15:00 on n1 "
                "when job 90 hits its time limit");
    }
  }
}

TEST(DiagnoseTest, OneGpuOfAnotherUserInTheText) {
  const ClusterState s = MakeCluster()
                             .Nodes(1, "hgx-h100")
                             .Partition("p")
                             .AllowSharing()
                             .Pending(MakeJob(7).Share(100).User("bob"))
                             .Build();
  Diagnosis d = D(Reason::kMpsOtherUser);
  d.needed_gpus = 1;
  d.other_user_gpus = 1;
  EXPECT_EQ(d.Format(s, kNow),
            "needs a 0.1 share of one GPU; 1 shared GPU with room holds another user's "
            "shares (MPS serves one user per GPU)");
}

}  // namespace
}  // namespace hachi::sched
