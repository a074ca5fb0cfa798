// The harness: build a snapshot, run one cycle, assert on the plan and diagnoses
// (STYLE.md: Nomad scheduler/tests/testing.go).
#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include "sched/testing.h"

namespace hachi::sched {
namespace {

using testing::MakeCluster;
using testing::MakeJob;

Plan RunCycle(const std::string& policy, const ClusterState& s, Time now = 1000) {
  SchedConfig c;
  c.policy = policy;
  auto sched = Scheduler::Create(c);
  EXPECT_TRUE(sched.ok()) << sched.status().ToString();
  return (*sched)->Schedule(s, now);
}

TEST(SchedulerTest, RegistryNamesHachiFirst) {
  auto names = PolicyNames();
  ASSERT_EQ(names.size(), 3u);
  EXPECT_EQ(names[0], "hachi");
  SchedConfig c;
  c.policy = "nope";
  auto s = Scheduler::Create(c);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("fifo"), std::string::npos);
}

TEST(SchedulerTest, FifoStartsInSubmitOrderAndStopsAtFirstMisfit) {
  auto s = MakeCluster()
               .Nodes(1, "hgx-h100")
               .Partition("p")
               .Pending(MakeJob(1).Gpus(4).Submit(1))
               .Pending(MakeJob(2).Gpus(8).Submit(2))
               .Pending(MakeJob(3).Gpus(1).Submit(3))
               .Build();
  Plan plan = RunCycle("fifo", s);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].job, 1);
  EXPECT_EQ(plan.starts[0].allocations[0].gpus, GpuSet::FirstN(4));
  ASSERT_EQ(plan.pending.size(), 2u);
  EXPECT_EQ(plan.pending[0].job, 2);
  EXPECT_EQ(plan.pending[0].reason, Reason::kResources);
  EXPECT_EQ(plan.pending[1].job, 3);
  EXPECT_EQ(plan.pending[1].reason, Reason::kPriority);
}

TEST(SchedulerTest, EasyBackfillsAShortJob) {
  auto s = MakeCluster()
               .Nodes(1, "hgx-h100")
               .Partition("p")
               .Running(MakeJob(9).Gpus(4).Start(0).Limit(2 * kHour), 0)
               .Pending(MakeJob(1).Gpus(8).Submit(1).Limit(kHour))
               .Pending(MakeJob(2).Gpus(2).Submit(2).Limit(kHour))
               .Pending(MakeJob(3).Gpus(2).Submit(3).Limit(3 * kHour))
               .Build();
  Plan plan = RunCycle("easy", s, 1000);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].job, 2);
  EXPECT_TRUE(plan.starts[0].backfilled);
  ASSERT_EQ(plan.reservations.size(), 1u);
  EXPECT_EQ(plan.reservations[0].job, 1);
  EXPECT_EQ(plan.reservations[0].start, 2 * kHour);
}

}  // namespace
}  // namespace hachi::sched
