// Order phase: submit order, the multifactor priority's factors, and the memo.
#include "sched/priority.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "sched/testing.h"

namespace hachi::sched {
namespace {

using testing::ClusterBuilder;
using testing::MakeCluster;
using testing::MakeJob;

std::vector<JobId> Ids(const ClusterState& s, const std::vector<int>& order) {
  std::vector<JobId> ids;
  for (int i : order) ids.push_back(s.pending[i].id);
  return ids;
}

ClusterBuilder Base() {
  return MakeCluster()
      .Nodes(1, "hgx-h100")
      .Partition("low")
      .Partition("high")
      .Tier(1)
      .Qos("urgent", 1000);
}

TEST(PriorityTest, SubmitOrderThenId) {
  const ClusterState s = Base()
                             .Pending(MakeJob(3).Gpus(1).Submit(5))
                             .Pending(MakeJob(1).Gpus(8).Submit(9))
                             .Pending(MakeJob(2).Gpus(1).Submit(5))
                             .Build();
  QueueOrder q(OrderKind::kSubmit, 300);
  EXPECT_EQ(Ids(s, q.Order(s, 100)), (std::vector<JobId>{2, 3, 1}));
}

struct Row {
  const char* name;
  testing::JobBuilder first, second;  // `first` must come first
};

class MultifactorTest : public ::testing::TestWithParam<Row> {};

TEST_P(MultifactorTest, Orders) {
  // Listed second-first, so only the priority can put `first` ahead.
  const ClusterState s = Base()
                             .Share("big", 3, 10)
                             .Share("heavy", 1, 90)
                             .Pending(GetParam().second)
                             .Pending(GetParam().first)
                             .Build();
  QueueOrder q(OrderKind::kMultifactor, 300);
  const auto ids = Ids(s, q.Order(s, 3 * kDay));
  EXPECT_EQ(ids.front(), GetParam().first.job().id);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, MultifactorTest,
    ::testing::Values(
        Row{"tier_beats_everything",
            MakeJob(1).Gpus(1).Partition("high").Account("heavy").Submit(3 * kDay),
            MakeJob(2).Gpus(8).Partition("low").Account("big").Submit(0).Qos("urgent")},
        Row{"fair_share_prefers_light_users",
            MakeJob(1).Gpus(1).Account("big").Submit(10),
            MakeJob(2).Gpus(1).Account("heavy").Submit(0)},
        Row{"qos", MakeJob(1).Gpus(1).Account("big").Qos("urgent").Submit(10),
            MakeJob(2).Gpus(1).Account("big").Submit(0)},
        Row{"age", MakeJob(1).Gpus(1).Account("big").Submit(0),
            MakeJob(2).Gpus(1).Account("big").Submit(2 * kDay)},
        Row{"size", MakeJob(1).Gpus(8).Account("big").Submit(10),
            MakeJob(2).Gpus(1).Account("big").Submit(10)},
        Row{"ties_by_submit_then_id", MakeJob(1).Gpus(1).Account("big").Submit(10),
            MakeJob(2).Gpus(1).Account("big").Submit(10)}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(PriorityTest, AgeUsesThePeriodSoTheOrderHoldsWithinIt) {
  // Same priority at 600 and 899 (period 300: both round to 600 and ... 600).
  const ClusterState s = Base().Pending(MakeJob(1).Gpus(1).Submit(0)).Build();
  const double a = JobPriority(s, s.pending[0], 600, 1, 8);
  QueueOrder q(OrderKind::kMultifactor, 300);
  q.Order(s, 899);
  EXPECT_DOUBLE_EQ(q.priorities()[0], a);
  q.Order(s, 900);
  EXPECT_GT(q.priorities()[0], a);
}

TEST(PriorityTest, MemoFollowsArrivalsAndDepartures) {
  ClusterBuilder b = Base().Share("x", 1, 0);
  for (int i = 0; i < 40; ++i) {
    b.Pending(MakeJob(i + 1).Gpus(1 << (i % 4)).Account("x").Submit(i * 37 % 500));
  }
  ClusterState s = b.Build();
  QueueOrder memo(OrderKind::kMultifactor, 300);
  memo.Order(s, 1000);
  // Drop every third job, append three new ones, as a server would.
  std::vector<Job> next;
  for (size_t i = 0; i < s.pending.size(); ++i) {
    if (i % 3 != 0) next.push_back(s.pending[i]);
  }
  for (int i = 0; i < 3; ++i) {
    next.push_back(testing::MakeJob(100 + i).Gpus(2).Account("x").Submit(600).job());
    next.back().partition = 0;
  }
  s.pending = next;
  const auto memo_ids = Ids(s, memo.Order(s, 1100));
  QueueOrder fresh(OrderKind::kMultifactor, 300);
  EXPECT_EQ(memo_ids, Ids(s, fresh.Order(s, 1100)));
  EXPECT_EQ(memo.priorities(), fresh.priorities());
  // min_gpus_from: the fewest GPUs at or after each position.
  const auto& m = memo.min_gpus_from();
  EXPECT_EQ(m.back(), 1 << 30);
  EXPECT_EQ(m.front(), 1);
}

}  // namespace
}  // namespace hachi::sched
