// Preempt phase, tiers: who preempts whom, which victims, when not; the plan's
// preemptions, the preemptor's hold and its diagnosis (docs/scheduler.md, "Preemption").
#include "sched/preempt.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "sched/scheduler.h"
#include "sched/testing.h"

namespace hachi::sched {
namespace {

using testing::ClusterBuilder;
using testing::MakeCluster;
using testing::MakeJob;

constexpr Time kNow = 10 * kHour;  // 10:00 on day 0

Plan Cycle(const ClusterState& s, const char* policy = "hachi", bool explain = true) {
  SchedConfig c;
  c.policy = policy;
  c.explain = explain;
  return (*Scheduler::Create(c))->Schedule(s, kNow);
}

std::vector<JobId> Victims(const Plan& p) {
  std::vector<JobId> v;
  for (const Preemption& x : p.preemptions) v.push_back(x.job);
  return v;
}

const Diagnosis* Diag(const Plan& p, JobId id) {
  for (const Diagnosis& d : p.pending) {
    if (d.job == id) return &d;
  }
  return nullptr;
}

// Two hgx-h100 nodes. Partitions over both: batch (tier 1, requeue, grace 5m), other
// (tier 2, may not preempt), prod (tier 2, preempts), top (tier 3). Rows add jobs.
ClusterBuilder Base() {
  return MakeCluster()
      .Nodes(2, "hgx-h100")
      .Partition("batch")
      .Tier(1)
      .Preempted(PreemptMode::kRequeue, 5 * kMinute)
      .Partition("other")
      .Tier(2)
      .Partition("prod")
      .Tier(2)
      .PreemptsLowerTiers()
      .Partition("top")
      .Tier(3);
}

// A running job on `node`: `gpus` GPUs of `partition`, started `age` ago, 10 h limit.
testing::JobBuilder Aged(JobId id, const char* partition, int gpus, Duration age) {
  return MakeJob(id).Partition(partition).Gpus(gpus).Start(kNow - age).Limit(10 * kHour);
}

struct Row {
  const char* name;
  std::function<void(ClusterBuilder&)> setup;  // jobs; job 1 is the pending one
  std::vector<JobId> victims;                  // expected, in plan order
  Reason reason;                               // of job 1
  const char* policy = "hachi";
};

class PreemptTiers : public ::testing::TestWithParam<Row> {};

TEST_P(PreemptTiers, ChoosesTheExpectedVictims) {
  ClusterBuilder b = Base();
  GetParam().setup(b);
  const ClusterState s = b.Build();
  const Plan plan = Cycle(s, GetParam().policy);
  EXPECT_EQ(Victims(plan), GetParam().victims);
  ASSERT_NE(Diag(plan, 1), nullptr);
  EXPECT_EQ(Diag(plan, 1)->reason, GetParam().reason)
      << ReasonName(Diag(plan, 1)->reason) << ": " << Diag(plan, 1)->Format(s, kNow);
  // The lean cycle (the simulator's) preempts the same jobs.
  EXPECT_EQ(Victims(Cycle(s, GetParam().policy, false)), GetParam().victims);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, PreemptTiers,
    ::testing::Values(
        Row{"tier2_preempts_tier1",
            [](ClusterBuilder& b) {
              b.Running(Aged(10, "batch", 8, kHour), 0)
                  .Running(Aged(11, "top", 8, kHour), 1)
                  .Pending(MakeJob(1).Partition("prod").Gpus(8).Limit(kHour));
            },
            {10},
            Reason::kPreempting},
        Row{"never_an_equal_tier",
            [](ClusterBuilder& b) {
              b.Running(Aged(10, "other", 8, kHour), 0)
                  .Running(Aged(11, "other", 8, kHour), 1)
                  .Pending(MakeJob(1).Partition("prod").Gpus(8).Limit(kHour));
            },
            {},
            Reason::kResources},
        Row{"never_a_higher_tier",
            [](ClusterBuilder& b) {
              b.Running(Aged(10, "top", 8, kHour), 0)
                  .Running(Aged(11, "top", 8, kHour), 1)
                  .Pending(MakeJob(1).Partition("prod").Gpus(8).Limit(kHour));
            },
            {},
            Reason::kResources},
        Row{"least_lost_work_first",
            [](ClusterBuilder& b) {
              b.Running(Aged(10, "batch", 8, 3 * kHour), 0)
                  .Running(Aged(11, "batch", 8, kHour), 1)
                  .Pending(MakeJob(1).Partition("prod").Gpus(8).Limit(kHour));
            },
            {11},
            Reason::kPreempting},
        Row{"fewest_jobs_at_equal_loss",
            [](ClusterBuilder& b) {
              b.Running(Aged(10, "batch", 4, kHour), 0, "0-3")
                  .Running(Aged(11, "batch", 4, kHour), 0, "4-7")
                  .Running(Aged(12, "batch", 8, kHour), 1)
                  .Pending(MakeJob(1).Partition("prod").Gpus(8).Limit(kHour));
            },
            {12},
            Reason::kPreempting},
        Row{"only_as_many_as_needed_youngest",
            [](ClusterBuilder& b) {
              // n0: 4 free, a 2-GPU job of 3 h and one of 1 h: 6 GPUs need one victim.
              b.Running(Aged(10, "batch", 2, 3 * kHour), 0, "0,1")
                  .Running(Aged(11, "batch", 2, kHour), 0, "2,3")
                  .Running(Aged(12, "top", 8, kHour), 1)
                  .Pending(MakeJob(1).Partition("prod").Gpus(6).Limit(kHour));
            },
            {11},
            Reason::kPreempting},
        Row{"smaller_loss_beats_fewer_jobs",
            [](ClusterBuilder& b) {
              // n0: two 4-GPU jobs of 10 min (80 GPU-min); n1: one 8-GPU job of 1 h.
              b.Running(Aged(10, "batch", 4, 10 * kMinute), 0, "0-3")
                  .Running(Aged(11, "batch", 4, 10 * kMinute), 0, "4-7")
                  .Running(Aged(12, "batch", 8, kHour), 1)
                  .Pending(MakeJob(1).Partition("prod").Gpus(8).Limit(kHour));
            },
            {10, 11},
            Reason::kPreempting},
        Row{"not_when_resources_free_up_within_the_grace",
            [](ClusterBuilder& b) {
              // Job 10 hits its limit in 2 minutes: earlier than any victim could leave.
              b.Running(MakeJob(10)
                            .Partition("batch")
                            .Gpus(8)
                            .Start(kNow - kHour)
                            .Limit(kHour + 2 * kMinute),
                        0)
                  .Running(Aged(11, "batch", 8, kHour), 1)
                  .Pending(MakeJob(1).Partition("prod").Gpus(8).Limit(kHour));
            },
            {},
            Reason::kResources},
        Row{"not_when_the_partition_may_not_preempt",
            [](ClusterBuilder& b) {
              b.Running(Aged(10, "batch", 8, kHour), 0)
                  .Running(Aged(11, "batch", 8, kHour), 1)
                  .Pending(MakeJob(1).Partition("other").Gpus(8).Limit(kHour));
            },
            {},
            Reason::kResources},
        Row{"not_under_the_easy_policy",
            [](ClusterBuilder& b) {
              b.Running(Aged(10, "batch", 8, kHour), 0)
                  .Running(Aged(11, "batch", 8, kHour), 1)
                  .Pending(MakeJob(1).Partition("prod").Gpus(8).Limit(kHour));
            },
            {},
            Reason::kResources,
            "easy"},
        Row{"a_job_being_preempted_is_not_chosen_again",
            [](ClusterBuilder& b) {
              // Job 10 leaves in 3 minutes (an earlier preemption): job 1 waits for it.
              b.Running(Aged(10, "batch", 8, kHour).PreemptKillAt(kNow + 3 * kMinute), 0)
                  .Running(Aged(11, "batch", 8, 2 * kHour), 1)
                  .Pending(MakeJob(1).Partition("prod").Gpus(8).Limit(kHour));
            },
            {},
            Reason::kResources},
        Row{"a_second_preemptor_takes_other_victims",
            [](ClusterBuilder& b) {
              b.Running(Aged(10, "batch", 8, kHour), 0)
                  .Running(Aged(11, "batch", 8, 2 * kHour), 1)
                  .Pending(MakeJob(1).Partition("prod").Gpus(8).Limit(kHour).Submit(1))
                  .Pending(MakeJob(2).Partition("prod").Gpus(8).Limit(kHour).Submit(2));
            },
            {10, 11},
            Reason::kPreempting},
        Row{"a_gang_preempts_on_enough_nodes",
            [](ClusterBuilder& b) {
              b.Running(Aged(10, "batch", 8, kHour), 0)
                  .Running(Aged(11, "batch", 4, kHour), 1)
                  .Pending(MakeJob(1).Partition("prod").Gang(2, 8).Limit(kHour));
            },
            {10, 11},
            Reason::kPreempting}),
    [](const ::testing::TestParamInfo<Row>& p) { return p.param.name; });

TEST(PreemptTest, PlanSignalsNowKillsAfterTheGraceAndHoldsTheGpus) {
  const ClusterState s =
      Base()
          .Running(Aged(10, "batch", 8, kHour), 0)
          .Running(Aged(11, "top", 8, kHour), 1)
          .Pending(MakeJob(1).Partition("prod").Gpus(8).Limit(kHour).Submit(1))
          // A batch job behind it may not take node 0 while job 1 holds it.
          .Pending(MakeJob(2).Partition("batch").Gpus(8).Limit(kHour).Submit(2))
          .Build();
  const Plan plan = Cycle(s);
  ASSERT_EQ(plan.preemptions.size(), 1u);
  const Preemption& p = plan.preemptions[0];
  EXPECT_EQ(p.job, 10);
  EXPECT_EQ(p.mode, PreemptMode::kRequeue);
  EXPECT_EQ(p.signal_at, kNow);
  EXPECT_EQ(p.kill_at, kNow + 5 * kMinute);
  EXPECT_EQ(p.for_job, 1);
  EXPECT_EQ(p.for_partition, -1);
  const Reservation* r1 = nullptr;
  const Reservation* r2 = nullptr;
  for (const Reservation& r : plan.reservations) {
    if (r.job == 1) r1 = &r;
    if (r.job == 2) r2 = &r;
  }
  ASSERT_NE(r1, nullptr);
  EXPECT_EQ(r1->start, kNow + 5 * kMinute);
  ASSERT_EQ(r1->allocations.size(), 1u);
  EXPECT_EQ(r1->allocations[0].node, 0);
  EXPECT_EQ(r1->allocations[0].gpus, GpuSet::FirstN(8));
  ASSERT_NE(r2, nullptr);  // after job 1's hour on node 0
  EXPECT_EQ(r2->start, kNow + 5 * kMinute + kHour);
  EXPECT_EQ(Diag(plan, 1)->Format(s, kNow),
            "waiting for 1 job of partition batch to leave (grace 5m), from 10:05 on n0");
}

TEST(PreemptTest, CancelModeAndGraceComeFromTheVictimsPartition) {
  ClusterBuilder b = Base();
  b.state().partitions[0].preempt_mode = PreemptMode::kCancel;
  b.state().partitions[0].grace = 0;
  const ClusterState s =
      b.Running(Aged(10, "batch", 8, kHour), 0)
          .Running(Aged(11, "batch", 4, kHour), 1, "0-3")
          .Running(Aged(12, "batch", 4, 2 * kHour), 1, "4-7")
          .Pending(MakeJob(1).Partition("prod").Gang(2, 8).Limit(kHour))
          .Build();
  const Plan plan = Cycle(s);
  ASSERT_EQ(plan.preemptions.size(), 3u);
  for (const Preemption& p : plan.preemptions) {
    EXPECT_EQ(p.mode, PreemptMode::kCancel);
    EXPECT_EQ(p.kill_at, kNow);
  }
  EXPECT_EQ(
      Diag(plan, 1)->Format(s, kNow),
      "waiting for 3 jobs of partition batch to leave (grace 0s), from 10:00 on n0");
}

TEST(PreemptTest, LaterCyclesWaitForTheVictimsWithoutPreemptingAgain) {
  // The cycle after the caller applied the preemption of job 10.
  const ClusterState s =
      Base()
          .Running(Aged(10, "batch", 8, kHour).PreemptKillAt(kNow + 5 * kMinute), 0)
          .Running(Aged(11, "batch", 8, 2 * kHour), 1)
          .Pending(MakeJob(1).Partition("prod").Gpus(8).Limit(kHour))
          .Build();
  const Plan plan = Cycle(s);
  EXPECT_TRUE(plan.preemptions.empty());
  ASSERT_EQ(plan.reservations.size(), 1u);
  EXPECT_EQ(plan.reservations[0].start, kNow + 5 * kMinute);
  EXPECT_EQ(
      Diag(plan, 1)->Format(s, kNow),
      "needs 8 GPUs on one node; no GPU is free; earliest start 10:05 on n0 when job "
      "10 is preempted");
}

}  // namespace
}  // namespace hachi::sched
