// The agent among several controllers (docs/ha.md, docs/fencing.md): the replies of a
// deposed leader (an epoch below the highest seen) carry nothing that reaches a job, even
// after the agent restarts, and a standby's answers are no contact for the agent's lease.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "agent/daemon.h"
#include "agent/fake_launcher.h"
#include "agent/scripted_server_testing.h"
#include "api/epoch_floor.h"
#include "core/clock.h"
#include "core/testing/wait_for.h"
#include "server/testing.h"

namespace hachi::agent {
namespace {

AgentOptions Options(const std::string& server, std::shared_ptr<api::EpochFloor> floor) {
  const api::AgentRegistration reg = server::testing::MakeAgent("n1");
  AgentOptions o;
  o.server = server;
  o.node = reg.node;
  o.address = "127.0.0.1";
  o.topology_json = reg.topology_json;
  o.cpus = reg.cpus;
  o.memory_mib = reg.memory_mib;
  o.poll_wait_ms = 1000;
  o.cluster_secret = "epoch-test-secret";
  o.epoch_floor = std::move(floor);
  return o;
}

struct Agent {
  explicit Agent(AgentOptions o)
      : daemon(std::move(o), [this](LauncherEvents events) {
          auto l = std::make_unique<FakeLauncher>(std::move(events.on_exit));
          launcher = l.get();
          return l;
        }) {}
  FakeLauncher* launcher = nullptr;  // owned by the daemon
  AgentDaemon daemon;
};

api::LaunchSpec Launch(state::JobId id, Time start_time) {
  api::LaunchSpec l;
  l.job = id;
  l.node = "n1";
  l.gpus = GpuSet::FromIndices({0});
  l.start_time = start_time;
  return l;
}

// A launch, a cancel and a signal: everything a deposed leader could still send.
api::AgentWork EverythingFor(state::JobId running, state::JobId new_job) {
  api::AgentWork w;
  w.launch.push_back(Launch(new_job, 2000));
  w.cancel.push_back(api::RunStop{running, 1000});
  w.signals.push_back(api::JobSignal{running, 10, api::SignalScope::kAll});
  return w;
}

std::shared_ptr<api::EpochFloor> Floor(const std::string& path) {
  Result<std::shared_ptr<api::EpochFloor>> f = api::EpochFloor::Open(path);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? *f : nullptr;
}

class DaemonEpoch : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hachi-daemon-epoch-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(DaemonEpoch, ADeposedLeadersLaunchKillAndSignalAreRefused) {
  ScriptedServer server;
  server.SetEpoch(5);
  std::shared_ptr<api::EpochFloor> floor = Floor("");
  ::testing::internal::CaptureStderr();
  Agent agent(Options(server.url(), floor));
  ASSERT_TRUE(agent.daemon.Start().ok());
  api::AgentWork first;
  first.launch.push_back(Launch(7, 1000));
  server.Send(first);
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->launches().size() == 1; }));
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("now following the leader at " + server.url() + ", epoch 5"),
            std::string::npos)
      << said;
  EXPECT_EQ(floor->value(), 5);

  // Deposed: its next batch is answered to a poll, and refused.
  server.SetEpoch(4);
  const int polls = server.polls();
  server.Send(EverythingFor(7, 8));
  ASSERT_TRUE(WaitFor([&] { return server.polls() >= polls + 3; }));
  EXPECT_EQ(agent.launcher->launches().size(), 1u) << "a deposed leader's launch ran";
  EXPECT_TRUE(agent.launcher->cancels().empty()) << "a deposed leader's cancel";
  EXPECT_TRUE(agent.launcher->signals().empty()) << "a deposed leader's signal";
  EXPECT_EQ(floor->value(), 5);

  // The new leader's work is done.
  server.SetEpoch(6);
  server.Send(EverythingFor(7, 9));
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->launches().size() == 2; }));
  EXPECT_EQ(agent.launcher->launches()[1].job, 9);
  EXPECT_EQ(agent.launcher->cancels().size(), 1u);
  EXPECT_EQ(floor->value(), 6);
  agent.daemon.Stop(false);
}

TEST_F(DaemonEpoch, ARestartedAgentStillRefusesTheDeposedLeader) {
  const std::string path = dir_ + "/epoch";
  ScriptedServer server;
  server.SetEpoch(5);
  {
    Agent first(Options(server.url(), Floor(path)));
    ASSERT_TRUE(first.daemon.Start().ok());
    ASSERT_TRUE(WaitFor([&] { return first.daemon.registered(); }));
    first.daemon.Stop(false);
  }
  std::string kept;
  std::getline(std::ifstream(path), kept);
  EXPECT_EQ(kept, "5");

  // The agent restarts; the leader it meets first is a deposed one.
  server.SetEpoch(4);
  const size_t registrations = server.registrations().size();
  Agent again(Options(server.url(), Floor(path)));
  ASSERT_TRUE(again.daemon.Start().ok());
  server.Send(EverythingFor(7, 8));
  ASSERT_TRUE(
      WaitFor([&] { return server.registrations().size() >= registrations + 2; }));
  EXPECT_FALSE(again.daemon.registered()) << "registered with a deposed leader";
  EXPECT_TRUE(again.launcher->launches().empty());
  again.daemon.Stop(false);
}

// A standby answers at once, but it is not the server: the agent's lease runs out as it
// would with no answer at all, and its jobs stop then (docs/fencing.md).
TEST_F(DaemonEpoch, AStandbysAnswersDoNotExtendTheLease) {
  ScriptedServer server;
  server.SetLease(20);
  server.SetEpoch(3);
  FakeClock clock;
  AgentOptions o = Options(server.url(), Floor(""));
  o.clock = &clock;
  Agent agent(o);
  ASSERT_TRUE(agent.daemon.Start().ok());
  api::AgentWork w;
  w.launch = {Launch(7, 1000), Launch(8, 1000)};
  server.Send(w);
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->launches().size() == 2; }));
  ASSERT_TRUE(WaitFor([&] { return server.polls() >= 3; }));  // renewed after the launch
  server.SetStandby(true, "http://10.255.255.1:8686");
  clock.Advance(std::chrono::seconds(19));
  // Calls sent at 19 s, answered by the standby: contact, were they counted as such.
  const int answered = server.standby_answers();
  ASSERT_TRUE(WaitFor([&] { return server.standby_answers() >= answered + 2; }));
  agent.daemon.TickLease();
  EXPECT_TRUE(agent.launcher->cancels().empty()) << "stopped before its lease expired";
  clock.Advance(std::chrono::seconds(2));
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->cancels().size() == 2; }))
      << "a standby's answers kept the lease";
  for (const auto& [job, reason] : agent.launcher->cancels()) {
    EXPECT_NE(reason.find("lease expired"), std::string::npos) << reason;
  }
  agent.daemon.Stop(false);
}

}  // namespace
}  // namespace hachi::agent
