// PlanPower on real cycles: the scheduler's plan for a cluster whose burst nodes are
// off (down to the scheduler), then which of them to power up or down.
#include "sched/power.h"

#include <gtest/gtest.h>

#include "sched/scheduler.h"
#include "sched/testing.h"

namespace hachi::sched {
namespace {

using testing::MakeCluster;
using testing::MakeJob;

constexpr Time kNow = 100000;

// n0, n1 fixed and full for 10 hours; n2..n5 burst nodes, off (down).
testing::ClusterBuilder Fleet() {
  testing::ClusterBuilder b;
  b.Nodes(6, "hgx-h100").Partition("p");
  for (int i = 2; i < 6; ++i) b.NodeState(i, NodeState::kDown);
  for (int i = 0; i < 2; ++i) {
    b.Running(MakeJob(900 + i).Gpus(8).Start(kNow - 60).Limit(10 * kHour), i);
  }
  return b;
}

std::vector<PowerPool> OnePool(int max_powered = 0) {
  PowerPool burst;
  burst.name = "burst";
  burst.burst = true;
  burst.nodes = {2, 3, 4, 5};
  burst.max_powered = max_powered;
  return {burst};
}

std::vector<NodePower> AllOff(const ClusterState& s) {
  std::vector<NodePower> p(s.nodes.size());
  for (int i = 2; i < 6; ++i) p[i] = {PowerState::kOff, 0, 0};
  return p;
}

PowerPlan Decide(const ClusterState& s, const std::vector<PowerPool>& pools,
                 const std::vector<NodePower>& power, Time now = kNow) {
  Result<std::unique_ptr<Scheduler>> sched = Scheduler::Create(SchedConfig{});
  EXPECT_TRUE(sched.ok());
  const Plan plan = (*sched)->Schedule(s, now);
  EXPECT_TRUE(plan.starts.empty());
  return PlanPower(s, plan, pools, power, now);
}

TEST(PlanPower, SmallJobsShareOneResumedNode) {
  testing::ClusterBuilder b = Fleet();
  for (int j = 1; j <= 8; ++j) b.Pending(MakeJob(j).Gpus(1).Submit(j).Limit(kHour));
  const ClusterState s = b.Build();
  const PowerPlan p = Decide(s, OnePool(), AllOff(s));
  EXPECT_EQ(p.resume, std::vector<int>{2});
  EXPECT_TRUE(p.suspend.empty());
  ASSERT_EQ(p.waiting.size(), 8u);
  EXPECT_EQ(p.waiting[0].pool, 0);
  EXPECT_EQ(p.waiting[0].nodes, 1);
}

TEST(PlanPower, AGangGetsAllItsNodesOrNone) {
  testing::ClusterBuilder b = Fleet();
  b.Pending(MakeJob(1).Gang(3, 8).Submit(1).Limit(kHour));
  const ClusterState s = b.Build();
  EXPECT_EQ(Decide(s, OnePool(), AllOff(s)).resume, (std::vector<int>{2, 3, 4}));
  const PowerPlan capped = Decide(s, OnePool(/*max_powered=*/2), AllOff(s));
  EXPECT_TRUE(capped.resume.empty());
  EXPECT_TRUE(capped.waiting.empty());
}

TEST(PlanPower, AGangCountsTheNodesThatAreUpAndFree) {
  testing::ClusterBuilder b;
  b.Nodes(4, "hgx-h100").Partition("p");
  b.NodeState(2, NodeState::kDown).NodeState(3, NodeState::kDown);
  b.Running(MakeJob(900).Gpus(8).Start(kNow - 60).Limit(10 * kHour), 0);
  b.Pending(MakeJob(1).Gang(3, 8).Submit(1).Limit(kHour));  // n1 free: 2 more
  const ClusterState s = b.Build();
  std::vector<PowerPool> pools = {{"burst", true, {2, 3}}};
  std::vector<NodePower> power(4);
  power[2] = power[3] = {PowerState::kOff, 0, 0};
  const PowerPlan p = Decide(s, pools, power);
  EXPECT_EQ(p.resume, (std::vector<int>{2, 3}));
  ASSERT_EQ(p.waiting.size(), 1u);
  EXPECT_EQ(p.waiting[0].nodes, 2);
}

// A gang that needs a busy fixed node and two burst nodes: resumed so as to be up when
// the fixed node's job ends (its time limit), not after it.
TEST(PlanPower, AGangCountsABusyNodeByWhenItFrees) {
  auto cluster = [](Duration left) {
    testing::ClusterBuilder b;
    b.Nodes(3, "hgx-h100").Partition("p");
    b.NodeState(1, NodeState::kDown).NodeState(2, NodeState::kDown);
    b.Running(MakeJob(900).Gpus(8).Start(kNow - 60).Limit(60 + left), 0);
    b.Pending(MakeJob(1).Gang(3, 8).Submit(1).Limit(kHour));
    return b.Build();
  };
  std::vector<PowerPool> pools = {{"burst", true, {1, 2}}};  // resume_timeout 15m
  std::vector<NodePower> power(3);
  power[1] = power[2] = {PowerState::kOff, 0, 0};
  const ClusterState soon = cluster(10 * kMinute);
  const PowerPlan p = Decide(soon, pools, power);
  EXPECT_EQ(p.resume, (std::vector<int>{1, 2}));
  ASSERT_EQ(p.waiting.size(), 1u);
  EXPECT_EQ(p.waiting[0].nodes, 2);
  // Its job ends in an hour: nothing yet, and the rule asks again 15 minutes before.
  const ClusterState later = cluster(kHour);
  const PowerPlan q = Decide(later, pools, power);
  EXPECT_TRUE(q.resume.empty());
  EXPECT_EQ(q.wake_at, kNow + kHour - 15 * kMinute);
}

TEST(PlanPower, CapacityAlreadyComingIsUsedFirst) {
  testing::ClusterBuilder b = Fleet();
  b.Pending(MakeJob(1).Gpus(8).Submit(1).Limit(kHour));
  b.Pending(MakeJob(2).Gpus(4).Submit(2).Limit(kHour));
  const ClusterState s = b.Build();
  std::vector<NodePower> power = AllOff(s);
  power[4] = {PowerState::kResuming, kNow - 120, 0};
  const PowerPlan p = Decide(s, OnePool(), power);
  // Job 1 takes the node powering up; job 2 needs one more.
  EXPECT_EQ(p.resume, std::vector<int>{2});
  ASSERT_EQ(p.waiting.size(), 2u);
  EXPECT_EQ(p.wake_at, kNow - 120 + 15 * kMinute);  // its resume's timeout
}

TEST(PlanPower, ANodeInBurnInIsCapacityComingWithoutATimeout) {
  testing::ClusterBuilder b = Fleet();
  b.Pending(MakeJob(1).Gpus(8).Submit(1).Limit(kHour));
  const ClusterState s = b.Build();
  std::vector<NodePower> power = AllOff(s);
  power[3] = {PowerState::kBurnIn, kNow - 40 * kMinute, 0};  // registered, checking
  const PowerPlan p = Decide(s, OnePool(), power);
  EXPECT_TRUE(p.resume.empty());  // the job waits for it, not for another resume
  EXPECT_TRUE(p.timed_out.empty());
  ASSERT_EQ(p.waiting.size(), 1u);
  EXPECT_EQ(PowerStateName(PowerState::kBurnIn), "burn-in");
}

TEST(PlanPower, TheCheapestPoolFirstAndNeverAFixedOne) {
  testing::ClusterBuilder b = Fleet();
  b.Pending(MakeJob(1).Gpus(8).Submit(1).Limit(kHour));
  const ClusterState s = b.Build();
  PowerPool dear{"dear", true, {2, 3}};
  dear.price_per_gpu_hour = 3.0;
  PowerPool cheap{"cheap", true, {4}};
  cheap.price_per_gpu_hour = 1.5;
  PowerPool fixed{"owned", false, {5}};  // down, but a fixed node is not powered up
  std::vector<PowerPool> pools = {dear, cheap, fixed};
  std::vector<NodePower> power = AllOff(s);
  EXPECT_EQ(Decide(s, pools, power).resume, std::vector<int>{4});
  power[4] = {PowerState::kFailed, kNow - 60, 0};  // not tried again
  EXPECT_EQ(Decide(s, pools, power).resume, std::vector<int>{2});
}

TEST(PlanPower, NoResumeForAJobThatStartsSoonerOnPoweredNodes) {
  testing::ClusterBuilder b;
  b.Nodes(3, "hgx-h100").Partition("p").NodeState(2, NodeState::kDown);
  b.Running(MakeJob(900).Gpus(8).Start(kNow - 60).Limit(5 * kMinute), 0);
  b.Running(MakeJob(901).Gpus(8).Start(kNow - 60).Limit(10 * kHour), 1);
  b.Pending(MakeJob(1).Gpus(8).Submit(1).Limit(kHour));
  const ClusterState s = b.Build();
  std::vector<PowerPool> pools = {{"burst", true, {2}}};
  std::vector<NodePower> power(3);
  power[2] = {PowerState::kOff, 0, 0};
  EXPECT_TRUE(Decide(s, pools, power).resume.empty());  // n0 is free in 4 min
  pools[0].resume_timeout = 2 * kMinute;                // a resume this fast would help
  EXPECT_EQ(Decide(s, pools, power).resume, std::vector<int>{2});
}

// Placement takes the cheapest nodes that fit: the fixed node, empty, before the burst
// node the packing would pick (7 of its GPUs busy); the burst node when the fixed one
// is full. Without pools the packing decides.
TEST(RankByCost, PlacementDrainsWorkOffBurstNodes) {
  testing::ClusterBuilder b;
  b.Nodes(2, "hgx-h100").Partition("p");
  b.Running(MakeJob(900).Gpus(7).Start(kNow - 60).Limit(10 * kHour), 1);
  b.Pending(MakeJob(1).Gpus(1).Submit(1).Limit(kHour));
  ClusterState s = b.Build();
  Result<std::unique_ptr<Scheduler>> sched = Scheduler::Create(SchedConfig{});
  ASSERT_TRUE(sched.ok());
  Plan plan = (*sched)->Schedule(s, kNow);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].allocations[0].node, 1);  // packing, without pools
  RankByCost({{"owned", false, {0}}, {"burst", true, {1}}}, &s);
  EXPECT_EQ(s.nodes[1].cost_rank, 1);
  EXPECT_EQ(s.max_cost_rank, 1);
  plan = (*sched)->Schedule(s, kNow);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].allocations[0].node, 0);
  b.Running(MakeJob(901).Gpus(8).Start(kNow - 60).Limit(10 * kHour), 0);
  s = b.Build();
  RankByCost({{"owned", false, {0}}, {"burst", true, {1}}}, &s);
  plan = (*sched)->Schedule(s, kNow);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].allocations[0].node, 1);
}

