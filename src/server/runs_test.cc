#include "server/runs.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
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
  if (row.cancel_requested) info.state.phase = RunPhase::kCancelling;
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

// The run's lifecycle, written out here on its own so that a change to runs.cc's table
// shows as a failing row.
using P = RunPhase;
using E = RunEvent;

constexpr P kPhases[] = {P::kRunning,
                         P::kRequeueing,
                         P::kPreemptedRequeueing,
                         P::kAllocationDone,
                         P::kAllocationDoneRequeueing,
                         P::kAllocationDonePreempted,
                         P::kCancelling};
constexpr E kPhaseEvents[] = {E::kCancelAsked, E::kRequeueAsked, E::kPreemptRequeue,
                              E::kPreemptCancel, E::kAllocationCompleted};

struct TransitionRow {
  std::string name;
  P from;
  E event;
  P to;
};

const std::vector<TransitionRow>& Rows() {
  static const std::vector<TransitionRow> rows = {
      {"running_cancel", P::kRunning, E::kCancelAsked, P::kCancelling},
      {"running_requeue", P::kRunning, E::kRequeueAsked, P::kRequeueing},
      {"running_preempt_requeue", P::kRunning, E::kPreemptRequeue,
       P::kPreemptedRequeueing},
      {"running_preempt_cancel", P::kRunning, E::kPreemptCancel, P::kCancelling},
      {"running_allocation_completed", P::kRunning, E::kAllocationCompleted,
       P::kAllocationDone},
      {"requeueing_cancel_wins", P::kRequeueing, E::kCancelAsked, P::kCancelling},
      {"requeueing_preempted", P::kRequeueing, E::kPreemptRequeue,
       P::kPreemptedRequeueing},
      {"requeueing_preempt_cancel", P::kRequeueing, E::kPreemptCancel, P::kCancelling},
      {"requeueing_allocation_completed", P::kRequeueing, E::kAllocationCompleted,
       P::kAllocationDoneRequeueing},
      {"preempted_cancel", P::kPreemptedRequeueing, E::kCancelAsked, P::kCancelling},
      {"preempted_allocation_completed", P::kPreemptedRequeueing, E::kAllocationCompleted,
       P::kAllocationDonePreempted},
      {"allocation_done_cancel", P::kAllocationDone, E::kCancelAsked, P::kCancelling},
      {"allocation_done_requeue", P::kAllocationDone, E::kRequeueAsked,
       P::kAllocationDoneRequeueing},
      {"allocation_done_preempt_requeue", P::kAllocationDone, E::kPreemptRequeue,
       P::kAllocationDonePreempted},
      {"allocation_done_preempt_cancel", P::kAllocationDone, E::kPreemptCancel,
       P::kCancelling},
      {"allocation_done_requeueing_cancel", P::kAllocationDoneRequeueing, E::kCancelAsked,
       P::kCancelling},
      {"allocation_done_requeueing_preempt_requeue", P::kAllocationDoneRequeueing,
       E::kPreemptRequeue, P::kAllocationDonePreempted},
      {"allocation_done_requeueing_preempt_cancel", P::kAllocationDoneRequeueing,
       E::kPreemptCancel, P::kCancelling},
      {"allocation_done_preempted_cancel", P::kAllocationDonePreempted, E::kCancelAsked,
       P::kCancelling},
  };
  return rows;
}

class TransitionTest : public testing::TestWithParam<TransitionRow> {};

TEST_P(TransitionTest, LeadsWhereTheTableSays) {
  const TransitionRow& row = GetParam();
  for (bool fenced : {false, true}) {  // the facts ride along unchanged
    const RunState from{row.from, fenced, !fenced};
    Result<RunState> to = Transition(from, row.event);
    ASSERT_TRUE(to.ok()) << to.status().message();
    EXPECT_EQ(*to, (RunState{row.to, fenced, !fenced}));
  }
}

INSTANTIATE_TEST_SUITE_P(Rows, TransitionTest, testing::ValuesIn(Rows()),
                         [](const testing::TestParamInfo<TransitionRow>& p) {
                           return p.param.name;
                         });

TEST(TransitionTest, TheTableIsTheseRowsExactly) {
  ASSERT_EQ(RunTransitions().size(), Rows().size());
  for (const TransitionRow& row : Rows()) {
    bool found = false;
    for (const RunTransition& t : RunTransitions()) {
      found |= t.from == row.from && t.event == row.event && t.to == row.to;
    }
    EXPECT_TRUE(found) << row.name;
  }
}

