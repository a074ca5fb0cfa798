// Job steps on the server: Controller::CreateStep's layout and refusals, the
// agents' reports, the step's end and its record, and the steps of a job that ends.
#include <gtest/gtest.h>

#include "server/auth.h"
#include "server/controller.h"
#include "server/testing.h"

namespace hachi::server {
namespace {

using api::ExitKind;
using state::JobState;
using testing::Harness;
using testing::kAlice;
using testing::MakeSubmit;

const Caller kBob{"bob", 1001, 1001, true, false};

api::StepRequest Srun(std::vector<std::string> argv, int ntasks = 0, int nodes = 0) {
  api::StepRequest r;
  r.argv = std::move(argv);
  r.ntasks = ntasks;
  r.nodes = nodes;
  r.workdir = "/tmp";
  return r;
}

api::StepReports Done(const state::StepRecord& s, std::vector<api::TaskExit> exits,
                      std::string out = "", int64_t seq = 0) {
  api::StepReport r;
  r.job = s.job;
  r.job_start = s.job_start;
  r.step = s.step;
  r.seq = seq;
  if (!out.empty()) r.chunks.push_back({exits.empty() ? 0 : exits[0].task, 1, out, 0});
  r.exits = std::move(exits);
  r.done = true;
  return api::StepReports{"", {r}};
}

api::TaskExit Exited(int task, int code) {
  return api::TaskExit{task, ExitKind::kExited, code, 0, "", ""};
}

class StepsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    h_.Register("n1");
    h_.Register("n2");
    job_ = h_.Submit(MakeSubmit().Gang(2, 8));
    h_->RunCycle();
    ASSERT_EQ(h_.StateOf(job_), JobState::kRunning);
    h_.Work("n1");
    h_.Work("n2");
  }
  Harness h_;
  state::JobId job_ = 0;
};

TEST_F(StepsTest, FourTasksOnTwoNodesInBlocks) {
  Result<state::StepRecord> s =
      h_->steps().CreateStep(job_, Srun({"hostname"}, 4), kAlice);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->step, 0);
  EXPECT_EQ(s->nodes, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(s->ntasks, 4);
  EXPECT_EQ(s->name, "hostname");
  EXPECT_EQ(s->state, JobState::kRunning);
  const AgentWork w1 = h_.Work("n1");
  const AgentWork w2 = h_.Work("n2");
  ASSERT_EQ(w1.steps.size(), 1u);
  ASSERT_EQ(w2.steps.size(), 1u);
  EXPECT_EQ(w1.steps[0].tasks, (std::vector<int>{0, 1}));
  EXPECT_EQ(w2.steps[0].tasks, (std::vector<int>{2, 3}));
  EXPECT_EQ(w2.steps[0].node_index, 1);
  EXPECT_EQ(w2.steps[0].tasks_per_node, (std::vector<int>{2, 2}));
  EXPECT_EQ(w2.steps[0].ntasks, 4);
  // The next step is 1; three tasks go 2 + 1.
  Result<state::StepRecord> s1 = h_->steps().CreateStep(job_, Srun({"true"}, 3), kAlice);
  ASSERT_TRUE(s1.ok());
  EXPECT_EQ(s1->step, 1);
  EXPECT_EQ(h_.Work("n2").steps[0].tasks, (std::vector<int>{2}));
  // One task: one node (Slurm: "can't run 1 processes on 2 nodes").
  Result<state::StepRecord> s2 = h_->steps().CreateStep(job_, Srun({"true"}, 1), kAlice);
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(s2->nodes, std::vector<std::string>{"n1"});
  EXPECT_TRUE(h_.Work("n2").steps.empty());
}

