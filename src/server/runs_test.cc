#include "server/runs.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hachi::server {
namespace {

api::JobExit Exit(api::ExitKind kind, int code = 0, int signal = 0,
                  std::string message = "") {
  api::JobExit e;
  e.job = 4;
  e.kind = kind;
  e.exit_code = code;
  e.signal = signal;
  e.message = std::move(message);
  return e;
}

struct EndRow {
  std::string name;
  api::ExitKind kind;
  int code = 0;
  int signal = 0;
  std::string message;
  bool cancel_requested = false;
  state::JobState want_state;
  std::string want_reason;
};

class EndOfTest : public testing::TestWithParam<EndRow> {};

TEST_P(EndOfTest, WordsTheEnd) {
  const EndRow& row = GetParam();
  state::JobRecord job;
  job.id = 4;
  job.req.time_limit = 90;
  job.req.memory_mib = 64;
  RunInfo info;
  info.worst = Exit(row.kind, row.code, row.signal, row.message);
  info.cancel_requested = row.cancel_requested;
  if (row.cancel_requested) info.cancel_reason = "cancelled by alice";
  const state::JobEnded end = EndOf(job, info, 1234);
  EXPECT_EQ(end.id, 4);
  EXPECT_EQ(end.end_time, 1234);
  EXPECT_EQ(end.state, row.want_state);
  EXPECT_EQ(end.reason, row.want_reason);
  EXPECT_EQ(end.exit_code, row.code);
  EXPECT_EQ(end.signal, row.signal);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, EndOfTest,
    testing::Values(EndRow{"exit0", api::ExitKind::kExited, 0, 0, "", false,
                           state::JobState::kCompleted, ""},
                    EndRow{"exit3", api::ExitKind::kExited, 3, 0, "", false,
                           state::JobState::kFailed, "exit code 3"},
                    EndRow{"signal", api::ExitKind::kSignaled, 0, 9, "", false,
                           state::JobState::kFailed, "killed by signal 9"},
                    EndRow{"time_limit", api::ExitKind::kTimeLimit, 0, 15, "", false,
                           state::JobState::kTimeout, "time limit 1m30s"},
                    EndRow{"oom", api::ExitKind::kOutOfMemory, 0, 9, "", false,
                           state::JobState::kOutOfMemory, "out of memory (limit 64 MiB)"},
                    EndRow{"launch_failed", api::ExitKind::kLaunchFailed, 0, 0,
                           "cannot open /x/out: Permission denied", false,
                           state::JobState::kFailed,
                           "launch failed: cannot open /x/out: Permission denied"},
                    EndRow{"lost", api::ExitKind::kLost, 0, 0, "left no exit status",
                           false, state::JobState::kNodeFail, "left no exit status"},
                    EndRow{"cancelled_without_reason", api::ExitKind::kCancelled, 0, 15,
                           "", false, state::JobState::kCancelled, "cancelled"},
                    // A cancel asked for wins over how the job happened to die...
                    EndRow{"cancel_requested_then_failed", api::ExitKind::kExited, 1, 0,
                           "", true, state::JobState::kCancelled, "cancelled by alice"},
                    // ...but not over a job that completed before the cancel reached it.
                    EndRow{"cancel_requested_but_completed", api::ExitKind::kExited, 0, 0,
                           "", true, state::JobState::kCompleted, ""}),
    [](const testing::TestParamInfo<EndRow>& p) { return p.param.name; });

TEST(CountExitTest, AGangEndsWhenEveryPartReportedOnceAndTheFirstFailureIsItsExit) {
  RunInfo info;  // parts_left unknown (0): taken from the allocation count
  EXPECT_TRUE(CountExit(&info, "n1", Exit(api::ExitKind::kExited, 0), 3));
  EXPECT_EQ(info.parts_left, 2);
  EXPECT_FALSE(CountExit(&info, "n1", Exit(api::ExitKind::kExited, 0), 3));  // again
  EXPECT_EQ(info.parts_left, 2);
  EXPECT_TRUE(CountExit(&info, "n2", Exit(api::ExitKind::kExited, 7), 3));
  EXPECT_TRUE(CountExit(&info, "n3", Exit(api::ExitKind::kSignaled, 0, 9), 3));
  EXPECT_EQ(info.parts_left, 0);
  ASSERT_TRUE(info.worst.has_value());
  EXPECT_EQ(info.worst->exit_code, 7);  // the first failing part, not the last
  EXPECT_EQ(info.ended_on, (std::vector<std::string>{"n1", "n2", "n3"}));
}

}  // namespace
}  // namespace hachi::server
