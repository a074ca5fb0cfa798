// Time windows: the occurrence arithmetic (window.cc), ownership of window nodes in the
// filter and backfill, the preemptions before a window opens, wake-ups and diagnoses.
#include "sched/window.h"

#include <gtest/gtest.h>

#include "sched/scheduler.h"
#include "sched/testing.h"

namespace hachi::sched {
namespace {

using testing::ClusterBuilder;
using testing::MakeCluster;
using testing::MakeJob;

// `day` days after the clock's day 0 (1970-01-01, a Thursday), at hh:mm.
constexpr Time At(int day, int hh, int mm) {
  return day * kDay + hh * kHour + mm * kMinute;
}

struct SpanRow {
  const char* name;
  TimeWindow window;
  Duration offset;
  Time t;
  WindowSpan want;
};

class ActiveOrNextTest : public ::testing::TestWithParam<SpanRow> {};

TEST_P(ActiveOrNextTest, FindsTheOccurrence) {
  const SpanRow& r = GetParam();
  const WindowSpan got = ActiveOrNext({r.window}, r.t, r.offset);
  EXPECT_EQ(got.start, r.want.start);
  EXPECT_EQ(got.end, r.want.end);
}

const TimeWindow kDayShift{8 * 60, 20 * 60, {}};

INSTANTIATE_TEST_SUITE_P(
    Rows, ActiveOrNextTest,
    ::testing::Values(
        SpanRow{"before", kDayShift, 0, At(0, 7, 0), {At(0, 8, 0), At(0, 20, 0)}},
        SpanRow{"at_the_start", kDayShift, 0, At(0, 8, 0), {At(0, 8, 0), At(0, 20, 0)}},
        SpanRow{"inside", kDayShift, 0, At(0, 10, 0), {At(0, 8, 0), At(0, 20, 0)}},
        SpanRow{"at_the_end_is_outside",
                kDayShift,
                0,
                At(0, 20, 0),
                {At(1, 8, 0), At(1, 20, 0)}},
        SpanRow{"after", kDayShift, 0, At(0, 21, 0), {At(1, 8, 0), At(1, 20, 0)}},
        SpanRow{"crosses_midnight",
                {22 * 60, 6 * 60, {}},
                0,
                At(1, 3, 0),
                {At(0, 22, 0), At(1, 6, 0)}},
        SpanRow{"weekdays_skip_the_weekend",
                {8 * 60, 20 * 60, {1, 2, 3, 4, 5}},
                0,
                At(1, 21, 0),  // day 1 is a Friday; next: Monday, day 4
                {At(4, 8, 0), At(4, 20, 0)}},
        SpanRow{"offset_shifts_the_clock",
                kDayShift,
                kHour,  // t=0 is 01:00 UTC
                At(0, 7, 0),
                {At(0, 7, 0), At(0, 19, 0)}},
        SpanRow{"whole_day", {0, 0, {}}, 0, At(0, 5, 0), {At(0, 0, 0), At(1, 0, 0)}}),
    [](const ::testing::TestParamInfo<SpanRow>& p) { return p.param.name; });

TEST(WindowTest, NoWindowNeverStarts) {
  EXPECT_EQ(ActiveOrNext({}, 0, 0).start, kNever);
  EXPECT_EQ(FormatWindows({kDayShift, {22 * 60, 6 * 60, {1, 5}}}),
            "08:00-20:00, 22:00-06:00 Mon,Fri");
}

// n0 belongs to inference (tier 2) 08:00-20:00; train (tier 1, grace 5m) has n0 and
// n1, and n1 is busy with a month-long train job: for a train job n0 is the only node.
ClusterBuilder DayNight(std::vector<int> days = {}) {
  return MakeCluster()
      .Nodes(2, "hgx-h100")
      .Partition("train", PartitionMode::kShared, {0, 1})
      .Tier(1)
      .Preempted(PreemptMode::kRequeue, 5 * kMinute)
      .Partition("inference", PartitionMode::kShared, {0})
      .Tier(2)
      .Window("08:00", "20:00", {0}, days)
      .Running(MakeJob(90).Partition("train").Gpus(8).Start(0).Limit(30 * kDay), 1);
}

Plan Cycle(const ClusterState& s, Time now, const char* policy = "hachi") {
  SchedConfig c;
  c.policy = policy;
  return (*Scheduler::Create(c))->Schedule(s, now);
}

struct StartRow {
  const char* name;
  Time now;
  const char* partition;
  Duration limit;
  bool starts;
  std::vector<int> days = {};
  Duration offset = 0;
};

class WindowStart : public ::testing::TestWithParam<StartRow> {};

TEST_P(WindowStart, OnlyTheOwnerStartsInTheWindow) {
  const StartRow& r = GetParam();
  ClusterState s = DayNight(r.days)
                       .Pending(MakeJob(1).Partition(r.partition).Gpus(4).Limit(r.limit))
                       .Build();
  s.clock_offset = r.offset;
  for (const char* policy : {"hachi", "easy", "fifo"}) {
    const Plan plan = Cycle(s, r.now, policy);
    EXPECT_EQ(plan.starts.size(), r.starts ? 1u : 0u) << policy;
    if (!r.starts) {
      ASSERT_EQ(plan.pending.size(), 1u);
      EXPECT_EQ(plan.pending[0].reason, Reason::kTimeWindow) << policy;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Rows, WindowStart,
    ::testing::Values(
        StartRow{"train_refused_in_the_window", At(0, 10, 0), "train", kHour, false},
        StartRow{"train_allowed_at_night", At(0, 22, 0), "train", 4 * kHour, true},
        StartRow{"train_ending_at_the_window_start", At(0, 22, 0), "train", 10 * kHour,
                 true},
        StartRow{"train_crossing_the_window_start", At(0, 22, 0), "train", 10 * kHour + 1,
                 false},
        StartRow{"train_short_before_the_window", At(0, 7, 0), "train", kHour, true},
        StartRow{"train_long_before_the_window", At(0, 7, 0), "train", kHour + 1, false},
        StartRow{"owner_in_the_window", At(0, 10, 0), "inference", kHour, true},
        StartRow{"owner_at_night", At(0, 22, 0), "inference", 20 * kHour, true},
        StartRow{"train_on_a_saturday_of_a_weekday_window",
                 At(2, 10, 0),
                 "train",
                 4 * kHour,
                 true,
                 {1, 2, 3, 4, 5}},
        StartRow{"offset_moves_the_window",
                 At(0, 7, 0),
                 "train",
                 30 * kMinute,
                 false,
                 {},
                 kHour},  // 07:00 trace time is 08:00 UTC
        StartRow{"offset_before_the_window",
                 At(0, 6, 0),
                 "train",
                 59 * kMinute,
                 true,
                 {},
                 kHour}),
    [](const ::testing::TestParamInfo<StartRow>& p) { return p.param.name; });

TEST(WindowTest, RefusedJobReservesAfterTheWindowAndSaysWhy) {
  const ClusterState s =
      DayNight().Pending(MakeJob(1).Partition("train").Gpus(4).Limit(11 * kHour)).Build();
  const Plan plan = Cycle(s, At(0, 22, 0));
  ASSERT_EQ(plan.reservations.size(), 1u);
  // 11 h from 22:00 crosses 08:00; the next chance is when the window closes.
  EXPECT_EQ(plan.reservations[0].start, At(1, 20, 0));
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].Format(s, At(0, 22, 0)),
            "nodes n0 belong to partition inference 08:00-20:00; earliest start "
            "20:00 (+1d) on n0");
}

TEST(WindowTest, DiagnosisFoldsNodeRanges) {
  const ClusterState s =
      MakeCluster()
          .Nodes(4, "hgx-h100")
          .Partition("train")
          .Partition("inference", PartitionMode::kShared, {0, 1, 2})
          .Window("08:00", "20:00", {0, 1, 2})
          .Running(MakeJob(90).Partition("train").Gpus(8).Start(0).Limit(30 * kDay), 3)
          .Pending(MakeJob(1).Partition("train").Gpus(1).Limit(kHour))
          .Build();
  const Plan plan = Cycle(s, At(0, 12, 0));
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].reason, Reason::kTimeWindow);
  EXPECT_EQ(plan.pending[0].Format(s, At(0, 12, 0)).substr(0, 51),
            "nodes n0-n2 belong to partition inference 08:00-20:");
}

