// Reserve phase: EASY vs conservative examples, which jobs may backfill, and the
// property that a backfilled job never delays a reserved one.
#include "sched/backfill.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "sched/random_testing.h"
#include "sched/scheduler.h"
#include "sched/testing.h"

namespace hachi::sched {
namespace {

using testing::ClusterBuilder;
using testing::MakeCluster;
using testing::MakeJob;

constexpr Time kNow = 1000;

Plan Cycle(const ClusterState& s, const char* policy, int depth = 16) {
  SchedConfig c;
  c.policy = policy;
  c.backfill_depth = depth;
  return (*Scheduler::Create(c))->Schedule(s, kNow);
}

const Reservation* Find(const Plan& p, JobId id) {
  for (const Reservation& r : p.reservations) {
    if (r.job == id) return &r;
  }
  return nullptr;
}

// One hgx-h100: job 90 holds GPUs 0-3 until 2 h, job 91 holds 4-7 until 4 h.
ClusterBuilder TwoRunning() {
  return MakeCluster()
      .Nodes(1, "hgx-h100")
      .Partition("p")
      .Running(MakeJob(90).Gpus(4).Start(0).Limit(2 * kHour), 0, "0-3")
      .Running(MakeJob(91).Gpus(4).Start(0).Limit(4 * kHour), 0, "4-7");
}

TEST(BackfillTest, EasyReservesOnlyTheFirstBlockedJob) {
  const ClusterState s = TwoRunning()
                             .Pending(MakeJob(1).Gpus(8).Limit(kHour).Submit(1))
                             .Pending(MakeJob(2).Gpus(8).Limit(kHour).Submit(2))
                             .Pending(MakeJob(3).Gpus(4).Limit(kHour).Submit(3))
                             .Build();
  const Plan easy = Cycle(s, "easy");
  ASSERT_EQ(easy.reservations.size(), 1u);
  EXPECT_EQ(easy.reservations[0].job, 1);
  EXPECT_EQ(easy.reservations[0].start, 4 * kHour);
  EXPECT_EQ(easy.reservations[0].allocations[0].gpus, GpuSet::FirstN(8));
}

TEST(BackfillTest, ConservativeReservesEveryBlockedJobInOrder) {
  const ClusterState s = TwoRunning()
                             .Pending(MakeJob(1).Gpus(8).Limit(kHour).Submit(1))
                             .Pending(MakeJob(2).Gpus(8).Limit(kHour).Submit(2))
                             .Pending(MakeJob(3).Gpus(4).Limit(kHour).Submit(3))
                             .Build();
  const Plan plan = Cycle(s, "hachi");
  ASSERT_EQ(plan.reservations.size(), 3u);
  ASSERT_NE(Find(plan, 1), nullptr);
  EXPECT_EQ(Find(plan, 1)->start, 4 * kHour);
  EXPECT_EQ(Find(plan, 2)->start, 5 * kHour);  // after job 1's hour
  // Job 3 fits in the gap: GPUs 0-3 free from 2 h, job 1 holds them from 4 h.
  EXPECT_EQ(Find(plan, 3)->start, 2 * kHour);
  EXPECT_EQ(Find(plan, 3)->allocations[0].gpus, GpuSet::FirstN(4));
}

TEST(BackfillTest, DepthLimitsReservations) {
  const ClusterState s = TwoRunning()
                             .Pending(MakeJob(1).Gpus(8).Limit(kHour).Submit(1))
                             .Pending(MakeJob(2).Gpus(8).Limit(kHour).Submit(2))
                             .Pending(MakeJob(3).Gpus(8).Limit(kHour).Submit(3))
                             .Build();
  EXPECT_EQ(Cycle(s, "hachi", 2).reservations.size(), 2u);
  EXPECT_EQ(Cycle(s, "fifo").reservations.size(), 0u);
}

struct Row {
  const char* name;
  const char* policy;
  Duration limit;  // of the 2-GPU candidate behind the blocked 8-GPU job
  bool starts;
};

class BackfillCandidate : public ::testing::TestWithParam<Row> {};

// One hgx-h100, job 90 on GPUs 0-3 until 2 h; the 8-GPU head job reserves the node
// from 2 h; a 2-GPU job may start now only if it ends by then.
TEST_P(BackfillCandidate, StartsOnlyIfItEndsBeforeTheReservation) {
  const ClusterState s =
      MakeCluster()
          .Nodes(1, "hgx-h100")
          .Partition("p")
          .Running(MakeJob(90).Gpus(4).Start(0).Limit(2 * kHour), 0, "0-3")
          .Pending(MakeJob(1).Gpus(8).Limit(kHour).Submit(1))
          .Pending(MakeJob(2).Gpus(2).Limit(GetParam().limit).Submit(2))
          .Build();
  const Plan plan = Cycle(s, GetParam().policy);
  // The head job is reserved except under fifo (conservative backfill may also
  // reserve the candidate when it waits).
  EXPECT_EQ(Find(plan, 1) != nullptr, GetParam().policy != std::string("fifo"));
  EXPECT_EQ(plan.starts.size(), GetParam().starts ? 1u : 0u);
  if (GetParam().starts) {
    EXPECT_TRUE(plan.starts[0].backfilled);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Rows, BackfillCandidate,
    ::testing::Values(
        Row{"easy_short_job_backfills", "easy", 30 * kMinute, true},
        Row{"easy_job_ending_at_reservation_backfills", "easy", 2 * kHour - kNow, true},
        Row{"easy_one_second_too_long_waits", "easy", 2 * kHour - kNow + 1, false},
        Row{"easy_long_job_waits", "easy", 3 * kHour, false},
        Row{"hachi_short_job_backfills", "hachi", 30 * kMinute, true},
        Row{"hachi_long_job_waits", "hachi", 3 * kHour, false},
        Row{"fifo_never_backfills", "fifo", 30 * kMinute, false}),
    [](const auto& row) { return std::string(row.param.name); });

TEST(BackfillTest, GangReservationWaitsForEnoughNodesOfOneClass) {
  // n0, n1 hgx-h100 busy until 1 h and 3 h; n2 pcie-8x-l40s idle. A gang of 2 x 8
  // may not use the idle L40S box: it starts at 3 h on n0 + n1.
  const ClusterState s = MakeCluster()
                             .Nodes(2, "hgx-h100")
                             .Nodes(1, "pcie-8x-l40s")
                             .Partition("p")
                             .Running(MakeJob(90).Gpus(8).Start(0).Limit(kHour), 0)
                             .Running(MakeJob(91).Gpus(2).Start(0).Limit(3 * kHour), 1)
                             .Pending(MakeJob(1).Gang(2, 8).Limit(kHour).Submit(1))
                             .Build();
  const Plan plan = Cycle(s, "hachi");
  ASSERT_EQ(plan.reservations.size(), 1u);
  EXPECT_EQ(plan.reservations[0].start, 3 * kHour);
  ASSERT_EQ(plan.reservations[0].allocations.size(), 2u);
  EXPECT_EQ(plan.reservations[0].allocations[0].node, 0);
  EXPECT_EQ(plan.reservations[0].allocations[1].node, 1);
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].earliest_start, 3 * kHour);
  EXPECT_EQ(plan.pending[0].blocking_job, 91);
}

// Simulates forward with every job ending exactly at its time limit: at each
// reservation's start, its GPUs (and CPUs) on each node are free of every running
// job, every job started now, and every other reservation.
void CheckReservationsHold(const ClusterState& s, const Plan& plan, Time now) {
  struct Busy {
    int node;
    GpuSet gpus;
    Time from, to;
    JobId job;
  };
  std::vector<Busy> busy;
  for (const Job& j : s.running) {
    for (const Allocation& a : j.allocations) {
      busy.push_back({a.node, a.gpus, now, std::max(j.EndEstimate(), now + 1), j.id});
    }
  }
  auto limit_of = [&](JobId id) {
    for (const Job& j : s.pending) {
      if (j.id == id) return j.req.time_limit;
    }
    return Duration{0};
  };
  for (const Start& st : plan.starts) {
    for (const Allocation& a : st.allocations) {
      busy.push_back({a.node, a.gpus, now, now + limit_of(st.job), st.job});
    }
  }
  for (const Reservation& r : plan.reservations) {
    RC_ASSERT(r.start >= now);
    for (const Allocation& a : r.allocations) {
      busy.push_back({a.node, a.gpus, r.start, r.start + limit_of(r.job), r.job});
    }
  }
  for (const Reservation& r : plan.reservations) {
    const Time from = r.start, to = r.start + limit_of(r.job);
    for (const Allocation& a : r.allocations) {
      for (const Busy& b : busy) {
        if (b.job == r.job || b.node != a.node) continue;
        const bool overlap = b.from < to && b.to > from;
        RC_ASSERT(!(overlap && !(b.gpus & a.gpus).empty()));
      }
    }
  }
}

RC_GTEST_PROP(BackfillProperty, BackfilledJobsNeverDelayReservedOnes, ()) {
  const ClusterState s = testing::RandomCluster();
  const int depth = *rc::gen::inRange(1, 6);
  for (const char* policy : {"hachi", "easy"}) {
    SchedConfig c;
    c.policy = policy;
    c.backfill_depth = depth;
    const Plan plan = (*Scheduler::Create(c))->Schedule(s, 10000);
    CheckReservationsHold(s, plan, 10000);
  }
}

}  // namespace
}  // namespace hachi::sched