TEST(TransitionTest, EveryOtherPairIsRefusedAndChangesNothing) {
  std::set<std::pair<P, E>> allowed;
  for (const TransitionRow& row : Rows()) allowed.insert({row.from, row.event});
  int refused = 0;
  for (P from : kPhases) {
    for (E event : kPhaseEvents) {
      if (allowed.count({from, event})) continue;
      ++refused;
      Result<RunState> to = Transition(RunState{from}, event);
      EXPECT_FALSE(to.ok()) << RunPhaseName(from) << " + " << RunEventName(event);
      if (!to.ok()) {
        EXPECT_EQ(to.status().code(), StatusCode::kBusy);
      }
      RunInfo info;
      info.state.phase = from;
      EXPECT_FALSE(info.Take(event));
      EXPECT_EQ(info.state, RunState{from});
    }
  }
  EXPECT_EQ(refused, 7 * 5 - 19);
}

TEST(TransitionTest, ACancelledRunTakesNoOtherAsk) {
  for (E event : kPhaseEvents) {
    EXPECT_FALSE(Transition(RunState{P::kCancelling}, event).ok()) << RunEventName(event);
  }
}

TEST(TransitionTest, FactsAreSetOnceInEveryPhaseAndKeepThePhase) {
  for (P phase : kPhases) {
    RunInfo info;
    info.state.phase = phase;
    EXPECT_TRUE(info.Take(E::kFenceExpired)) << RunPhaseName(phase);
    EXPECT_EQ(info.state, (RunState{phase, true, false}));
    EXPECT_FALSE(info.Take(E::kFenceExpired)) << RunPhaseName(phase);
    EXPECT_TRUE(info.Take(E::kBatchPartExited)) << RunPhaseName(phase);
    EXPECT_EQ(info.state, (RunState{phase, true, true}));
    EXPECT_FALSE(info.Take(E::kBatchPartExited)) << RunPhaseName(phase);
    EXPECT_EQ(info.state, (RunState{phase, true, true}));
  }
}

// How a run ends from its phase: RunEnd's decision on its own.
struct EndKindRow {
  std::string name;
  P phase;
  bool lost;
  bool job_requeues;
  RunEndKind want;
};

class EndKindTest : public testing::TestWithParam<EndKindRow> {};

TEST_P(EndKindTest, Decides) {
  const EndKindRow& row = GetParam();
  EXPECT_EQ(EndKindOf(row.phase, row.lost, row.job_requeues), row.want);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, EndKindTest,
    testing::Values(
        EndKindRow{"running", P::kRunning, false, true, RunEndKind::kWorstExit},
        EndKindRow{"running_lost", P::kRunning, true, false, RunEndKind::kWorstExit},
        EndKindRow{"running_lost_requeues", P::kRunning, true, true,
                   RunEndKind::kRequeueLost},
        EndKindRow{"requeueing", P::kRequeueing, false, false, RunEndKind::kRequeue},
        EndKindRow{"requeueing_lost", P::kRequeueing, true, true, RunEndKind::kRequeue},
        EndKindRow{"preempted", P::kPreemptedRequeueing, true, false,
                   RunEndKind::kRequeue},
        EndKindRow{"allocation_done", P::kAllocationDone, true, true,
                   RunEndKind::kAllocationExit},
        EndKindRow{"allocation_done_requeueing", P::kAllocationDoneRequeueing, false,
                   true, RunEndKind::kAllocationExit},
        EndKindRow{"allocation_done_preempted", P::kAllocationDonePreempted, false, false,
                   RunEndKind::kAllocationExit},
        EndKindRow{"cancelling", P::kCancelling, false, false, RunEndKind::kWorstExit},
        EndKindRow{"cancelling_lost_requeues", P::kCancelling, true, true,
                   RunEndKind::kWorstExit}),
    [](const testing::TestParamInfo<EndKindRow>& p) { return p.param.name; });

// The edit RunEnd writes, row by row as Controller::RunEndLocked wrote it from the
// flags before the phases (cancel_requested, requeue_on_exit, allocation_done).
struct RunEndRow {
  std::string name;
  P phase;
  std::optional<api::JobExit> worst;
  bool job_requeues = false;
  std::string requeue_reason;
  int allocation_exit = 0;
  // Want: a JobRequeued with this reason, else a JobEnded in this state and reason.
  std::optional<std::string> want_requeued;
  state::JobState want_state = state::JobState::kCompleted;
  std::string want_reason;
  int want_code = 0;
};