TEST_F(StepsTest, Refusals) {
  EXPECT_EQ(h_->steps().CreateStep(job_, Srun({"x"}), kBob).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(h_->steps().CreateStep(999, Srun({"x"}), kAlice).status().code(),
            StatusCode::kNotFound);
  Status too_many = h_->steps().CreateStep(job_, Srun({"x"}, 0, 3), kAlice).status();
  EXPECT_EQ(too_many.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_many.message().find("has 2"), std::string::npos) << too_many.message();
  api::StepRequest gpus = Srun({"x"}, 4);
  gpus.gpus_per_task = 8;  // 2 tasks x 8 on a node where the job has 8
  Status g = h_->steps().CreateStep(job_, gpus, kAlice).status();
  EXPECT_EQ(g.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.message().find("--gpus-per-task=8"), std::string::npos) << g.message();
  api::StepRequest w = Srun({"x"});
  w.node_list = {"n9"};
  EXPECT_EQ(h_->steps().CreateStep(job_, w, kAlice).status().code(),
            StatusCode::kInvalidArgument);
  const state::JobId pending = h_.Submit(MakeSubmit().Hold());
  EXPECT_EQ(h_->steps().CreateStep(pending, Srun({"x"}), kAlice).status().code(),
            StatusCode::kBusy);
  // Nothing was recorded by the refusals.
  EXPECT_TRUE(h_->steps().Steps(job_).empty());
}

TEST_F(StepsTest, EndsWhenEveryNodeIsDoneWithTheWorstExit) {
  Result<state::StepRecord> s = h_->steps().CreateStep(job_, Srun({"x"}, 4), kAlice);
  ASSERT_TRUE(s.ok());
  Result<std::vector<api::StepAck>> a1 =
      h_->steps().ReportSteps("n1", Done(*s, {Exited(0, 0), Exited(1, 0)}, "hi\n"));
  ASSERT_TRUE(a1.ok()) << a1.status().ToString();
  ASSERT_EQ(a1->size(), 1u);
  EXPECT_EQ((*a1)[0].next, 3);
  EXPECT_FALSE((*a1)[0].gone);
  EXPECT_EQ(h_->steps().StepOf(job_, 0, kAlice)->state, JobState::kRunning);
  ASSERT_TRUE(h_->steps().ReportSteps("n2", Done(*s, {Exited(2, 0), Exited(3, 7)})).ok());
  Result<state::StepRecord> ended = h_->steps().StepOf(job_, 0, kAlice);
  ASSERT_TRUE(ended.ok());
  EXPECT_EQ(ended->state, JobState::kFailed);
  EXPECT_EQ(ended->exit_code, 7);
  EXPECT_GT(ended->end_time, 0);
  // srun reads the output, then the end with every task's exit.
  Result<api::StepOutput> out = h_->steps().ReadStepOutput(job_, 0, 0, kAlice);
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->chunks.size(), 1u);
  EXPECT_EQ(out->chunks[0].data, "hi\n");
  EXPECT_FALSE(out->done) << "output first";
  out = h_->steps().ReadStepOutput(job_, 0, out->next, kAlice);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->done);
  ASSERT_EQ(out->exits.size(), 4u);
  EXPECT_EQ(out->exits[3].exit_code, 7);
  EXPECT_EQ(out->exits[3].node, "n2");
  // A report for the ended step: gone.
  Result<std::vector<api::StepAck>> late = h_->steps().ReportSteps("n2", Done(*s, {}));
  ASSERT_TRUE(late.ok());
  EXPECT_TRUE((*late)[0].gone);
  // Someone else cannot read it.
  EXPECT_EQ(h_->steps().ReadStepOutput(job_, 0, 0, kBob).status().code(),
            StatusCode::kPermissionDenied);
}

TEST_F(StepsTest, KillOnBadExitStopsTheOthers) {
  api::StepRequest r = Srun({"x"}, 2);
  r.kill_on_bad_exit = true;
  Result<state::StepRecord> s = h_->steps().CreateStep(job_, r, kAlice);
  ASSERT_TRUE(s.ok());
  h_.Work("n1");
  h_.Work("n2");
  api::StepReports bad = Done(*s, {Exited(0, 1)});
  bad.steps[0].done = true;
  ASSERT_TRUE(h_->steps().ReportSteps("n1", bad).ok());
  for (const char* n : {"n1", "n2"}) {
    const AgentWork w = h_.Work(n);
    ASSERT_EQ(w.step_signals.size(), 1u) << n;
    EXPECT_TRUE(w.step_signals[0].cancel);
    EXPECT_EQ(w.step_signals[0].step, s->step);
  }
}

