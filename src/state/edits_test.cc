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
        // scontrol requeue of a finished batch job (issue 17).
        EditCase{"RequeueFinished", JobRequeued{3, "requeued by alice"}, StatusCode::kOk,
                 ""},
        EditCase{"HoldPending", JobHeld{1, true}, StatusCode::kOk, ""},
        EditCase{"ReleaseHeld", JobHeld{4, false}, StatusCode::kOk, ""},
        EditCase{"HoldRunning", JobHeld{2, true}, StatusCode::kInvalidArgument,
                 "cannot hold"},
        // scontrol update (issue 17): a pending job's request; never an ended job's.
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

}  // namespace
}  // namespace hachi::state
