// Fencing (docs/fencing.md): a node whose agent goes silent goes down at the agent
// timeout, but its running jobs keep their GPUs and stay RUNNING until the run is known
// dead — its agent reports the exit, or the lease + kill grace + margin pass since the
// server last heard from it. An agent that comes back with runs the records ended holds
// its node until those runs have exited; an older agent instance cannot register.
// Defaults: agent timeout 30 s, lease 30 s, kill grace 10 s, margin 5 s: fence at 45 s.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <string>
#include <vector>

#include "server/controller.h"
#include "server/testing.h"

namespace hachi::server {
namespace {

using api::ExitKind;
using state::JobState;
using testing::Harness;
using testing::kAlice;
using testing::MakeAgent;
using testing::MakeSubmit;

bool Has(const std::vector<state::JobId>& v, state::JobId id) {
  return std::find(v.begin(), v.end(), id) != v.end();
}

class FencingTest : public ::testing::Test {
 protected:
  FencingTest() : h_(Options(&clock_)) {}
  static ControllerOptions Options(const Clock* clock) {
    ControllerOptions o;
    o.clock =
        clock;  // agent_timeout 30, lease 30 (= the timeout), kill_grace 10, margin 5
    return o;
  }
  // Lets `seconds` pass a second at a time while the agents of `alive` keep polling and
  // the loop runs its cycle every second (as the server's does: a server whose loop
  // went unrun for half the agent timeout counts itself stalled). The polls acknowledge
  // nothing, so what they get is sent again to the test's own h_.Work afterwards.
  void Pass(int seconds, std::initializer_list<const char*> alive) {
    for (int i = 0; i < seconds; ++i) {
      clock_.Advance(std::chrono::seconds(1));
      for (const char* n : alive) h_->nodes().Poll(n, 0, 0);
      h_->RunCycle();
    }
    h_->RunCycle();
  }
  state::NodeStatus Node(const std::string& name) {
    for (const state::NodeStatus& n : h_->cluster_views().Nodes()) {
      if (n.record.name == name) return n;
    }
    ADD_FAILURE() << "no node " << name;
    return {};
  }
  // The job's allocation on `node` (empty when none).
  GpuSet GpusOn(state::JobId id, const std::string& node) {
    for (const state::NodeAllocation& a : h_.Job(id).allocations) {
      if (a.node == node) return a.gpus;
    }
    return {};
  }
  // n1 runs `requeue` (--requeue, 4 GPUs) and `plain` (4 GPUs); n2 registers after.
  void StartTwoJobsOnN1() {
    h_.Register("n1");
    requeue_ = h_.Submit(MakeSubmit().Gpus(4).Requeue());
    plain_ = h_.Submit(MakeSubmit().Gpus(4));
    h_->RunCycle();
    ASSERT_EQ(h_.StateOf(requeue_), JobState::kRunning);
    ASSERT_EQ(h_.StateOf(plain_), JobState::kRunning);
    ASSERT_EQ(h_.Work("n1").launch.size(), 2u);
    h_.Register("n2");
    first_start_ = h_.Job(requeue_).start_time;
  }