TEST_F(StepsTest, SignalAndCancelGoToTheStepsNodes) {
  Result<state::StepRecord> s = h_->steps().CreateStep(job_, Srun({"x"}, 2), kAlice);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(h_->steps().SignalStep(job_, 0, 2, false, kAlice).ok());
  ASSERT_TRUE(h_->steps().SignalStep(job_, 0, 0, true, kAlice).ok());
  const AgentWork w = h_.Work("n2");
  ASSERT_EQ(w.step_signals.size(), 2u);
  EXPECT_EQ(w.step_signals[0].signal, 2);
  EXPECT_TRUE(w.step_signals[1].cancel);
  EXPECT_EQ(h_->steps().SignalStep(job_, 5, 2, false, kAlice).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(h_->steps().SignalStep(job_, 0, 2, false, kBob).code(),
            StatusCode::kPermissionDenied);
}

TEST_F(StepsTest, TheJobsEndEndsItsSteps) {
  Result<state::StepRecord> s =
      h_->steps().CreateStep(job_, Srun({"sleep", "100"}, 2), kAlice);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(h_->jobs().Cancel(job_, kAlice).ok());
  h_.Exit("n1", job_, 0, ExitKind::kCancelled);
  h_.Exit("n2", job_, 0, ExitKind::kCancelled);
  ASSERT_EQ(h_.StateOf(job_), JobState::kCancelled);
  std::vector<state::StepRecord> steps = h_->steps().Steps(job_);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].state, JobState::kCancelled);
  EXPECT_NE(steps[0].reason.find("ended (CANCELLED)"), std::string::npos)
      << steps[0].reason;
  // srun waiting on it is not done while a node may still send what its tasks wrote
  // before the end (a requeue's checkpoint line): the agents' last words come, then
  // it is done.
  Result<api::StepOutput> out = h_->steps().ReadStepOutput(job_, 0, 0, kAlice);
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(out->done);
  EXPECT_EQ(out->step.state, JobState::kCancelled);
  Result<std::vector<api::StepAck>> acks = h_->steps().ReportSteps(
      "n1", Done(steps[0], {Exited(0, 143)}, "caught SIGTERM, saved\n"));
  ASSERT_TRUE(acks.ok());
  EXPECT_TRUE((*acks)[0].gone);  // the agent sends no more
  out = h_->steps().ReadStepOutput(job_, 0, 0, kAlice);
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->chunks.size(), 1u);
  EXPECT_EQ(out->chunks[0].data, "caught SIGTERM, saved\n");
  EXPECT_FALSE(out->done);  // n2 has not said its last word
  api::StepReports partial = Done(steps[0], {});
  partial.steps[0].done = false;  // what a node sends before its tasks ended
  ASSERT_TRUE(h_->steps().ReportSteps("n2", partial).ok());
  out = h_->steps().ReadStepOutput(job_, 0, out->next, kAlice);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->done) << "a report after the end is its node's last word";
}

TEST_F(StepsTest, AnAgentThatComesBackWithoutTheStepFailsIt) {
  Result<state::StepRecord> s = h_->steps().CreateStep(job_, Srun({"x"}, 2), kAlice);
  ASSERT_TRUE(s.ok());
  // n2's agent restarted: it registers without the step (and without the job, which
  // the job's own reconciliation handles).
  api::AgentRegistration reg = testing::MakeAgent("n2", 5);
  reg.instance = "another";
  reg.running = {job_};
  ASSERT_TRUE(h_->nodes().Register(reg).ok());
  Result<state::StepRecord> after = h_->steps().StepOf(job_, 0, kAlice);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state, JobState::kFailed);
  EXPECT_NE(after->reason.find("registered again without it"), std::string::npos);
}

}  // namespace
}  // namespace hachi::server

namespace hachi::server {
namespace {

// Job credentials (server/auth.h): the launch carries one; it makes its bearer the job's
// user while that run runs, and nothing once it ended or when forged.
TEST(JobCredential, ValidOnlyForItsRunningRun) {
  ControllerOptions o;
  o.credential_key = "cluster-secret";
  testing::Harness h(o);
  h.Register("n1");
  const state::JobId id = h.Submit(testing::MakeSubmit());
  h->RunCycle();
  const AgentWork w = h.Work("n1");
  ASSERT_EQ(w.launch.size(), 1u);
  const std::string cred = w.launch[0].credential;
  ASSERT_EQ(cred.rfind("hachijob_" + std::to_string(id) + "_", 0), 0u) << cred;
  Result<Caller> who = h->tokens().Authenticate(cred);
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(who->user, "alice");
  EXPECT_EQ(who->uid, testing::kAlice.uid);
  EXPECT_TRUE(who->authenticated);
  EXPECT_FALSE(who->admin);
  std::string forged = cred;
  forged.back() = forged.back() == '0' ? '1' : '0';
  EXPECT_EQ(h->tokens().Authenticate(forged).status().code(),
            StatusCode::kUnauthenticated);
  // Another run of the same job (its start time) is not this one's.
  const std::string other =
      JobCredential("cluster-secret", id, w.launch[0].start_time + 1);
  EXPECT_EQ(h->tokens().Authenticate(other).status().code(),
            StatusCode::kUnauthenticated);
  h.Exit("n1", id, 0);
  Status ended = h->tokens().Authenticate(cred).status();
  EXPECT_EQ(ended.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(ended.message().find("no longer valid"), std::string::npos)
      << ended.message();
  // A server without a key gives none and takes none.
  testing::Harness plain;
  plain.Register("n1");
  plain.Submit(testing::MakeSubmit());
  plain->RunCycle();
  EXPECT_EQ(plain.Work("n1").launch[0].credential, "");
  EXPECT_EQ(plain->tokens().Authenticate(cred).status().code(),
            StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace hachi::server
