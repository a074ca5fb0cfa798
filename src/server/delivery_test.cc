// Delivery to agents under faults (docs/fencing.md "Delivery"): a batch whose answer was
// lost is sent again until the agent acknowledges it, a stop names its run and always
// ends the job, and a registration after a session reset re-sends the stops it dropped.
#include <gtest/gtest.h>

#include "server/testing.h"

namespace hachi::server {
namespace {

using namespace testing;  // server/testing.h: Harness, its users, MakeAgent, MakeSubmit

class DeliveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reg_ = MakeAgent("n1", 100);
    reg_.instance = "agent-a";
    ASSERT_TRUE(h_->nodes().Register(reg_).ok());
  }
  // A job running on n1 (its launch queued, not yet sent).
  state::JobId Running() {
    const state::JobId id = h_.Submit(MakeSubmit().Gpus(8).Time(120));
    h_->RunCycle();
    EXPECT_EQ(h_.StateOf(id), state::JobState::kRunning);
    return id;
  }
  AgentWork Poll(uint64_t ack) {
    return h_->nodes().Poll("n1", 0, static_cast<int64_t>(ack));
  }

  Harness h_;
  AgentRegistration reg_;
};

TEST_F(DeliveryTest, ALaunchWhoseAnswerWasLostIsSentAgainUntilAcknowledged) {
  const state::JobId id = Running();
  const AgentWork first = Poll(0);
  ASSERT_EQ(first.launch.size(), 1u);
  // The agent never got it: its next poll acknowledges nothing newer.
  const AgentWork again = Poll(0);
  ASSERT_EQ(again.launch.size(), 1u);
  EXPECT_EQ(again.launch[0].job, id);
  EXPECT_EQ(again.launch[0].start_time, first.launch[0].start_time);
  EXPECT_TRUE(Poll(again.seq).Empty());
  EXPECT_EQ(h_.StateOf(id), state::JobState::kRunning);
}

TEST_F(DeliveryTest, ACancelOfARunWhoseLaunchWasLostEndsTheJob) {
  const state::JobId id = Running();
  const Time start = h_.Job(id).start_time;
  ASSERT_EQ(Poll(0).launch.size(), 1u);  // lost on the way
  ASSERT_TRUE(h_->jobs().Cancel(id, kAlice).ok());
  const AgentWork w = Poll(0);
  ASSERT_EQ(w.launch.size(), 1u) << "the lost batch first";
  EXPECT_EQ(w.cancel, (std::vector<api::RunStop>{{id, start}}));
  // The agent ends the run it never started as cancelled (agent/daemon.h).
  api::JobExit e;
  e.job = id;
  e.start_time = start;
  e.kind = api::ExitKind::kCancelled;
  ASSERT_TRUE(h_->nodes().ReportExits("n1", {e}).ok());
  EXPECT_EQ(h_.StateOf(id), state::JobState::kCancelled);
}

TEST_F(DeliveryTest, ARegistrationSendsAStopNotALaunchForACancelledRunTheAgentNeverGot) {
  const state::JobId id = Running();
  const Time start = h_.Job(id).start_time;
  ASSERT_EQ(Poll(0).launch.size(), 1u);  // lost
  ASSERT_TRUE(h_->jobs().Cancel(id, kAlice).ok());
  // The same agent registers again (its session reset): it has no run of the job.
  ASSERT_TRUE(h_->nodes().Register(reg_).ok());
  const AgentWork w = Poll(0);
  EXPECT_TRUE(w.launch.empty());
  EXPECT_EQ(w.cancel, (std::vector<api::RunStop>{{id, start}}));
}

TEST_F(DeliveryTest, ARegistrationSendsAgainTheStopOfARequeueingRun) {
  const state::JobId id = Running();
  const Time start = h_.Job(id).start_time;
  const AgentWork launched = Poll(0);
  ASSERT_EQ(launched.launch.size(), 1u);
  ASSERT_TRUE(Poll(launched.seq).Empty());
  ASSERT_TRUE(h_->jobs().Requeue(id, kRoot).ok());
  // The stop was queued, then the session reset before the agent polled.
  AgentRegistration again = reg_;
  again.running = {id};
  ASSERT_TRUE(h_->nodes().Register(again).ok());
  const AgentWork w = Poll(0);
  EXPECT_EQ(w.cancel, (std::vector<api::RunStop>{{id, start}}));
  EXPECT_EQ(h_.StateOf(id), state::JobState::kRunning) << "until its exit is reported";
}

// The end is dated by the server's clock from how long ago the agent saw it: an agent
// whose wall clock is an hour behind records no end before its start.
TEST_F(DeliveryTest, AnEndIsDatedByTheServersClockNotTheAgents) {
  const state::JobId id = Running();
  const Time start = h_.Job(id).start_time;
  api::JobExit e;
  e.job = id;
  e.start_time = start;
  e.end_time = start - 3597;  // the agent's own clock
  e.ended_ago_ms = 0;
  ASSERT_TRUE(h_->nodes().ReportExits("n1", {e}).ok());
  const state::JobRecord j = h_.Job(id);
  EXPECT_EQ(j.state, state::JobState::kCompleted);
  EXPECT_GE(j.end_time, start);
}

}  // namespace
}  // namespace hachi::server