class RunEndTest : public testing::TestWithParam<RunEndRow> {};

TEST_P(RunEndTest, Writes) {
  const RunEndRow& row = GetParam();
  state::JobRecord job;
  job.id = 4;
  job.spec.requeue = row.job_requeues;
  RunInfo info;
  info.state.phase = row.phase;
  info.worst = row.worst;
  info.requeue_reason = row.requeue_reason;
  info.cancel_reason = "cancelled by alice";
  info.allocation_exit = row.allocation_exit;
  info.gpu_memory_peak_mib = 512;
  const state::Edit edit = RunEnd(job, info, 77);
  if (row.want_requeued) {
    const auto* r = std::get_if<state::JobRequeued>(&edit);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->id, 4);
    EXPECT_EQ(r->reason, *row.want_requeued);
    return;
  }
  const auto* e = std::get_if<state::JobEnded>(&edit);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->id, 4);
  EXPECT_EQ(e->end_time, 77);
  EXPECT_EQ(e->state, row.want_state);
  EXPECT_EQ(e->reason, row.want_reason);
  EXPECT_EQ(e->exit_code, row.want_code);
  EXPECT_EQ(e->gpu_memory_peak_mib, 512);
}

RunEndRow Ended(std::string name, P phase, api::JobExit worst, bool job_requeues,
                std::string requeue_reason, int allocation_exit, state::JobState want,
                std::string want_reason, int want_code) {
  return RunEndRow{std::move(name),           phase,           worst,        job_requeues,
                   std::move(requeue_reason), allocation_exit, std::nullopt, want,
                   std::move(want_reason),    want_code};
}

RunEndRow Requeued(std::string name, P phase, api::JobExit worst, bool job_requeues,
                   std::string requeue_reason, std::string want) {
  return RunEndRow{std::move(name),
                   phase,
                   worst,
                   job_requeues,
                   std::move(requeue_reason),
                   0,
                   std::move(want),
                   state::JobState::kCompleted,
                   "",
                   0};
}

const api::JobExit kLost = Exit(api::ExitKind::kLost, 0, 0, "node n1 down");
const api::JobExit kFailed = Exit(api::ExitKind::kExited, 2);
const api::JobExit kOk = Exit(api::ExitKind::kExited, 0);

INSTANTIATE_TEST_SUITE_P(
    Rows, RunEndTest,
    testing::Values(
        Ended("completed", P::kRunning, kOk, false, "", 0, state::JobState::kCompleted,
              "", 0),
        Ended("failed", P::kRunning, kFailed, true, "", 0, state::JobState::kFailed,
              "exit code 2", 2),
        Ended("lost", P::kRunning, kLost, false, "", 0, state::JobState::kNodeFail,
              "node n1 down", 0),
        Requeued("lost_requeues", P::kRunning, kLost, true, "", "node n1 down"),
        Requeued("requeue_asked", P::kRequeueing, kFailed, false, "requeued by bob",
                 "requeued by bob"),
        Requeued("preempted_without_reason", P::kPreemptedRequeueing, kFailed, false, "",
                 "preempted"),
        Requeued("requeue_outranks_lost", P::kRequeueing, kLost, true, "GPU 3 fell off",
                 "GPU 3 fell off"),
        Ended("allocation_exit0", P::kAllocationDone, kFailed, false, "", 0,
              state::JobState::kCompleted, "", 0),
        Ended("allocation_exit5", P::kAllocationDone, kOk, false, "", 5,
              state::JobState::kFailed, "exit code 5", 5),
        Ended("allocation_outranks_requeue", P::kAllocationDoneRequeueing, kLost, true,
              "requeued by bob", 3, state::JobState::kFailed, "exit code 3", 3),
        Ended("allocation_outranks_preemption", P::kAllocationDonePreempted, kOk, false,
              "", 0, state::JobState::kCompleted, "", 0),
        Ended("cancel_outranks_requeue_when_lost", P::kCancelling, kLost, true,
              "requeued by bob", 0, state::JobState::kCancelled, "cancelled by alice", 0),
        Ended("cancelled_but_completed", P::kCancelling, kOk, true, "", 4,
              state::JobState::kCompleted, "", 0)),
    [](const testing::TestParamInfo<RunEndRow>& p) { return p.param.name; });

}  // namespace
}  // namespace hachi::server