struct PreemptRow {
  const char* name;
  Time now;
  const char* partition;  // of the running job on n0, started 06:00
  Duration limit;
  bool preempted;
  Time kill_at;  // when preempted
  Time wake_at;
};

class WindowPreempt : public ::testing::TestWithParam<PreemptRow> {};

TEST_P(WindowPreempt, SignalsGraceBeforeTheWindow) {
  const PreemptRow& r = GetParam();
  const ClusterState s = DayNight()
                             .Running(MakeJob(10)
                                          .Partition(r.partition)
                                          .Gpus(2)
                                          .Start(At(0, 6, 0))
                                          .Limit(r.limit),
                                      0)
                             .Pending(MakeJob(1).Partition("train").Gpus(8).Limit(kHour))
                             .Build();
  for (const char* policy : {"hachi", "easy"}) {
    const Plan plan = Cycle(s, r.now, policy);
    ASSERT_EQ(plan.preemptions.size(), r.preempted ? 1u : 0u) << policy;
    EXPECT_EQ(plan.wake_at, r.wake_at) << policy;
    if (!r.preempted) continue;
    const Preemption& p = plan.preemptions[0];
    EXPECT_EQ(p.job, 10);
    EXPECT_EQ(p.signal_at, r.now);
    EXPECT_EQ(p.kill_at, r.kill_at);
    EXPECT_EQ(p.for_job, 0);
    EXPECT_EQ(p.for_partition, 1);  // inference
  }
}