TEST(PlanPower, IdleNodesAreSuspendedAfterTheirTimeAndBusyOnesNever) {
  testing::ClusterBuilder b;
  b.Nodes(3, "hgx-h100").Partition("p");
  b.Running(MakeJob(900).Gpus(1).Start(kNow - 60).Limit(kHour), 2);
  const ClusterState s = b.Build();
  std::vector<PowerPool> pools = {{"burst", true, {0, 1, 2}}};
  std::vector<NodePower> power(3);
  power[0] = {PowerState::kOn, kNow - 7200, kNow - 31 * kMinute};
  power[1] = {PowerState::kOn, kNow - 7200, kNow - 10 * kMinute};
  power[2] = {PowerState::kOn, kNow - 7200, kNow - 40 * kMinute};  // stale: it is busy
  const PowerPlan p = PlanPower(s, Plan{}, pools, power, kNow);
  EXPECT_EQ(p.suspend, std::vector<int>{0});
  EXPECT_EQ(p.wake_at, kNow + 20 * kMinute);
}

TEST(PlanPower, AResumeThatTookTooLongTimesOut) {
  const ClusterState s = MakeCluster().Nodes(2, "hgx-h100").Partition("p").Build();
  std::vector<PowerPool> pools = {{"burst", true, {0, 1}}};
  std::vector<NodePower> power(2);
  power[0] = {PowerState::kResuming, kNow - 16 * kMinute, 0};
  power[1] = {PowerState::kResuming, kNow - 14 * kMinute, 0};
  const PowerPlan p = PlanPower(s, Plan{}, pools, power, kNow);
  EXPECT_EQ(p.timed_out, std::vector<int>{0});
  EXPECT_EQ(p.wake_at, kNow + kMinute);
  EXPECT_EQ(PowerStateName(PowerState::kFailed), "resume-failed");
}

}  // namespace
}  // namespace hachi::sched
