#include "server/agent_hub.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "core/testing/wait_for.h"

namespace hachi::server {
namespace {

using std::chrono::seconds;

api::LaunchSpec LaunchOf(state::JobId job) {
  api::LaunchSpec l;
  l.job = job;
  return l;
}

TEST(AgentHubTest, UnknownOrClosedNodeIsToldToRegisterAndIsNotSeen) {
  FakeClock clock;
  AgentHub hub(&clock);
  EXPECT_TRUE(hub.Wait("n1", 1000).reregister);  // at once: no session
  EXPECT_EQ(hub.SilentForMs("n1"), -1);          // nor is one made for a stranger
  hub.Touch("n1");
  clock.Advance(seconds(5));
  EXPECT_TRUE(hub.Wait("n1", 1000).reregister);
  EXPECT_EQ(hub.SilentForMs("n1"),
            5000);              // a poll of an unregistered agent is no heartbeat
  hub.Send("n1", LaunchOf(7));  // dropped: registration reconciles
  hub.Send("n1", api::RunStop{7});
  hub.Open("n1");
  const api::AgentWork w = hub.Wait("n1", 0);
  EXPECT_FALSE(w.reregister);
  EXPECT_TRUE(w.launch.empty());
  EXPECT_TRUE(w.cancel.empty());
}

TEST(AgentHubTest, WorkQueuedForANodeGoesToThatNodesPollInOrder) {
  FakeClock clock;
  AgentHub hub(&clock);
  hub.Open("n1");
  hub.Open("n2");
  hub.Send("n1", LaunchOf(1));
  hub.Send("n1", LaunchOf(2));
  hub.Send("n1", api::RunStop{9});
  const api::AgentWork other = hub.Wait("n2", 0);
  EXPECT_TRUE(other.launch.empty());
  const api::AgentWork w = hub.Wait("n1", 0);
  ASSERT_EQ(w.launch.size(), 2u);
  EXPECT_EQ(w.launch[0].job, 1);
  EXPECT_EQ(w.launch[1].job, 2);
  EXPECT_EQ(w.CancelledJobs(), std::vector<state::JobId>{9});
  EXPECT_TRUE(hub.Wait("n1", 0).launch.empty());  // taken once
}

TEST(AgentHubTest, ALaunchTakenBackBeforeDeliveryNeverReachesTheAgent) {
  FakeClock clock;
  AgentHub hub(&clock);
  hub.Open("n1");
  hub.Send("n1", LaunchOf(1));
  hub.Send("n1", LaunchOf(2));
  EXPECT_TRUE(hub.TakeBackLaunch("n1", 1));
  EXPECT_FALSE(hub.TakeBackLaunch("n1", 1));
  const api::AgentWork w = hub.Wait("n1", 0);
  ASSERT_EQ(w.launch.size(), 1u);
  EXPECT_EQ(w.launch[0].job, 2);
  EXPECT_FALSE(hub.TakeBackLaunch("n1", 2));  // delivered
}

TEST(AgentHubTest, OpeningAgainDropsWhatWasQueuedForThePreviousAgent) {
  FakeClock clock;
  AgentHub hub(&clock);
  hub.Open("n1");
  hub.Send("n1", LaunchOf(1));
  hub.Send("n1", api::RunStop{2});
  hub.Open("n1");
  const api::AgentWork w = hub.Wait("n1", 0);
  EXPECT_TRUE(w.launch.empty());
  EXPECT_TRUE(w.cancel.empty());
}

TEST(AgentHubTest, SilenceIsMeasuredOnTheClockAndEndedByPollsAndTouches) {
  FakeClock clock;
  AgentHub hub(&clock);
  EXPECT_EQ(hub.SilentForMs("n1"), -1);
  hub.Open("n1");
  clock.Advance(seconds(31));
  EXPECT_EQ(hub.SilentForMs("n1"), 31000);
  hub.Wait("n1", 0);
  EXPECT_EQ(hub.SilentForMs("n1"), 0);
  clock.Advance(seconds(3));
  hub.Touch("n1");
  EXPECT_EQ(hub.SilentForMs("n1"), 0);
}

TEST(AgentHubTest, ABatchNotAcknowledgedIsSentAgainAheadOfNewerWork) {
  FakeClock clock;
  AgentHub hub(&clock);
  hub.Open("n1");
  hub.Send("n1", LaunchOf(1));
  const api::AgentWork first = hub.Wait("n1", 0, 0);
  ASSERT_EQ(first.launch.size(), 1u);
  ASSERT_NE(first.seq, 0u);
  EXPECT_FALSE(hub.TakeBackLaunch("n1", 1)) << "sent: the agent may have started it";
  // Its answer was lost: the agent's next poll acknowledges only what came before.
  hub.Send("n1", LaunchOf(2));
  hub.Send("n1", api::RunStop{1, 100});
  const api::AgentWork again = hub.Wait("n1", 0, 0);
  ASSERT_EQ(again.launch.size(), 2u);
  EXPECT_EQ(again.launch[0].job, 1);
  EXPECT_EQ(again.launch[1].job, 2);
  EXPECT_EQ(again.cancel, (std::vector<api::RunStop>{{1, 100}}));
  EXPECT_GT(again.seq, first.seq);
  // Acknowledged: nothing goes out twice.
  const api::AgentWork after = hub.Wait("n1", 0, static_cast<int64_t>(again.seq));
  EXPECT_TRUE(after.Empty());
  EXPECT_EQ(after.seq, 0u);
  EXPECT_TRUE(hub.Wait("n1", 0, static_cast<int64_t>(again.seq)).Empty());
}

// Each launch and limit goes out with what is left of its time limit by the server's
// clock, recomputed when a batch is sent again: the agent never reads its own wall clock.
TEST(AgentHubTest, LaunchesGoOutWithTheTimeLeftOnTheServersClock) {
  FakeClock clock;
  AgentHub hub(&clock);
  hub.Open("n1");
  api::LaunchSpec l = LaunchOf(1);
  l.start_time = clock.Now() - 10;
  l.time_limit = 60;
  hub.Send("n1", l);
  hub.Send("n1", api::AgentWork::Limit{1, l.start_time, 120});
  const api::AgentWork first = hub.Wait("n1", 0, 0);
  ASSERT_EQ(first.launch.size(), 1u);
  EXPECT_EQ(first.launch[0].time_left, 50);
  EXPECT_EQ(first.limits[0].time_left, 110);
  clock.Advance(seconds(20));  // lost; sent again
  const api::AgentWork again = hub.Wait("n1", 0, 0);
  ASSERT_EQ(again.launch.size(), 1u);
  EXPECT_EQ(again.launch[0].time_left, 30);
  clock.Advance(seconds(60));
  EXPECT_EQ(hub.Wait("n1", 0, 0).launch[0].time_left, 0) << "never below 0";
}

TEST(AgentHubTest, AnAgentThatDoesNotAcknowledgeGetsEachItemOnce) {
  FakeClock clock;
  AgentHub hub(&clock);
  hub.Open("n1");
  hub.Send("n1", LaunchOf(1));
  const api::AgentWork w = hub.Wait("n1", 0);
  ASSERT_EQ(w.launch.size(), 1u);
  EXPECT_EQ(w.seq, 0u);
  EXPECT_TRUE(hub.Wait("n1", 0).Empty());
}

TEST(AgentHubTest, ARegistrationDropsTheBatchNotAcknowledged) {
  FakeClock clock;
  AgentHub hub(&clock);
  hub.Open("n1");
  hub.Send("n1", LaunchOf(1));
  ASSERT_EQ(hub.Wait("n1", 0, 0).launch.size(), 1u);
  hub.Open("n1");  // registration reconciles from the records instead
  EXPECT_TRUE(hub.Wait("n1", 0, 0).Empty());
}

TEST(AgentHubTest, ALaterBurnInRunReplacesOneNotSent) {
  FakeClock clock;
  AgentHub hub(&clock);
  hub.Open("n1");
  api::BurnInWork a, b;
  a.run = 1;
  b.run = 2;
  hub.Send("n1", a);
  hub.Send("n1", b);
  const api::AgentWork w = hub.Wait("n1", 0, 0);
  ASSERT_TRUE(w.burn_in.has_value());
  EXPECT_EQ(w.burn_in->run, 2);
}

// The waits below are real ones (a poll blocks a thread), bounded by the futures' own
// timeouts; each ends long before its poll's 60 s deadline only if it was woken. A poll
// marks its node heard from under the lock it then waits with: once the node shows as
// heard from (the clock moved on before), its poll is waiting.
TEST(AgentHubTest, ALaunchWakesAWaitingPoll) {
  FakeClock clock;
  AgentHub hub(&clock);
  hub.Open("n1");
  clock.Advance(seconds(1));
  auto poll = std::async(std::launch::async, [&] { return hub.Wait("n1", 60000); });
  ASSERT_TRUE(WaitFor([&] { return hub.SilentForMs("n1") == 0; }));
  hub.Send("n1", LaunchOf(5));
  ASSERT_EQ(poll.wait_for(seconds(10)), std::future_status::ready);
  const api::AgentWork w = poll.get();
  ASSERT_EQ(w.launch.size(), 1u);
  EXPECT_EQ(w.launch[0].job, 5);
}

TEST(AgentHubTest, CloseAndStopWakeWaitingPolls) {
  FakeClock clock;
  AgentHub hub(&clock);
  hub.Open("n1");
  hub.Open("n2");
  clock.Advance(seconds(1));
  auto closed = std::async(std::launch::async, [&] { return hub.Wait("n1", 60000); });
  auto stopped = std::async(std::launch::async, [&] { return hub.Wait("n2", 60000); });
  ASSERT_TRUE(
      WaitFor([&] { return hub.SilentForMs("n1") == 0 && hub.SilentForMs("n2") == 0; }));
  hub.Close("n1");
  ASSERT_EQ(closed.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_TRUE(closed.get().reregister);
  hub.Stop();
  ASSERT_EQ(stopped.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_FALSE(stopped.get().reregister);
  EXPECT_FALSE(hub.Wait("n2", 60000).reregister);  // at once after Stop
}

}  // namespace
}  // namespace hachi::server
