// Controller::Signal and Controller::Requeue (scancel --signal, scontrol
// requeue), driven as agents and users do (server/testing.h's Harness).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/job_errors.h"
#include "server/controller.h"
#include "server/testing.h"

namespace hachi::server {
namespace {

using api::ExitKind;
using state::JobState;
using testing::Harness;
using testing::kAlice;
using testing::kRoot;
using testing::MakeSubmit;

const Caller kBob{"bob", 1001, 1001, true, false};

TEST(JobControl, SignalGoesToEveryNodeOrTheBatchShellsAlone) {
  Harness h;
  h.Register("n1");
  h.Register("n2");
  const state::JobId id = h.Submit(MakeSubmit().Gang(2, 8));
  h->RunCycle();
  ASSERT_EQ(h.StateOf(id), JobState::kRunning);
  ASSERT_EQ(h.Work("n1").launch.size(), 1u);
  ASSERT_EQ(h.Work("n2").launch.size(), 1u);

  ASSERT_TRUE(h->jobs().Signal(id, 10, api::SignalScope::kSteps, kAlice).ok());
  for (const char* node : {"n1", "n2"}) {
    const AgentWork w = h.Work(node);
    ASSERT_EQ(w.signals.size(), 1u) << node;
    EXPECT_EQ(w.signals[0].job, id);
    EXPECT_EQ(w.signals[0].signal, 10);
    EXPECT_EQ(w.signals[0].scope, api::SignalScope::kSteps);
  }
  // B: the batch shell runs on the first node (rank 0) only.
  ASSERT_TRUE(h->jobs().Signal(id, 12, api::SignalScope::kBatch, kRoot).ok());
  const AgentWork w1 = h.Work("n1");
  ASSERT_EQ(w1.signals.size(), 1u);
  EXPECT_EQ(w1.signals[0].scope, api::SignalScope::kBatch);
  EXPECT_TRUE(h.Work("n2").signals.empty());
  EXPECT_EQ(h.StateOf(id), JobState::kRunning) << "a signal does not end a job";
}

TEST(JobControl, SignalRefusals) {
  Harness h;
  h.Register("n1");
  const state::JobId pending = h.Submit(MakeSubmit().Hold());
  Status s = h->jobs().Signal(pending, 10, api::SignalScope::kAll, kAlice);
  EXPECT_EQ(s.code(), StatusCode::kBusy);  // 409
  EXPECT_EQ(s.message(), "job " + std::to_string(pending) +
                             " is PENDING; only running jobs can be signalled");
  const state::JobId running = h.Submit(MakeSubmit());
  h->RunCycle();
  ASSERT_EQ(h.StateOf(running), JobState::kRunning);
  EXPECT_EQ(h->jobs().Signal(running, 10, api::SignalScope::kAll, kBob).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(h->jobs().Signal(running, 0, api::SignalScope::kAll, kAlice).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(h->jobs().Signal(999, 10, api::SignalScope::kAll, kAlice).code(),
            StatusCode::kNotFound);
  h.Work("n1");
  h.Exit("n1", running, 0);
  // An ended job: the cancel's refusal, which scancel --signal tells apart.
  s = h->jobs().Signal(running, 10, api::SignalScope::kAll, kAlice);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "job " + std::to_string(running) + " already ended (COMPLETED)");
  EXPECT_TRUE(api::IsAlreadyEnded(s));
  EXPECT_EQ(h->jobs().Cancel(running, kAlice).message(), s.message());
  EXPECT_FALSE(
      api::IsAlreadyEnded(h->jobs().Signal(pending, 10, api::SignalScope::kAll, kAlice)));
}

// The launch carries --signal to the agent, which sends it TIME before the limit itself
// (agent/launcher_runtime_test.cc tests that on a fake clock); the restart count too.
TEST(JobControl, RequeueRunningStopsItThenRunsItAgainWithItsId) {
  Harness h;
  h.Register("n1");
  SubmitRequest r = MakeSubmit().Time(600);
  r.spec.signal = 10;
  r.spec.signal_before = 90;
  r.spec.signal_batch_only = true;
  const state::JobId id = h.Submit(r);
  h->RunCycle();
  AgentWork w = h.Work("n1");
  ASSERT_EQ(w.launch.size(), 1u);
  EXPECT_EQ(w.launch[0].spec.signal, 10);
  EXPECT_EQ(w.launch[0].spec.signal_before, 90);
  EXPECT_TRUE(w.launch[0].spec.signal_batch_only);
  EXPECT_EQ(w.launch[0].restart_count, 0);

  EXPECT_EQ(h->jobs().Requeue(id, kBob).code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(h->jobs().Requeue(id, kAlice).ok());
  EXPECT_EQ(h.StateOf(id), JobState::kRunning) << "until its agent reports";
  EXPECT_EQ(h.Work("n1").CancelledJobs(), std::vector<state::JobId>{id});
  ASSERT_TRUE(h->jobs().Requeue(id, kAlice).ok()) << "asked twice: once";
  EXPECT_TRUE(h.Work("n1").cancel.empty());
  h.Exit("n1", id, 0, ExitKind::kCancelled);
  state::JobRecord job = h.Job(id);
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_EQ(job.requeues, 1);
  EXPECT_EQ(job.reason, "requeued by alice");
  h->RunCycle();
  w = h.Work("n1");
  ASSERT_EQ(w.launch.size(), 1u);
  EXPECT_EQ(w.launch[0].job, id);
  EXPECT_EQ(w.launch[0].restart_count, 1);  // SLURM_RESTART_COUNT=1
}

TEST(JobControl, RequeueFinishedGoesBackToPendingWithItsEnvironment) {
  Harness h;
  h.Register("n1");
  SubmitRequest r = MakeSubmit();
  r.spec.set_env({{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/alice"}});
  const state::JobId id = h.Submit(r);
  h->RunCycle();
  ASSERT_EQ(h.Work("n1").launch.size(), 1u);
  h.Exit("n1", id, 3);
  ASSERT_EQ(h.StateOf(id), JobState::kFailed);
  ASSERT_TRUE(h.Job(id).spec.env().empty()) << "dropped from memory at its end";

  ASSERT_TRUE(h->jobs().Requeue(id, kRoot).ok());
  state::JobRecord job = h.Job(id);
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_EQ(job.requeues, 1);
  EXPECT_EQ(job.exit_code, 0);
  EXPECT_EQ(job.end_time, 0);
  EXPECT_EQ(job.spec.env().size(), 2u) << "read back from the store";
  h->RunCycle();
  const AgentWork w = h.Work("n1");
  ASSERT_EQ(w.launch.size(), 1u);
  EXPECT_EQ(w.launch[0].spec.env().size(), 2u);
  EXPECT_EQ(w.launch[0].restart_count, 1);
}

TEST(JobControl, RequeueRefusalsAndUndeliveredLaunch) {
  Harness h;
  h.Register("n1");
  const state::JobId pending = h.Submit(MakeSubmit().Hold());
  Status s = h->jobs().Requeue(pending, kAlice);
  EXPECT_EQ(s.code(), StatusCode::kBusy);
  EXPECT_EQ(s.message(),
            "job " + std::to_string(pending) +
                " is PENDING; only running or finished jobs can be requeued");
  EXPECT_EQ(h->jobs().Requeue(999, kAlice).code(), StatusCode::kNotFound);

  // Started, its launch not yet picked up: taken back, and pending again at once.
  const state::JobId id = h.Submit(MakeSubmit());
  h->RunCycle();
  ASSERT_EQ(h.StateOf(id), JobState::kRunning);
  ASSERT_TRUE(h->jobs().Requeue(id, kAlice).ok());
  EXPECT_EQ(h.StateOf(id), JobState::kPending);
  EXPECT_EQ(h.Job(id).requeues, 1);
  const AgentWork w = h.Work("n1");
  EXPECT_TRUE(w.launch.empty());
  EXPECT_TRUE(w.cancel.empty());

  // Being cancelled: no requeue.
  h->RunCycle();
  ASSERT_EQ(h.Work("n1").launch.size(), 1u);
  ASSERT_TRUE(h->jobs().Cancel(id, kAlice).ok());
  EXPECT_EQ(h->jobs().Requeue(id, kAlice).code(), StatusCode::kBusy);
}

// scontrol update: Controller::Update.
api::JobUpdate ReqPatch(std::string patch) {
  api::JobUpdate u;
  u.req_patch = std::move(patch);
  return u;
}

TEST(JobControl, UpdateChangesAPendingJobWhichThenStartsUnderTheNewRequest) {
  Harness h;
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit().Time(600).Hold());
  api::JobUpdate u = ReqPatch(R"({"gpus": 4, "time_limit": 300, "constraint": "h100"})");
  u.name = "renamed";
  u.comment = "four now";
  ASSERT_TRUE(h->jobs().Update(id, u, kAlice).ok());
  state::JobRecord j = h.Job(id);
  EXPECT_EQ(j.req.gpus, 4);
  EXPECT_EQ(j.req.time_limit, 300);
  EXPECT_EQ(j.req.constraint, "h100");
  EXPECT_EQ(j.req.user, "alice");
  EXPECT_EQ(j.spec.name, "renamed");
  EXPECT_EQ(j.spec.comment, "four now");
  EXPECT_TRUE(j.held) << "an update leaves the hold alone";
  ASSERT_TRUE(h->jobs().Hold(id, false, kAlice).ok());
  h->RunCycle();
  ASSERT_EQ(h.StateOf(id), JobState::kRunning);
  const AgentWork w = h.Work("n1");
  ASSERT_EQ(w.launch.size(), 1u);
  EXPECT_EQ(w.launch[0].gpus.size(), 4);
  EXPECT_EQ(w.launch[0].time_limit, 300);
  EXPECT_EQ(w.launch[0].spec.name, "renamed");
}

TEST(JobControl, UpdateRefusesWhatASubmitWouldAndChangesNothing) {
  Harness h;
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit().Time(600).Hold());
  const state::JobRecord before = h.Job(id);
  Status s = h->jobs().Update(id, ReqPatch(R"({"gpus": 9})"), kAlice);  // an 8-GPU node
  EXPECT_EQ(s.code(), h->jobs().Submit(MakeSubmit().Gpus(9), kAlice).status().code())
      << "refused as a submit is: " << s.ToString();
  EXPECT_EQ(s.message().rfind("job " + std::to_string(id) + ": ", 0), 0u) << s.message();
  s = h->jobs().Update(id, ReqPatch(R"({"gpus": "four"})"), kAlice);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("update.req.gpus"), std::string::npos) << s.message();
  s = h->jobs().Update(id, ReqPatch(R"({"constraint": "h100&("})"), kAlice);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(h.Job(id).req, before.req);
  // Only the owner or an admin; lengthening is an admin's, shortening anyone's.
  EXPECT_EQ(h->jobs().Update(id, ReqPatch(R"({"time_limit": 300})"), kBob).code(),
            StatusCode::kPermissionDenied);
  s = h->jobs().Update(id, ReqPatch(R"({"time_limit": 1200})"), kAlice);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("only an admin may lengthen the time limit of job"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(h->jobs().Update(id, ReqPatch(R"({"time_limit": 300})"), kAlice).ok());
  EXPECT_TRUE(h->jobs().Update(id, ReqPatch(R"({"time_limit": 1200})"), kRoot).ok());
  EXPECT_EQ(h.Job(id).req.time_limit, 1200);
  EXPECT_EQ(h->jobs().Update(id, ReqPatch(R"({"nice": -5})"), kAlice).code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(h->jobs().Update(999, ReqPatch("{}"), kAlice).code(), StatusCode::kNotFound);
}

TEST(JobControl, UpdateOfARunningJobChangesItsLimitAndNameAndOfAnEndedOneNothing) {
  Harness h;
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit().Time(600));
  h->RunCycle();
  ASSERT_EQ(h.StateOf(id), JobState::kRunning);
  h.Work("n1");
  // Its time limit: shortened by its owner, lengthened by an admin; its agents told.
  ASSERT_TRUE(h->jobs().Update(id, ReqPatch(R"({"time_limit": 300})"), kAlice).ok());
  AgentWork w = h.Work("n1");
  ASSERT_EQ(w.limits.size(), 1u);
  EXPECT_EQ(w.limits[0].job, id);
  EXPECT_EQ(w.limits[0].start_time, h.Job(id).start_time);
  EXPECT_EQ(w.limits[0].time_limit, 300);
  EXPECT_EQ(h->jobs().Update(id, ReqPatch(R"({"time_limit": 900})"), kAlice).code(),
            StatusCode::kPermissionDenied);
  ASSERT_TRUE(h->jobs().Update(id, ReqPatch(R"({"time_limit": 900})"), kRoot).ok());
  EXPECT_EQ(h.Work("n1").limits.at(0).time_limit, 900);
  EXPECT_EQ(h.Job(id).req.time_limit, 900);
  // An agent that registers again is told the limit the records have.
  Status again = h->nodes().Register([&] {
    AgentRegistration r = testing::MakeAgent("n1");
    r.running = {id};
    return r;
  }());
  ASSERT_TRUE(again.ok()) << again.ToString();
  w = h.Work("n1");
  ASSERT_EQ(w.limits.size(), 1u);
  EXPECT_EQ(w.limits[0].time_limit, 900);
  // The rest of the request is what its agents hold: not changed while it runs.
  Status s = h->jobs().Update(id, ReqPatch(R"({"gpus": 2})"), kAlice);
  EXPECT_EQ(s.code(), StatusCode::kBusy);
  EXPECT_NE(s.message().find("only its time limit, name and comment"), std::string::npos)
      << s.message();
  api::JobUpdate rename;
  rename.name = "still-running";
  ASSERT_TRUE(h->jobs().Update(id, rename, kAlice).ok());
  EXPECT_EQ(h.Job(id).spec.name, "still-running");
  rename.name = "a/b";  // %x puts the name into output paths
  EXPECT_EQ(h->jobs().Update(id, rename, kAlice).code(), StatusCode::kInvalidArgument);
  h.Work("n1");
  h.Exit("n1", id, 0);
  rename.name = "too-late";
  s = h->jobs().Update(id, rename, kAlice);
  EXPECT_EQ(s.code(), StatusCode::kBusy);
  EXPECT_NE(s.message().find("has already finished (COMPLETED)"), std::string::npos)
      << s.message();
}

TEST(JobControl, UpdateRefusesADependencyCycle) {
  Harness h;
  h.Register("n1");
  const state::JobId a = h.Submit(MakeSubmit().Hold());
  const state::JobId b = h.Submit(MakeSubmit().After(sched::DependencyKind::kAfterOk, a));
  const std::string on_b =
      R"({"dependencies": [{"kind": "afterok", "job": )" + std::to_string(b) + "}]}";
  Status s = h->jobs().Update(a, ReqPatch(on_b), kAlice);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("would make a cycle"), std::string::npos) << s.message();
  EXPECT_TRUE(h.Job(a).req.dependencies.empty());
  // Clearing b's dependency is fine, and so then is a's on b.
  ASSERT_TRUE(h->jobs().Update(b, ReqPatch(R"({"dependencies": []})"), kAlice).ok());
  EXPECT_TRUE(h->jobs().Update(a, ReqPatch(on_b), kAlice).ok());
}

// Preemption through the run's lifecycle (runs.h): "low" jobs give way to "high" ones,
// requeued or cancelled as their partition says once their part has exited; a cancel
// asked meanwhile outranks the requeue; a victim is told to stop once, not every cycle.
ControllerOptions TiersOptions(sched::PreemptMode mode) {
  ControllerOptions o;
  config::ClusterConfig cfg;
  for (const char* name : {"low", "high"}) {
    config::PartitionConfig p;
    p.partition.name = name;
    p.partition.default_time = kHour;
    p.partition.max_time = kDay;
    p.partition.tier = std::string(name) == "high" ? 1 : 0;
    p.partition.preempt_lower_tiers = std::string(name) == "high";
    p.partition.preempt_mode = mode;
    p.nodes.all = true;
    cfg.partitions.push_back(p);
  }
  o.config = cfg;
  return o;
}

struct Preempted {
  state::JobId low = 0;
  state::JobId high = 0;
};

// `low` runs on n1's 8 GPUs, then `high` asks for them: a cycle preempts `low`.
Preempted PreemptOnce(Harness& h) {
  h.Register("n1");
  Preempted p;
  p.low = h.Submit(MakeSubmit().Gpus(8).Partition("low"));
  h->RunCycle();
  EXPECT_EQ(h.StateOf(p.low), JobState::kRunning);
  h.Work("n1");
  p.high = h.Submit(MakeSubmit().Gpus(8).Partition("high"));
  h->RunCycle();
  EXPECT_EQ(h.Work("n1").CancelledJobs(), std::vector<state::JobId>{p.low});
  h->RunCycle();  // still preempted: not told again
  EXPECT_TRUE(h.Work("n1").cancel.empty());
  return p;
}

TEST(Preemption, RequeueModeRequeuesTheVictimWhenItsPartExited) {
  Harness h(TiersOptions(sched::PreemptMode::kRequeue));
  const Preempted p = PreemptOnce(h);
  EXPECT_EQ(h.StateOf(p.low), JobState::kRunning);  // until its part has exited
  h.Exit("n1", p.low, 0, ExitKind::kCancelled);
  EXPECT_EQ(h.StateOf(p.low), JobState::kPending);
  EXPECT_EQ(h.Job(p.low).requeues, 1);
}

TEST(Preemption, CancelModeEndsTheVictimCancelled) {
  Harness h(TiersOptions(sched::PreemptMode::kCancel));
  const Preempted p = PreemptOnce(h);
  h.Exit("n1", p.low, 0, ExitKind::kCancelled);
  const state::JobRecord low = h.Job(p.low);
  EXPECT_EQ(low.state, JobState::kCancelled);
  EXPECT_EQ(low.reason, "preempted by job " + std::to_string(p.high));
}

TEST(Preemption, ACancelAskedMeanwhileOutranksTheRequeue) {
  Harness h(TiersOptions(sched::PreemptMode::kRequeue));
  const Preempted p = PreemptOnce(h);
  ASSERT_TRUE(h->jobs().Cancel(p.low, kAlice).ok());
  h.Exit("n1", p.low, 0, ExitKind::kCancelled);
  const state::JobRecord low = h.Job(p.low);
  EXPECT_EQ(low.state, JobState::kCancelled);
  EXPECT_EQ(low.requeues, 0);
}

}  // namespace
}  // namespace hachi::server