  FakeClock clock_;
  Harness h_;
  state::JobId requeue_ = 0;
  state::JobId plain_ = 0;
  Time first_start_ = 0;
};

TEST_F(FencingTest, SilentNodeGoesDownButItsJobsRunUntilTheFence) {
  StartTwoJobsOnN1();
  Pass(29, {"n2"});
  EXPECT_EQ(Node("n1").record.state, state::NodeState::kUp) << "within the timeout";
  Pass(2, {"n2"});  // silent 31 s: down
  EXPECT_EQ(Node("n1").record.state, state::NodeState::kDown);
  EXPECT_TRUE(h_.Work("n1").reregister);
  // Still RUNNING where they were, and not started again on n2's free GPUs.
  for (state::JobId id : {requeue_, plain_}) {
    const state::JobRecord j = h_.Job(id);
    EXPECT_EQ(j.state, JobState::kRunning) << id;
    EXPECT_EQ(j.start_time, first_start_) << id;
    EXPECT_EQ(GpusOn(id, "n1").size(), 4) << id;
    EXPECT_TRUE(GpusOn(id, "n2").empty()) << id;
  }
  EXPECT_TRUE(h_.Work("n2").launch.empty()) << "no second run anywhere";
  // What a user sees: the wait, with its number (fence 45 s - 31 s silent = 14 s).
  EXPECT_EQ(h_.Job(requeue_).reason,
            "waiting for node n1's lease to expire before requeue, 14 s");
  EXPECT_EQ(h_.Job(plain_).reason,
            "waiting for node n1's lease to expire before ending it NODE_FAIL, 14 s");
  Result<report::JobExplain> ex = h_->job_views().Explain(requeue_);
  ASSERT_TRUE(ex.ok());
  ASSERT_FALSE(ex->history.empty());
  EXPECT_EQ(ex->history.back().event, "fence");
  EXPECT_EQ(ex->history.back().text, h_.Job(requeue_).reason);

  Pass(13, {"n2"});  // silent 44 s: the fence has not passed
  EXPECT_EQ(h_.StateOf(requeue_), JobState::kRunning);
  EXPECT_EQ(h_.StateOf(plain_), JobState::kRunning);
  EXPECT_EQ(h_.Job(requeue_).reason,
            "waiting for node n1's lease to expire before requeue, 1 s");

  Pass(2, {"n2"});  // silent 46 s: counted dead
  const state::JobRecord p = h_.Job(plain_);
  EXPECT_EQ(p.state, JobState::kNodeFail);
  EXPECT_NE(p.reason.find("node n1 down"), std::string::npos) << p.reason;
  const state::JobRecord r = h_.Job(requeue_);
  EXPECT_EQ(r.requeues, 1);
  EXPECT_NE(r.reason.find("node n1 down"), std::string::npos) << r.reason;
  // Requeued, then started by the next cycle on n2 (the only node up): one run at a time.
  h_->RunCycle();
  EXPECT_EQ(h_.StateOf(requeue_), JobState::kRunning);
  EXPECT_EQ(GpusOn(requeue_, "n2").size(), 4);
  EXPECT_GT(h_.Job(requeue_).start_time, first_start_);
}

// How a lost run ends: the fence passing (the agent never came back), or the agent's
// own report that its lease expired and it stopped the job.
struct LostCase {
  const char* name;
  bool requeue;
  bool agent_reports;  // else the fence passes
  JobState state;
  const char* reason;
};

class LostRunTest : public FencingTest, public ::testing::WithParamInterface<LostCase> {};

TEST_P(LostRunTest, EndsAsANodeFailure) {
  const LostCase& c = GetParam();
  h_.Register("n1");
  h_.Register("n2");
  ASSERT_TRUE(h_->nodes().Drain("n2", "keep jobs off", testing::kRoot).ok());
  SubmitRequest sub = MakeSubmit().Gpus(2);
  sub.spec.requeue = c.requeue;
  const state::JobId id = h_.Submit(sub);
  h_->RunCycle();
  ASSERT_EQ(h_.Work("n1").launch.size(), 1u);
  const Time start = h_.Job(id).start_time;
  if (c.agent_reports) {
    Pass(35, {"n2"});  // down, within the fence
    ASSERT_EQ(Node("n1").record.state, state::NodeState::kDown);
    AgentRegistration back = MakeAgent("n1");
    back.running = {id};  // its exit is not reported yet
    ASSERT_TRUE(h_->nodes().Register(back).ok());
    EXPECT_EQ(h_.StateOf(id), JobState::kRunning) << "known to the agent still";
    api::JobExit e;
    e.job = id;
    e.start_time = start;
    e.kind = ExitKind::kLost;
    e.message = "lease expired: its agent on n1 had no contact with the server for 30 s";
    ASSERT_TRUE(h_->nodes().ReportExits("n1", {e}).ok());
  } else {
    Pass(46, {"n2"});
  }
  const state::JobRecord j = h_.Job(id);
  EXPECT_EQ(j.state, c.state);
  EXPECT_EQ(j.requeues, c.requeue ? 1 : 0);
  // A pending job's reason is the last cycle's word; the requeue's is in its history.
  std::string why = j.reason;
  Result<report::JobExplain> ex = h_->job_views().Explain(id);
  ASSERT_TRUE(ex.ok());
  for (const report::ExplainEvent& ev : ex->history) {
    if (ev.event == "requeued") why = ev.text;
  }
  EXPECT_NE(why.find(c.reason), std::string::npos) << why;
}

INSTANTIATE_TEST_SUITE_P(
    All, LostRunTest,
    ::testing::Values(
        LostCase{"FenceRequeues", true, false, JobState::kPending, "node n1 down"},
        LostCase{"FenceNodeFail", false, false, JobState::kNodeFail, "node n1 down"},
        LostCase{"LeaseExitRequeues", true, true, JobState::kPending, "lease expired"},
        LostCase{"LeaseExitNodeFail", false, true, JobState::kNodeFail, "lease expired"}),
    [](const ::testing::TestParamInfo<LostCase>& p) { return p.param.name; });

TEST_F(FencingTest, AgentBackWithinTheFenceKeepsItsJobs) {
  StartTwoJobsOnN1();
  Pass(40, {"n2"});
  ASSERT_EQ(Node("n1").record.state, state::NodeState::kDown);
  AgentRegistration back = MakeAgent("n1");
  back.running = {requeue_, plain_};
  ASSERT_TRUE(h_->nodes().Register(back).ok());
  EXPECT_EQ(Node("n1").record.state, state::NodeState::kUp);
  const AgentWork w = h_.Work("n1");
  EXPECT_TRUE(w.cancel.empty());
  EXPECT_TRUE(w.launch.empty()) << "not launched again";
  Pass(60, {"n1", "n2"});  // well past where the fence would have been
  for (state::JobId id : {requeue_, plain_}) {
    const state::JobRecord j = h_.Job(id);
    EXPECT_EQ(j.state, JobState::kRunning) << id;
    EXPECT_EQ(j.start_time, first_start_) << id;
    EXPECT_EQ(j.requeues, 0) << id;
    EXPECT_TRUE(j.reason.empty()) << j.reason;
  }
  EXPECT_TRUE(h_.Work("n2").launch.empty()) << "no duplicate";
  h_.Exit("n1", requeue_, 0);
  EXPECT_EQ(h_.StateOf(requeue_), JobState::kCompleted);
}

TEST_F(FencingTest, StaleRunsHoldTheNodeUntilTheyExit) {
  StartTwoJobsOnN1();
  // n2 is full: the requeued job can only go back to n1.
  const state::JobId big = h_.Submit(MakeSubmit().Gpus(8));
  h_->RunCycle();
  ASSERT_EQ(GpusOn(big, "n2").size(), 8);
  Pass(46, {"n2"});
  ASSERT_EQ(h_.StateOf(requeue_), JobState::kPending);
  ASSERT_EQ(h_.StateOf(plain_), JobState::kNodeFail);
  // The agent was slow to stop them: it comes back still running both.
  AgentRegistration back = MakeAgent("n1");
  back.running = {requeue_, plain_};
  ASSERT_TRUE(h_->nodes().Register(back).ok());
  const AgentWork w = h_.Work("n1");
  EXPECT_TRUE(Has(w.CancelledJobs(), requeue_));
  EXPECT_TRUE(Has(w.CancelledJobs(), plain_));
  h_->RunCycle();
  EXPECT_EQ(h_.StateOf(requeue_), JobState::kPending) << "n1's GPUs are still in use";
  const state::NodeStatus n1 = Node("n1");
  EXPECT_EQ(n1.record.state, state::NodeState::kUp);
  EXPECT_NE(n1.record.state_reason.find("node n1 is stopping jobs"), std::string::npos)
      << n1.record.state_reason;
  Result<report::JobExplain> ex = h_->job_views().Explain(requeue_);
  ASSERT_TRUE(ex.ok());
  const auto stopping =
      std::find_if(ex->nodes.begin(), ex->nodes.end(),
                   [](const report::ExplainNodes& g) { return g.reason == "stopping"; });
  ASSERT_NE(stopping, ex->nodes.end());
  EXPECT_NE(stopping->text.find("earlier run"), std::string::npos) << stopping->text;

  // One of the two exits: still held.
  api::JobExit e;
  e.job = requeue_;
  e.start_time = first_start_;
  e.kind = ExitKind::kCancelled;
  ASSERT_TRUE(h_->nodes().ReportExits("n1", {e}).ok());
  h_->RunCycle();
  EXPECT_EQ(h_.StateOf(requeue_), JobState::kPending);
  EXPECT_NE(Node("n1").record.state_reason.find("job " + std::to_string(plain_)),
            std::string::npos);
  // Both: the node takes jobs again, and the requeued one starts there.
  e.job = plain_;
  ASSERT_TRUE(h_->nodes().ReportExits("n1", {e}).ok());
  EXPECT_EQ(h_.StateOf(plain_), JobState::kNodeFail) << "a stale exit changes no end";
  h_->RunCycle();
  EXPECT_EQ(h_.StateOf(requeue_), JobState::kRunning);
  EXPECT_EQ(GpusOn(requeue_, "n1").size(), 4);
  EXPECT_TRUE(Node("n1").record.state_reason.empty());
}

TEST_F(FencingTest, RegistrationWithoutTheStaleRunsReleasesTheNode) {
  StartTwoJobsOnN1();
  const state::JobId big = h_.Submit(MakeSubmit().Gpus(8));
  h_->RunCycle();
  ASSERT_EQ(GpusOn(big, "n2").size(), 8);
  Pass(46, {"n2"});
  AgentRegistration back = MakeAgent("n1");
  back.running = {requeue_};
  ASSERT_TRUE(h_->nodes().Register(back).ok());
  h_->RunCycle();
  ASSERT_EQ(h_.StateOf(requeue_), JobState::kPending);
  back.running = {};  // registered again (its session was lost): the run is gone
  ASSERT_TRUE(h_->nodes().Register(back).ok());
  h_->RunCycle();
  EXPECT_EQ(h_.StateOf(requeue_), JobState::kRunning);
}

// A server that stalled (its loop unrun for a minute: starved of CPU, stopped) heard no
// agent meanwhile through no fault of theirs: it counts their silence from its return,
// as a restarted server does, instead of taking every node down and fencing its runs.
TEST_F(FencingTest, AServerThatStalledCountsTheAgentsSilenceFromItsReturn) {
  StartTwoJobsOnN1();
  clock_.Advance(std::chrono::seconds(60));  // no cycle, no poll
  h_->RunCycle();
  EXPECT_NE(Node("n1").record.state, state::NodeState::kDown);
  EXPECT_EQ(h_.StateOf(requeue_), JobState::kRunning);
  // An agent that stays silent afterwards is still lost at its timeout.
  Pass(31, {});
  EXPECT_EQ(Node("n1").record.state, state::NodeState::kDown);
}

TEST_F(FencingTest, GangWaitsForItsOtherPartsAfterTheFence) {
  h_.Register("n1");
  h_.Register("n2");
  const state::JobId gang = h_.Submit(MakeSubmit().Gang(2, 8).Requeue());
  h_->RunCycle();
  ASSERT_EQ(h_.StateOf(gang), JobState::kRunning);
  const Time start = h_.Job(gang).start_time;
  ASSERT_EQ(h_.Work("n1").launch.size(), 1u);
  ASSERT_EQ(h_.Work("n2").launch.size(), 1u);
  Pass(40, {"n2"});
  EXPECT_TRUE(h_.Work("n2").cancel.empty()) << "within the fence, the gang goes on";
  Pass(6, {"n2"});
  // n1's part is counted dead; n2's is told to stop, and the job waits for it.
  EXPECT_EQ(h_.Work("n2").CancelledJobs(), std::vector<state::JobId>{gang});
  EXPECT_EQ(h_.StateOf(gang), JobState::kRunning);
  // n1's agent comes back still running its part: told to stop it, and n1 holds.
  AgentRegistration back = MakeAgent("n1");
  back.running = {gang};
  ASSERT_TRUE(h_->nodes().Register(back).ok());
  EXPECT_EQ(h_.Work("n1").CancelledJobs(), std::vector<state::JobId>{gang});
  EXPECT_NE(Node("n1").record.state_reason.find("stopping job"), std::string::npos);
  api::JobExit e;
  e.job = gang;
  e.start_time = start;
  e.kind = ExitKind::kCancelled;
  ASSERT_TRUE(h_->nodes().ReportExits("n2", {e}).ok());
  const state::JobRecord j = h_.Job(gang);
  EXPECT_EQ(j.state, JobState::kPending);
  EXPECT_EQ(j.requeues, 1);
  EXPECT_NE(j.reason.find("node n1 down"), std::string::npos) << j.reason;
  h_->RunCycle();
  EXPECT_EQ(h_.StateOf(gang), JobState::kPending) << "n1 still holds for the old part";
  ASSERT_TRUE(h_->nodes().ReportExits("n1", {e}).ok());
  h_->RunCycle();
  EXPECT_EQ(h_.StateOf(gang), JobState::kRunning);
  EXPECT_GT(h_.Job(gang).start_time, start);
}

TEST_F(FencingTest, OlderAgentInstanceCannotRegister) {
  AgentRegistration now = MakeAgent("n1", /*agent_started=*/2000);
  now.instance = "b-new";
  ASSERT_TRUE(h_->nodes().Register(now).ok());
  const state::JobId id = h_.Submit(MakeSubmit().Gpus(2));
  h_->RunCycle();
  ASSERT_EQ(h_.Work("n1").launch.size(), 1u);
  // A retry from the instance before it, delayed in the network: it knows no jobs.
  AgentRegistration old = MakeAgent("n1", /*agent_started=*/1000);
  old.instance = "a-old";
  old.address = "10.9.9.9";
  const Status s = h_->nodes().Register(old);
  EXPECT_EQ(s.code(), StatusCode::kBusy) << s.ToString();
  EXPECT_NE(s.message().find("stale"), std::string::npos) << s.message();
  // Nothing changed: the node, its session, the job.
  const state::NodeStatus n1 = Node("n1");
  EXPECT_EQ(n1.record.agent_instance, "b-new");
  EXPECT_NE(n1.record.address, "10.9.9.9");
  EXPECT_EQ(h_.StateOf(id), JobState::kRunning);
  EXPECT_FALSE(h_.Work("n1").reregister);
  // The current instance registers again (a blink): fine, and so does a newer one.
  ASSERT_TRUE(h_->nodes().Register(now).ok());
  AgentRegistration next = MakeAgent("n1", /*agent_started=*/3000);
  next.instance = "c-next";
  EXPECT_TRUE(h_->nodes().Register(next).ok());
}

// A run its agent did not end at its time limit (a clock or a bug on the node) is
// stopped by the server once the lease, the kill grace and the margin have passed too
// (60 s + 45 s here), and ends TIMEOUT; one that ends by itself meanwhile keeps its own
// end, and a run without a limit is left alone.
TEST_F(FencingTest, ARunItsAgentDidNotEndAtItsLimitIsStoppedByTheServer) {
  h_.Register("n1");
  const state::JobId limited = h_.Submit(MakeSubmit().Gpus(2).Time(60));
  const state::JobId failing = h_.Submit(MakeSubmit().Gpus(2).Time(60));
  const state::JobId unlimited = h_.Submit(MakeSubmit().Gpus(2).Time(0));
  h_->RunCycle();
  ASSERT_EQ(h_.Work("n1").launch.size(), 3u);
  const Time start = h_.Job(limited).start_time;
  Pass(105, {"n1"});
  EXPECT_TRUE(h_.Work("n1").cancel.empty())
      << "not before limit + lease + grace + margin";
  Pass(1, {"n1"});
  std::vector<state::JobId> stopped;
  for (const api::RunStop& s : h_.Work("n1").cancel) stopped.push_back(s.job);
  EXPECT_TRUE(Has(stopped, limited));
  EXPECT_TRUE(Has(stopped, failing));
  EXPECT_FALSE(Has(stopped, unlimited));
  EXPECT_EQ(h_.StateOf(limited), JobState::kRunning) << "until its agent says it ended";
  // The agent stops one; the other had failed by itself just before the stop came.
  api::JobExit e;
  e.job = limited;
  e.start_time = start;
  e.kind = ExitKind::kCancelled;
  e.signal = 15;
  ASSERT_TRUE(h_->nodes().ReportExits("n1", {e}).ok());
  e.job = failing;
  e.kind = ExitKind::kExited;
  e.signal = 0;
  e.exit_code = 3;
  ASSERT_TRUE(h_->nodes().ReportExits("n1", {e}).ok());
  const state::JobRecord j = h_.Job(limited);
  EXPECT_EQ(j.state, JobState::kTimeout);
  EXPECT_EQ(j.reason,
            "time limit 1m00s: still running 46s past it on the server's clock (its node "
            "did not end it), stopped by the server");
  EXPECT_EQ(h_.StateOf(failing), JobState::kFailed);
  EXPECT_EQ(h_.StateOf(unlimited), JobState::kRunning);
}

// Each poll carries the agent's wall clock; the node's view shows its offset against
// the server's (unknown until a poll says, and for a node not registered).
TEST_F(FencingTest, ANodesViewShowsItsAgentsClockOffset) {
  h_.Register("n1");
  EXPECT_FALSE(Node("n1").clock_offset_ms.has_value());
  const int64_t now_ms = clock_.NowMicros() / 1000;
  h_->nodes().Poll("n1", 0, 0, now_ms - 3600000);  // an hour behind
  EXPECT_EQ(Node("n1").clock_offset_ms, -3600000);
  h_->nodes().Poll("n1", 0, 0, now_ms + 12);  // fixed
  EXPECT_EQ(Node("n1").clock_offset_ms, 12);
  h_->nodes().Poll("n9", 0, 0, now_ms);  // no such agent: nothing kept
  h_.Register("n9");
  EXPECT_FALSE(Node("n9").clock_offset_ms.has_value());
}

// A restarted (or stalled) server waits for the lease and the margin before it stops
// overdue runs: their agents report the exits they held meanwhile at registration.
TEST_F(FencingTest, AServerBackFromAnOutageLetsTheAgentsReportBeforeItStopsOverdueRuns) {
  h_.Register("n1");
  const state::JobId id = h_.Submit(MakeSubmit().Gpus(2).Time(60));
  h_->RunCycle();
  ASSERT_EQ(h_.Work("n1").launch.size(), 1u);
  clock_.Advance(std::chrono::seconds(600));  // no cycle: the server was away
  Pass(34, {"n1"});
  EXPECT_TRUE(h_.Work("n1").cancel.empty()) << "checking for less than lease + margin";
  Pass(2, {"n1"});
  const AgentWork w = h_.Work("n1");
  ASSERT_EQ(w.cancel.size(), 1u);
  EXPECT_EQ(w.cancel[0].job, id);
}

}  // namespace
}  // namespace hachi::server