INSTANTIATE_TEST_SUITE_P(
    Rows, WindowPreempt,
    ::testing::Values(PreemptRow{"signalled_grace_before_the_window", At(0, 7, 55),
                                 "train", 4 * kHour, true, At(0, 8, 0), At(0, 8, 0)},
                      PreemptRow{"not_yet", At(0, 7, 50), "train", 4 * kHour, false, 0,
                                 At(0, 7, 55)},
                      PreemptRow{"ends_before_the_window", At(0, 7, 55), "train",
                                 kHour + 58 * kMinute, false, 0, At(0, 8, 0)},
                      PreemptRow{"late_signal_still_gets_the_grace", At(0, 7, 58),
                                 "train", 4 * kHour, true, At(0, 8, 3), At(0, 8, 0)},
                      PreemptRow{"left_over_in_the_window", At(0, 9, 0), "train",
                                 4 * kHour, true, At(0, 9, 5), At(0, 20, 0)},
                      PreemptRow{"owner_jobs_stay", At(0, 7, 55), "inference", 4 * kHour,
                                 false, 0, At(0, 8, 0)},
                      PreemptRow{"at_night_wake_for_the_next_window", At(0, 21, 0),
                                 "inference", kHour, false, 0, At(1, 8, 0)}),
    [](const ::testing::TestParamInfo<PreemptRow>& p) { return p.param.name; });

TEST(WindowTest, OwnerReservesFromTheVictimsExit) {
  // At 07:55 train job 10 (8 GPUs on n0) is told to leave by 08:00; inference job 1
  // holds n0 from then, and a train job behind it cannot take n0 at 08:00.
  const ClusterState s =
      DayNight()
          .Running(
              MakeJob(10).Partition("train").Gpus(8).Start(At(0, 6, 0)).Limit(4 * kHour),
              0)
          .Pending(MakeJob(1).Partition("inference").Gpus(8).Limit(kHour))
          .Build();
  const Plan plan = Cycle(s, At(0, 7, 55));
  ASSERT_EQ(plan.preemptions.size(), 1u);
  ASSERT_EQ(plan.reservations.size(), 1u);
  EXPECT_EQ(plan.reservations[0].job, 1);
  EXPECT_EQ(plan.reservations[0].start, At(0, 8, 0));
}

}  // namespace
}  // namespace hachi::sched
