// --begin, --deadline, --nice and afternotok with a fixed clock: the cycle's
// `now` is the fake clock.
#include <gtest/gtest.h>

#include "sched/dependencies.h"
#include "sched/priority.h"
#include "sched/scheduler.h"
#include "sched/testing.h"

namespace hachi::sched {
namespace {

using testing::MakeCluster;
using testing::MakeJob;

Plan RunCycle(const ClusterState& s, Time now, const std::string& policy = "hachi") {
  SchedConfig c;
  c.policy = policy;
  auto sched = Scheduler::Create(c);
  EXPECT_TRUE(sched.ok());
  return (*sched)->Schedule(s, now);
}

constexpr Time kDay0 = 10 * kDay;  // midnight UTC, day 10

TEST(BeginTimeTest, PendingUntilThenWithReasonAndWake) {
  const ClusterState s = MakeCluster()
                             .Nodes(1, "hgx-h100")
                             .Partition("p")
                             .Pending(MakeJob(1).Gpus(1).Begin(kDay0 + 16 * kHour))
                             .Pending(MakeJob(2).Gpus(1).Submit(1))
                             .Build();
  for (const char* policy : {"hachi", "fifo"}) {
    Plan plan = RunCycle(s, kDay0 + 15 * kHour, policy);
    ASSERT_EQ(plan.starts.size(), 1u) << policy;  // a begin time blocks no one (fifo)
    EXPECT_EQ(plan.starts[0].job, 2);
    ASSERT_EQ(plan.pending.size(), 1u);
    EXPECT_EQ(plan.pending[0].reason, Reason::kBeginTime);
    EXPECT_EQ(ReasonName(plan.pending[0].reason), "BeginTime");
    EXPECT_EQ(plan.pending[0].Format(s, kDay0 + 15 * kHour),
              "not before 16:00 (--begin)");
    EXPECT_LE(plan.wake_at, kDay0 + 16 * kHour);
    EXPECT_TRUE(plan.reservations.empty());
  }
  Plan plan = RunCycle(s, kDay0 + 16 * kHour);
  EXPECT_EQ(plan.starts.size(), 2u);
}

TEST(DeadlineTest, NotStartedWhenItCannotEndInTime) {
  const Time now = kDay0 + 9 * kHour;
  auto job = [&](Time deadline) {
    return MakeCluster()
        .Nodes(1, "hgx-h100")
        .Partition("p")
        .Pending(MakeJob(1).Gpus(1).Limit(2 * kHour).Deadline(deadline))
        .Build();
  };
  EXPECT_EQ(RunCycle(job(now + 2 * kHour), now).starts.size(), 1u);  // just in time
  const ClusterState late = job(now + 2 * kHour - 1);
  const Plan plan = RunCycle(late, now);
  EXPECT_TRUE(plan.starts.empty());
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].reason, Reason::kDeadline);
  EXPECT_NE(plan.pending[0].Format(late, now).find("--deadline"), std::string::npos);
}

TEST(NiceTest, LowersPriority) {
  ClusterState s = MakeCluster()
                       .Nodes(1, "hgx-h100")
                       .Partition("p")
                       .Pending(MakeJob(1).Gpus(8).Submit(0).Nice(500))
                       .Pending(MakeJob(2).Gpus(8).Submit(10))
                       .Build();
  const double p1 = JobPriority(s, s.pending[0], 100, 0, 8);
  const double p2 = JobPriority(s, s.pending[1], 100, 0, 8);
  EXPECT_NEAR(p2 - p1, 500, 1);  // the older job loses its age lead and 500 more
  Plan plan = RunCycle(s, 100);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].job, 2);
  s.pending[0].req.nice = 0;  // without it, the older job goes first
  plan = RunCycle(s, 100);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].job, 1);
}

TEST(AfterNotOkTest, RunsOnlyAfterAFailure) {
  const std::vector<Dependency> deps = {{DependencyKind::kAfterNotOk, 5}};
  auto with = [&](JobOutcome o) {
    return EvaluateDependencies(deps, [&](JobId) { return o; }).state;
  };
  EXPECT_EQ(with(JobOutcome::kNotFinished), DependencyState::kWaiting);
  EXPECT_EQ(with(JobOutcome::kFailed), DependencyState::kNone);
  EXPECT_EQ(with(JobOutcome::kSucceeded), DependencyState::kNeverMet);
  EXPECT_EQ(with(JobOutcome::kUnknown), DependencyState::kNeverMet);
}

TEST(SingletonTest, NamesNoJobAndIsLeftToTheCaller) {
  const std::vector<Dependency> deps = {{DependencyKind::kSingleton, 0}};
  EXPECT_TRUE(CheckDependencies(7, deps).ok());
  EXPECT_EQ(EvaluateDependencies(deps, [](JobId) { return JobOutcome::kUnknown; }).state,
            DependencyState::kNone);
}

}  // namespace
}  // namespace hachi::sched
