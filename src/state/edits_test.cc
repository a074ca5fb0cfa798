#include "state/edits.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "state/row_codec.h"
#include "state/testing.h"

namespace hachi::state {
namespace {

using testing::MakeJob;
using testing::Started;

// Jobs 1 pending, 2 running, 3 completed, 4 pending and held; node n1 up.
StateImage BaseImage() {
  StateImage image;
  image.jobs[1] = MakeJob(1);
  image.jobs[2] = MakeJob(2).State(JobState::kRunning);
  image.jobs[3] = MakeJob(3).State(JobState::kCompleted);
  image.jobs[4] = MakeJob(4).Held();
  image.nodes["n1"] = testing::FullNode("n1");
  image.last_job_id = 9;  // ids 5..9 were used by jobs purged since
  return image;
}

std::string Dump(const StateImage& image) {
  std::string out = "last=" + std::to_string(image.last_job_id) + "\n";
  for (const auto& [id, job] : image.jobs) out += EncodeJobRow(job) + "\n";
  for (const auto& [name, node] : image.nodes) out += EncodeNodeRow(node) + "\n";
  return out;
}

sched::JobRequest Req(int gpus) {
  sched::JobRequest r;
  r.gpus = gpus;
  r.partition = "gpu";
  r.time_limit = 600;
  return r;
}

struct EditCase {
  const char* name;
  Edit edit;
  StatusCode code;      // kOk: applied
  const char* message;  // part of the error
};

class ApplyEditTest : public ::testing::TestWithParam<EditCase> {};

TEST_P(ApplyEditTest, ChecksTransition) {
  const EditCase& c = GetParam();
  StateImage image = BaseImage();
  const std::string before = Dump(image);
  EXPECT_EQ(CheckEdit(image, c.edit).code(), c.code);
  EXPECT_EQ(Dump(image), before);  // CheckEdit never changes anything
  Status s = ApplyEdit(&image, c.edit);
  EXPECT_EQ(s.code(), c.code) << s.ToString();
  EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
  if (!s.ok()) {
    EXPECT_EQ(Dump(image), before);
  } else {
    EXPECT_NE(Dump(image), before);
  }
}

const NodeStateChanged kDrain{"n1", NodeState::kDrained, "maintenance", 50};

NodeUpserted Reregistered(std::string address) {
  NodeRecord node = testing::FullNode("n1");
  node.address = std::move(address);
  return NodeUpserted{node};
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ApplyEditTest,
    ::testing::Values(
        EditCase{"SubmitNext", MakeJob(10).Submitted(), StatusCode::kOk, ""},
        EditCase{"SubmitHeld", MakeJob(12).Held().Submitted(), StatusCode::kOk, ""},
        // Concurrent submits reserve ids first and may commit out of order: an unused
        // id below the last one is accepted (the server never hands out an id twice).
        EditCase{"SubmitOutOfOrder", MakeJob(7).Submitted(), StatusCode::kOk, ""},
        EditCase{"SubmitDuplicate", MakeJob(2).Submitted(), StatusCode::kInvalidArgument,
                 "already submitted"},
        EditCase{"SubmitZero", MakeJob(0).Submitted(), StatusCode::kInvalidArgument,
                 "start at 1"},
        EditCase{"SubmitRunning", MakeJob(11).State(JobState::kRunning).Submitted(),
                 StatusCode::kInvalidArgument, "not PENDING"},
        EditCase{"StartPending", Started(1), StatusCode::kOk, ""},
        EditCase{"StartRunning", Started(2), StatusCode::kInvalidArgument,
                 "cannot start, it is RUNNING"},
        EditCase{"StartEnded", Started(3), StatusCode::kInvalidArgument,
                 "cannot start, it is COMPLETED"},
        EditCase{"StartHeld", Started(4), StatusCode::kInvalidArgument, "held"},
        EditCase{"StartMissing", Started(42), StatusCode::kNotFound, "job 42"},
        EditCase{"EndRunning", JobEnded{2, JobState::kFailed, 90, 1, 0, "exit 1"},
                 StatusCode::kOk, ""},
        EditCase{"CancelPending", JobEnded{1, JobState::kCancelled, 90, 0, 0, "by bob"},
                 StatusCode::kOk, ""},
        EditCase{"EndTwice", JobEnded{3, JobState::kFailed, 90, 0, 0, ""},
                 StatusCode::kInvalidArgument, "already ended"},
        EditCase{"EndNotFinal", JobEnded{2, JobState::kRunning, 90, 0, 0, ""},
                 StatusCode::kInvalidArgument, "not a final state"},
        EditCase{"EndMissing", JobEnded{42, JobState::kFailed, 90, 0, 0, ""},
                 StatusCode::kNotFound, "no such job"},
        EditCase{"RequeueRunning", JobRequeued{2, "node n1 down"}, StatusCode::kOk, ""},
        EditCase{"RequeuePending", JobRequeued{1, ""}, StatusCode::kInvalidArgument,
                 "cannot requeue"},
        // scontrol requeue of a finished batch job.
        EditCase{"RequeueFinished", JobRequeued{3, "requeued by alice"}, StatusCode::kOk,
                 ""},
        EditCase{"HoldPending", JobHeld{1, true}, StatusCode::kOk, ""},
        EditCase{"ReleaseHeld", JobHeld{4, false}, StatusCode::kOk, ""},
        EditCase{"HoldRunning", JobHeld{2, true}, StatusCode::kInvalidArgument,
                 "cannot hold"},
        // scontrol update: a pending job's request; never an ended job's.
        EditCase{"UpdatePending", JobUpdated{1, Req(3), "renamed", "a note"},
                 StatusCode::kOk, ""},
        EditCase{"UpdateRunningRequest", JobUpdated{2, Req(3), "renamed", ""},
                 StatusCode::kInvalidArgument, "only its time limit, name and comment"},
        EditCase{"UpdateEnded", JobUpdated{3, Req(3), "", ""},
                 StatusCode::kInvalidArgument, "it is COMPLETED"},
        EditCase{"UpdateMissing", JobUpdated{42, Req(3), "", ""}, StatusCode::kNotFound,
                 "job 42"},
        EditCase{"NodeNew", NodeUpserted{testing::FullNode("n2")}, StatusCode::kOk, ""},
        EditCase{"NodeAgain", Reregistered("10.0.0.8:7070"), StatusCode::kOk, ""},
        EditCase{"NodeNoName", NodeUpserted{NodeRecord{}}, StatusCode::kInvalidArgument,
                 "empty name"},
        EditCase{"NodeDrain", kDrain, StatusCode::kOk, ""},
        // Burn-in runs only move forward.
        EditCase{"NodeBurnInNextRun",
                 NodeBurnInChanged{"n1", "", 5, BurnInPhase::kRunning, GpuSet()},
                 StatusCode::kOk, ""},
        EditCase{"NodeBurnInOlderRun",
                 NodeBurnInChanged{"n1", "", 3, BurnInPhase::kRunning, GpuSet()},
                 StatusCode::kInvalidArgument, "burn-in run 3 is older than run 4"},
        EditCase{"NodeBurnInMissing",
                 NodeBurnInChanged{"n9", "", 1, BurnInPhase::kRunning, GpuSet()},
                 StatusCode::kNotFound, "node n9"},
        EditCase{"NodeMissing", NodeStateChanged{"n9", NodeState::kDown, "", 0},
                 StatusCode::kNotFound, "node n9"},
        EditCase{"NodeGpuUnhealthy",
                 NodeHealthChanged{"n1", GpuSet::FromIndices({3}), {{3, "Xid 79"}}},
                 StatusCode::kOk, ""},
        EditCase{"NodeGpuReasonWithoutGpu",
                 NodeHealthChanged{"n1", GpuSet::FromIndices({3}), {{4, "Xid 79"}}},
                 StatusCode::kInvalidArgument, "GPU 4"},
        EditCase{"NodeHealthMissing", NodeHealthChanged{"n9", GpuSet(), {}},
                 StatusCode::kNotFound, "node n9"}),
    [](const ::testing::TestParamInfo<EditCase>& row) { return row.param.name; });

TEST(ApplyEdit, LifecycleKeepsLastJobId) {
  StateImage image;
  ASSERT_TRUE(ApplyEdit(&image, MakeJob(1).Submitted()).ok());
  ASSERT_TRUE(ApplyEdit(&image, MakeJob(2).Submitted()).ok());
  ASSERT_TRUE(ApplyEdit(&image, Started(1)).ok());
  EXPECT_EQ(image.jobs[1].state, JobState::kRunning);
  EXPECT_EQ(image.jobs[1].allocations.size(), 1u);
  ASSERT_TRUE(ApplyEdit(&image, JobRequeued{1, "node n1 down"}).ok());
  EXPECT_EQ(image.jobs[1].state, JobState::kPending);
  EXPECT_TRUE(image.jobs[1].allocations.empty());
  EXPECT_EQ(image.jobs[1].requeues, 1);
  EXPECT_EQ(image.jobs[1].reason, "node n1 down");
  ASSERT_TRUE(ApplyEdit(&image, Started(1, "n2")).ok());
  ASSERT_TRUE(
      ApplyEdit(&image, JobEnded{1, JobState::kTimeout, 3000, 0, 15, "time limit 1m"})
          .ok());
  const JobRecord& job = image.jobs[1];
  EXPECT_EQ(job.state, JobState::kTimeout);
  EXPECT_EQ(job.end_time, 3000);
  EXPECT_EQ(job.signal, 15);
  EXPECT_EQ(job.allocations[0].node, "n2");  // kept as history
  EXPECT_EQ(image.last_job_id, 2);
}

// A running job keeps the request it started with but its time limit (its agents are
// told), and its name and comment may change.
TEST(ApplyEdit, UpdateRunningChangesTimeLimitNameAndCommentOnly) {
  StateImage image = BaseImage();
  const sched::JobRequest req = image.jobs[2].req;
  ASSERT_TRUE(ApplyEdit(&image, JobUpdated{2, req, "renamed", "checked"}).ok());
  EXPECT_EQ(image.jobs[2].spec.name, "renamed");
  EXPECT_EQ(image.jobs[2].spec.comment, "checked");
  EXPECT_EQ(image.jobs[2].state, JobState::kRunning);
  sched::JobRequest longer = req;
  longer.time_limit += 60;
  ASSERT_TRUE(ApplyEdit(&image, JobUpdated{2, longer, "renamed", "checked"}).ok());
  EXPECT_EQ(image.jobs[2].req.time_limit, req.time_limit + 60);
  sched::JobRequest wider = longer;
  wider.gpus += 1;
  Status s = ApplyEdit(&image, JobUpdated{2, wider, "renamed", "checked"});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(image.jobs[2].req, longer);
}

// ---- job steps ----

using testing::MakeStep;

NodeAllocation OneGpu(std::string node) {
  return {std::move(node), GpuSet::FirstN(1), 4, 1024, 0, 0};
}

// Job 20 running since 2000 on n1 and n2, with step 0 completed and step 1 running;
// job 21 pending; job 22 requeued after a run at 2000 (its step 0 ended with it) and
// running again since 3000, no step yet; job 23 completed.
StateImage StepImage() {
  StateImage image;
  const std::vector<Edit> edits = {
      MakeJob(20).Submitted(),
      JobStarted{20, 2000, {OneGpu("n1"), OneGpu("n2")}},
      MakeStep(20, 0).Started(),
      StepEnded{{20, 2000, 0}, JobState::kCompleted, 2050, 0, 0, ""},
      MakeStep(20, 1).Nodes({"n2", "n1"}).Tasks(8).Started(),
      MakeJob(21).Submitted(),
      MakeJob(22).Submitted(),
      Started(22),
      MakeStep(22, 0).Started(),
      StepEnded{{22, 2000, 0}, JobState::kNodeFail, 2500, 0, 0, "node n1 down"},
      JobRequeued{22, "node n1 down"},
      JobStarted{22, 3000, {OneGpu("n3")}},
      MakeJob(23).Submitted(),
      Started(23),
      JobEnded{23, JobState::kCompleted, 2900, 0, 0, ""},
  };
  for (const Edit& e : edits) {
    Status s = ApplyEdit(&image, e);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  return image;
}

std::string DumpWithSteps(const StateImage& image) {
  std::string out = Dump(image);
  for (const auto& [key, step] : image.steps) out += EncodeStepRow(step) + "\n";
  return out;
}

class StepEditTest : public ::testing::TestWithParam<EditCase> {};

TEST_P(StepEditTest, ChecksTransition) {
  const EditCase& c = GetParam();
  StateImage image = StepImage();
  const std::string before = DumpWithSteps(image);
  EXPECT_EQ(CheckEdit(image, c.edit).code(), c.code);
  EXPECT_EQ(DumpWithSteps(image), before);
  Status s = ApplyEdit(&image, c.edit);
  EXPECT_EQ(s.code(), c.code) << s.ToString();
  EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
  if (!s.ok()) {
    EXPECT_EQ(DumpWithSteps(image), before);
  } else {
    EXPECT_NE(DumpWithSteps(image), before);
  }
}

StepEnded EndStep(StepKey key, JobState state, Time end_time = 2100) {
  return StepEnded{key, state, end_time, 0, 0, ""};
}

INSTANTIATE_TEST_SUITE_P(
    Cases, StepEditTest,
    ::testing::Values(
        EditCase{"StartNext", MakeStep(20, 2).Started(), StatusCode::kOk, ""},
        EditCase{"StartOnBothNodes", MakeStep(20, 2).Nodes({"n1", "n2"}).Started(),
                 StatusCode::kOk, ""},
        // A requeued job's new run numbers its steps from 0 again.
        EditCase{"StartFirstOfNewRun", MakeStep(22, 0, 3000).Nodes({"n3"}).Started(),
                 StatusCode::kOk, ""},
        EditCase{"StartMissingJob", MakeStep(42, 0).Started(), StatusCode::kNotFound,
                 "step 42.0: no such job"},
        EditCase{"StartJobPending", MakeStep(21, 0).Started(),
                 StatusCode::kInvalidArgument, "step 21.0: its job is PENDING"},
        EditCase{"StartJobEnded", MakeStep(23, 0).Started(), StatusCode::kInvalidArgument,
                 "step 23.0: its job is COMPLETED, not RUNNING"},
        EditCase{"StartInEarlierRun", MakeStep(22, 1).Started(),
                 StatusCode::kInvalidArgument,
                 "step 22.1: for the run started at 2000, but the job's run started at "
                 "3000"},
        EditCase{"StartTwice", MakeStep(20, 1).Nodes({"n2", "n1"}).Started(),
                 StatusCode::kInvalidArgument, "step 20.1: already started"},
        EditCase{"StartWithGap", MakeStep(20, 3).Started(), StatusCode::kInvalidArgument,
                 "step 20.3: out of order, the run's next step is 2"},
        EditCase{"StartNegative", MakeStep(20, -1).Started(),
                 StatusCode::kInvalidArgument, "out of order"},
        EditCase{"StartEnded", MakeStep(20, 2).State(JobState::kCompleted).Started(),
                 StatusCode::kInvalidArgument, "started as COMPLETED, not RUNNING"},
        EditCase{"StartWithEndTime", MakeStep(20, 2).EndTime(2100).Started(),
                 StatusCode::kInvalidArgument, "started with an end time"},
        EditCase{"StartBeforeRun", MakeStep(20, 2).StartTime(1999).Started(),
                 StatusCode::kInvalidArgument, "before its job's run (2000)"},
        EditCase{"StartNoTasks", MakeStep(20, 2).Tasks(0).Started(),
                 StatusCode::kInvalidArgument, "needs at least one task, got 0"},
        EditCase{"StartNoNodes", MakeStep(20, 2).Nodes({}).Started(),
                 StatusCode::kInvalidArgument, "runs on no node"},
        EditCase{"StartForeignNode", MakeStep(20, 2).Nodes({"n1", "n3"}).Started(),
                 StatusCode::kInvalidArgument, "node n3 is not one of its job's"},
        EditCase{"StartNodeTwice", MakeStep(20, 2).Nodes({"n1", "n1"}).Started(),
                 StatusCode::kInvalidArgument, "node n1 is listed twice"},
        EditCase{"EndRunning", EndStep({20, 2000, 1}, JobState::kCompleted),
                 StatusCode::kOk, ""},
        EditCase{"EndCancelled",
                 StepEnded{{20, 2000, 1}, JobState::kCancelled, 2100, 0, 15, "scancel"},
                 StatusCode::kOk, ""},
        EditCase{"EndMissing", EndStep({20, 2000, 2}, JobState::kCompleted),
                 StatusCode::kNotFound, "step 20.2: no such step"},
        EditCase{"EndOtherRun", EndStep({20, 3000, 1}, JobState::kCompleted),
                 StatusCode::kNotFound, "no such step"},
        EditCase{"EndTwice", EndStep({20, 2000, 0}, JobState::kFailed),
                 StatusCode::kInvalidArgument, "step 20.0: already ended (COMPLETED)"},
        EditCase{"EndAsRunning", EndStep({20, 2000, 1}, JobState::kRunning),
                 StatusCode::kInvalidArgument,
                 "cannot end as RUNNING, not a final state"},
        EditCase{"EndAsPending", EndStep({20, 2000, 1}, JobState::kPending),
                 StatusCode::kInvalidArgument, "cannot end as PENDING"},
        EditCase{"EndBeforeStart", EndStep({20, 2000, 1}, JobState::kCompleted, 2009),
                 StatusCode::kInvalidArgument, "ends at 2009, before it started (2010)"}),
    [](const ::testing::TestParamInfo<EditCase>& row) { return row.param.name; });

TEST(StepEdits, NumberingIsPerRun) {
  StateImage image = StepImage();
  EXPECT_EQ(NextStepNumber(image, 20, 2000), 2);
  EXPECT_EQ(NextStepNumber(image, 22, 2000), 1);  // the earlier run
  EXPECT_EQ(NextStepNumber(image, 22, 3000), 0);  // the current one
  EXPECT_EQ(NextStepNumber(image, 21, 0), 0);
  EXPECT_EQ(NextStepNumber(image, 20, 1999), 0);  // neighbours of a run's keys
  EXPECT_EQ(NextStepNumber(image, 20, 2001), 0);
  EXPECT_EQ(NextStepNumber(image, 19, 2000), 0);
  EXPECT_EQ(NextStepNumber(image, 99, 0), 0);
  for (int step = 2; step < 5; ++step) {
    ASSERT_TRUE(ApplyEdit(&image, MakeStep(20, step).Started()).ok()) << step;
  }
  EXPECT_EQ(NextStepNumber(image, 20, 2000), 5);
}

TEST(StepEdits, RunningStepsAndEnd) {
  StateImage image = StepImage();
  ASSERT_TRUE(ApplyEdit(&image, MakeStep(20, 2).Started()).ok());
  ASSERT_TRUE(ApplyEdit(&image, MakeStep(20, 3).Started()).ok());
  EXPECT_EQ(RunningSteps(image, 20, 2000),
            (std::vector<StepKey>{{20, 2000, 1}, {20, 2000, 2}, {20, 2000, 3}}));
  EXPECT_TRUE(RunningSteps(image, 22, 2000).empty());
  EXPECT_TRUE(RunningSteps(image, 22, 3000).empty());
  EXPECT_TRUE(RunningSteps(image, 20, 1000).empty());

  ASSERT_TRUE(
      ApplyEdit(&image, StepEnded{{20, 2000, 2}, JobState::kFailed, 2200, 3, 0, "exit 3"})
          .ok());
  EXPECT_EQ(RunningSteps(image, 20, 2000),
            (std::vector<StepKey>{{20, 2000, 1}, {20, 2000, 3}}));
  const StepRecord& ended = image.steps.at({20, 2000, 2});
  EXPECT_EQ(ended.state, JobState::kFailed);
  EXPECT_EQ(ended.end_time, 2200);
  EXPECT_EQ(ended.exit_code, 3);
  EXPECT_EQ(ended.signal, 0);
  EXPECT_EQ(ended.reason, "exit 3");
  EXPECT_EQ(ended.start_time, 2010);  // the rest as it started
  EXPECT_EQ(ended.name, "train");
  // Numbers are never reused, ended or not.
  EXPECT_EQ(NextStepNumber(image, 20, 2000), 4);
  const StepRecord& started = image.steps.at({20, 2000, 1});
  EXPECT_EQ(started.nodes, (std::vector<std::string>{"n2", "n1"}));
  EXPECT_EQ(started.ntasks, 8);
}

}  // namespace
}  // namespace hachi::state
