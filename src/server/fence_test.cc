// The fence's arithmetic and wording, row by row (fencing_test.cc drives them through the
// Controller with a fake clock).
#include "server/fence.h"

#include <gtest/gtest.h>

#include <string>

namespace hachi::server {
namespace {

constexpr FenceTimes kTimes{30, 10, 5};  // a 45 s fence

struct LeftRow {
  std::string name;
  int64_t silent_ms;
  int64_t want;
};

class FenceLeftMsTest : public testing::TestWithParam<LeftRow> {};

TEST_P(FenceLeftMsTest, Counts) {
  EXPECT_EQ(FenceLeftMs(GetParam().silent_ms, kTimes), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, FenceLeftMsTest,
    testing::Values(LeftRow{"never_heard_from", -1, 0}, LeftRow{"just_lost", 0, 45000},
                    LeftRow{"part_way", 30500, 14500}, LeftRow{"one_ms_left", 44999, 1},
                    LeftRow{"exactly_passed", 45000, 0}, LeftRow{"long_past", 900000, 0}),
    [](const testing::TestParamInfo<LeftRow>& p) { return p.param.name; });

struct LostRow {
  std::string name;
  int64_t silent_ms;
  bool want;
};

class AgentLostTest : public testing::TestWithParam<LostRow> {};

TEST_P(AgentLostTest, Decides) {
  EXPECT_EQ(AgentLost(GetParam().silent_ms, 30), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(Rows, AgentLostTest,
                         testing::Values(LostRow{"never_heard_from", -1, true},
                                         LostRow{"just_polled", 0, false},
                                         LostRow{"at_the_timeout", 30000, false},
                                         LostRow{"past_the_timeout", 30001, true}),
                         [](const testing::TestParamInfo<LostRow>& p) {
                           return p.param.name;
                         });

struct NoteRow {
  std::string name;
  int64_t left_ms;
  bool requeues;
  std::string want;
};

class FenceNoteTest : public testing::TestWithParam<NoteRow> {};

TEST_P(FenceNoteTest, Words) {
  EXPECT_EQ(FenceNote("n2", GetParam().left_ms, GetParam().requeues), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, FenceNoteTest,
    testing::Values(
        NoteRow{"requeue", 47000, true,
                "waiting for node n2's lease to expire before requeue, 47 s"},
        NoteRow{"node_fail", 47000, false,
                "waiting for node n2's lease to expire before ending it NODE_FAIL, 47 s"},
        NoteRow{"rounds_up", 1, true,
                "waiting for node n2's lease to expire before requeue, 1 s"},
        NoteRow{"zero", 0, true,
                "waiting for node n2's lease to expire before requeue, 0 s"}),
    [](const testing::TestParamInfo<NoteRow>& p) { return p.param.name; });

struct OverdueRow {
  std::string name;
  Duration time_limit;
  Time now;  // the run started at 1000
  int64_t checking_ms;
  bool want;
};

class RunOverdueTest : public testing::TestWithParam<OverdueRow> {};

TEST_P(RunOverdueTest, Decides) {
  const OverdueRow& r = GetParam();
  EXPECT_EQ(RunOverdue(1000, r.time_limit, r.now, r.checking_ms, kTimes), r.want);
}

// Limit 60 s: overdue past 1000 + 60 + 45; the server checking for 35 s at least.
INSTANTIATE_TEST_SUITE_P(
    Rows, RunOverdueTest,
    testing::Values(OverdueRow{"within_its_limit", 60, 1050, 100000, false},
                    OverdueRow{"past_the_limit_within_the_fence", 60, 1105, 100000,
                               false},
                    OverdueRow{"past_the_limit_and_the_fence", 60, 1106, 100000, true},
                    OverdueRow{"no_limit", 0, 999999, 100000, false},
                    OverdueRow{"server_just_back", 60, 5000, 34999, false},
                    OverdueRow{"server_back_long_enough", 60, 5000, 35000, true}),
    [](const testing::TestParamInfo<OverdueRow>& p) { return p.param.name; });

TEST(FenceWordsTest, LostReasonAndFencedExit) {
  EXPECT_EQ(AgentLostReason(30), "agent silent for more than 30s");
  EXPECT_EQ(FencedExitMessage("n2", kTimes),
            "node n2 down: no contact with its agent for 30s (its lease) + 10s (kill "
            "grace) + 5s");
}

}  // namespace
}  // namespace hachi::server
