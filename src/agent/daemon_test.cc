#include "agent/daemon.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "agent/fake_launcher.h"
#include "agent/lease_file.h"
#include "agent/scripted_server_testing.h"
#include "api/protocol_json.h"
#include "core/testing/paths.h"
#include "core/testing/wait_for.h"
#include "server/http_api.h"
#include "server/testing.h"

namespace hachi::agent {
namespace {

// Work with these launches (and `reregister`), nothing else.
api::AgentWork WorkOf(std::vector<api::LaunchSpec> launch, bool reregister) {
  api::AgentWork w;
  w.launch = std::move(launch);
  w.reregister = reregister;
  return w;
}

using server::testing::kAlice;
using server::testing::MakeSubmit;

constexpr const char* kClusterSecret =
    "daemon-test-secret";  // the agents' (server/auth.h)

AgentOptions Options(const std::string& server, int poll_wait_ms) {
  const api::AgentRegistration reg = server::testing::MakeAgent("n1");
  AgentOptions o;
  o.server = server;
  o.node = reg.node;
  o.address = "127.0.0.1";
  o.topology_json = reg.topology_json;
  o.cpus = reg.cpus;
  o.memory_mib = reg.memory_mib;
  o.poll_wait_ms = poll_wait_ms;
  o.cluster_secret = kClusterSecret;
  return o;
}

// An AgentDaemon whose launcher is a FakeLauncher the test can reach.
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

// ---- Against the real server (Controller + HttpServer in this process) ----

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ControllerOptions o;
    o.cycle_interval_ms = 20;
    Result<std::unique_ptr<server::Controller>> c =
        server::Controller::Create(o, state::NewMemoryStore());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    controller_ = std::move(*c);
    controller_->Start();
    server::HttpOptions h;
    h.listen = "127.0.0.1:0";
    h.threads = 8;
    h.auth.cluster_secret = kClusterSecret;
    http_ = std::make_unique<server::HttpServer>(controller_.get(), h);
    ASSERT_TRUE(http_->Start().ok());
  }
  void TearDown() override {
    agent_.reset();
    controller_->Stop();
    http_->Stop();
  }
  state::JobState StateOf(state::JobId id) {
    return controller_->job_views().Job(id)->state;
  }

  std::unique_ptr<server::Controller> controller_;
  std::unique_ptr<server::HttpServer> http_;
  std::unique_ptr<Agent> agent_;
};

TEST_F(DaemonTest, RegistersRunsAndReportsAJob) {
  agent_ = std::make_unique<Agent>(Options(http_->url(), 2000));
  ASSERT_TRUE(agent_->daemon.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return agent_->daemon.registered(); }));
  Result<std::vector<state::JobId>> ids =
      controller_->jobs().Submit(MakeSubmit().Gpus(4).Time(90), kAlice);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  const state::JobId id = ids->front();
  FakeLauncher& fake = *agent_->launcher;
  ASSERT_TRUE(WaitFor([&] { return fake.launches().size() == 1; }));
  const api::LaunchSpec l = fake.launches()[0];
  EXPECT_EQ(l.job, id);
  EXPECT_EQ(l.gpus.size(), 4);
  EXPECT_EQ(l.time_limit, 90);
  EXPECT_EQ(l.node_addresses, std::vector<std::string>{"127.0.0.1"});
  EXPECT_EQ(StateOf(id), state::JobState::kRunning);
  ASSERT_TRUE(fake.Finish(id, 0));
  ASSERT_TRUE(WaitFor([&] { return StateOf(id) == state::JobState::kCompleted; }));

  // A cancel reaches the launcher and ends the job as cancelled.
  const state::JobId second =
      controller_->jobs().Submit(MakeSubmit().Gpus(1), kAlice)->front();
  ASSERT_TRUE(WaitFor([&] { return fake.launches().size() == 2; }));
  ASSERT_TRUE(controller_->jobs().Cancel(second, kAlice).ok());
  ASSERT_TRUE(WaitFor([&] { return StateOf(second) == state::JobState::kCancelled; }));
  ASSERT_EQ(fake.cancels().size(), 1u);
  EXPECT_EQ(fake.cancels()[0].first, second);
}

// A GPU fault the monitor reports reaches the server: that GPU leaves service, the job
// on it is requeued and stopped here, and it runs again elsewhere on the node.
TEST_F(DaemonTest, GpuFaultTakesTheGpuOutAndRequeuesItsJob) {
  agent_ = std::make_unique<Agent>(Options(http_->url(), 2000));
  ASSERT_TRUE(agent_->daemon.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return agent_->daemon.registered(); }));
  const state::JobId id =
      controller_->jobs().Submit(MakeSubmit().Gpus(2).Time(90), kAlice)->front();
  FakeLauncher& fake = *agent_->launcher;
  ASSERT_TRUE(WaitFor([&] { return fake.launches().size() == 1; }));
  const int bad = fake.launches()[0].gpus.First();
  const std::string node = fake.launches()[0].node;
  agent_->daemon.ReportHealth(api::GpuHealthEvent{
      bad, "xid", 79, "fatal", "Xid 79: GPU has fallen off the bus", 0});
  ASSERT_TRUE(WaitFor([&] { return fake.cancels().size() == 1; }))
      << "the job is stopped";
  EXPECT_EQ(fake.cancels()[0].first, id);
  // (The fake launcher reports the cancelled run's exit at once: a stale run's exit.)
  ASSERT_TRUE(WaitFor([&] { return fake.launches().size() == 2; }))
      << "and runs again; job "
      << state::JobStateName(controller_->job_views().Job(id)->state) << " "
      << controller_->job_views().Job(id)->start_time << " launches "
      << fake.launches().size();
  EXPECT_FALSE(fake.launches()[1].gpus.contains(bad));
  EXPECT_EQ(controller_->job_views().Job(id)->requeues, 1);
  bool out = false;
  for (const state::NodeStatus& n : controller_->cluster_views().Nodes()) {
    if (n.record.name == node) out = n.record.unhealthy.contains(bad);
  }
  EXPECT_TRUE(out);
}

TEST_F(DaemonTest, StopReturnsPromptlyDuringALongPoll) {
  agent_ = std::make_unique<Agent>(Options(http_->url(), 20000));
  ASSERT_TRUE(agent_->daemon.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return agent_->daemon.registered(); }));
  // Now in the poll: parked in the server until work comes or 20 s pass.
  ASSERT_TRUE(WaitFor([&] { return http_->connection_stats().parked >= 1; }));
  const auto t0 = std::chrono::steady_clock::now();
  agent_->daemon.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1000));
}

// ---- Against a scripted server: what the daemon does with a given answer ----

api::LaunchSpec Launch(state::JobId id, Time start_time) {
  api::LaunchSpec l;
  l.job = id;
  l.node = "n1";
  l.gpus = GpuSet::FromIndices({0});
  l.start_time = start_time;
  return l;
}

// A signal in the work answer reaches the launcher, after the launch of the
// same answer, with its batch-only flag; one for the steps' tasks goes to the step
// runner instead (StepsE2e has it reach them).
TEST(DaemonScripted, SignalsReachTheLauncher) {
  ScriptedServer server;
  Agent agent(Options(server.url(), 1000));
  ASSERT_TRUE(agent.daemon.Start().ok());
  api::AgentWork w;
  w.launch = {Launch(8, 1000)};
  w.signals = {{8, 14, api::SignalScope::kSteps},
               {8, 10, api::SignalScope::kBatch},
               {8, 12, api::SignalScope::kAll}};
  server.Send(w);
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->signals().size() == 2; }));
  EXPECT_EQ(agent.launcher->launches().size(), 1u);
  const std::vector<api::JobSignal> got = agent.launcher->signals();
  EXPECT_EQ(got[0].job, 8);
  EXPECT_EQ(got[0].signal, 10);
  EXPECT_EQ(got[0].scope, api::SignalScope::kBatch);
  EXPECT_EQ(got[1].signal, 12);
  EXPECT_EQ(got[1].scope, api::SignalScope::kAll);
}

TEST(DaemonScripted, RepeatedLaunchIsReportedAgainNotLaunched) {
  ScriptedServer server;
  Agent agent(Options(server.url(), 1000));
  ASSERT_TRUE(agent.daemon.Start().ok());
  server.Send(WorkOf({Launch(7, 1000)}, false));
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->launches().size() == 1; }));
  // Sent again while it runs: ignored.
  const int polls = server.polls();
  server.Send(WorkOf({Launch(7, 1000)}, false));
  ASSERT_TRUE(WaitFor([&] { return server.polls() >= polls + 2; }));
  EXPECT_EQ(agent.launcher->launches().size(), 1u);
  EXPECT_TRUE(server.exits().empty());

  ASSERT_TRUE(agent.launcher->Finish(7, 3));
  ASSERT_TRUE(WaitFor([&] { return server.exits().size() == 1; }));
  // Sent again after it ended (the server lost the report): the exit, again.
  server.Send(WorkOf({Launch(7, 1000)}, false));
  ASSERT_TRUE(WaitFor([&] { return server.exits().size() == 2; }));
  EXPECT_EQ(server.exits()[1].job, 7);
  EXPECT_EQ(server.exits()[1].exit_code, 3);
  EXPECT_EQ(agent.launcher->launches().size(), 1u) << "never launched twice";

  // The same job requeued and started again (a later start): a new run, launched.
  server.Send(WorkOf({Launch(7, 2000)}, false));
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->launches().size() == 2; }));
  EXPECT_EQ(agent.launcher->launches()[1].start_time, 2000);
  agent.daemon.Stop();
  EXPECT_EQ(server.registrations().size(), 1u);
  EXPECT_EQ(server.registrations()[0].node, "n1");
}

// Every poll acknowledges the last batch the agent acted on (0 after registering), so
// that the server sends a batch whose answer was lost again.
TEST(DaemonScripted, AcknowledgesTheBatchItActedOn) {
  ScriptedServer server;
  Agent agent(Options(server.url(), 1000));
  ASSERT_TRUE(agent.daemon.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return !server.acks().empty(); }));
  EXPECT_EQ(server.acks().front(), "0");
  api::AgentWork w = WorkOf({Launch(7, 1000)}, false);
  w.seq = 41;
  server.Send(w);
  ASSERT_TRUE(WaitFor([&] { return server.acks().back() == "41"; }));
  EXPECT_EQ(agent.launcher->launches().size(), 1u);
}

// A stop for a run the agent never got (its launch was lost, or comes later) ends that
// run as cancelled, and its launch, when it comes, is not run: a cancel always ends
// the job, and never loses to a launch that arrives after it.
TEST(DaemonScripted, AStopOfARunNeverStartedEndsItAndItsLateLaunchIsNotRun) {
  ScriptedServer server;
  Agent agent(Options(server.url(), 1000));
  ASSERT_TRUE(agent.daemon.Start().ok());
  api::AgentWork stop;
  stop.cancel = {{7, 1000}};
  server.Send(stop);
  ASSERT_TRUE(WaitFor([&] { return server.exits().size() == 1; }));
  EXPECT_EQ(server.exits()[0].job, 7);
  EXPECT_EQ(server.exits()[0].start_time, 1000);
  EXPECT_EQ(server.exits()[0].kind, api::ExitKind::kCancelled);
  server.Send(WorkOf({Launch(7, 1000)}, false));
  ASSERT_TRUE(WaitFor([&] { return server.exits().size() == 2; }))
      << "the late launch is answered with the exit again";
  EXPECT_TRUE(agent.launcher->launches().empty());

  // A stop and the launch of one run in one batch: the stop wins, whatever the order.
  api::AgentWork both = WorkOf({Launch(8, 1000)}, false);
  both.cancel = {{8, 1000}};
  server.Send(both);
  // Its exit, as cancelled; maybe twice: when the report of the stop was acknowledged
  // before the launch was looked at, the launch is answered with the exit again (the
  // server counts an exit once).
  ASSERT_TRUE(WaitFor([&] { return server.exits().size() >= 3; }));
  for (size_t i = 2; i < server.exits().size(); ++i) {
    EXPECT_EQ(server.exits()[i].job, 8);
    EXPECT_EQ(server.exits()[i].kind, api::ExitKind::kCancelled);
  }
  EXPECT_TRUE(agent.launcher->launches().empty());
}

// A stop names its run: the stop of a requeued job's earlier run leaves the new run
// alone.
TEST(DaemonScripted, AStopOfAnEarlierRunLeavesTheRunningOneAlone) {
  ScriptedServer server;
  Agent agent(Options(server.url(), 1000));
  ASSERT_TRUE(agent.daemon.Start().ok());
  server.Send(WorkOf({Launch(7, 1000)}, false));
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->launches().size() == 1; }));
  ASSERT_TRUE(agent.launcher->Finish(7, 0));
  server.Send(WorkOf({Launch(7, 2000)}, false));
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->launches().size() == 2; }));
  api::AgentWork stop;
  stop.cancel = {{7, 1000}};
  const int polls = server.polls();
  server.Send(stop);
  ASSERT_TRUE(WaitFor([&] { return server.polls() >= polls + 2; }));
  EXPECT_EQ(agent.launcher->Running(), std::vector<state::JobId>{7});
  // The stop of the run it has: cancelled.
  stop.cancel = {{7, 2000}};
  server.Send(stop);
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->Running().empty(); }));
}

// A stop that comes while its run is being launched (the report thread launches a
// requeued job's run once its earlier run exits) stops it once the launch returns: the
// launcher, which does not know the run yet, would drop it.
TEST(DaemonScripted, AStopDuringItsRunsLaunchStopsItOnceLaunched) {
  ScriptedServer server;
  Agent agent(Options(server.url(), 1000));
  ASSERT_TRUE(agent.daemon.Start().ok());
  server.Send(WorkOf({Launch(7, 1000)}, false));
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->launches().size() == 1; }));
  // The requeued run comes while the first still runs: it waits for its exit.
  int polls = server.polls();
  server.Send(WorkOf({Launch(7, 2000)}, false));
  ASSERT_TRUE(WaitFor([&] { return server.polls() >= polls + 2; }));
  agent.launcher->HoldLaunches(true);
  ASSERT_TRUE(agent.launcher->Finish(7, 0));
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->launches_held() == 1; }));
  // Its stop, while its launch is under way.
  api::AgentWork stop;
  stop.cancel = {{7, 2000}};
  polls = server.polls();
  server.Send(stop);
  ASSERT_TRUE(WaitFor([&] { return server.polls() >= polls + 2; }));
  agent.launcher->HoldLaunches(false);
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->launches().size() == 2; }));
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->Running().empty(); }))
      << "the run launched after its stop came still runs";
  ASSERT_TRUE(WaitFor([&] {
    for (const api::JobExit& e : server.exits()) {
      if (e.job == 7 && e.start_time == 2000 && e.kind == api::ExitKind::kCancelled)
        return true;
    }
    return false;
  }));
}

// The GPU processes are sent when the list changes, and at least every minute while it is
// not empty (their memory figures): a minute on the daemon's clock.
TEST(DaemonScripted, GpuProcessesAreSentAgainEveryMinute) {
  ScriptedServer server;
  FakeClock clock;
  AgentOptions o = Options(server.url(), 1000);
  o.clock = &clock;
  Agent agent(o);
  ASSERT_TRUE(agent.daemon.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return agent.daemon.registered(); }));
  ASSERT_FALSE(server.registrations().empty());
  EXPECT_EQ(server.registrations()[0].agent_started, clock.Now()) << "the daemon's clock";
  const std::vector<api::GpuProcessReport> procs{{0, 4242, 100, "bob", "python", 0}};
  agent.daemon.ReportProcesses(procs);
  ASSERT_TRUE(WaitFor([&] { return server.health().size() == 1; }));
  EXPECT_TRUE(server.health()[0].has_processes);
  // One report thread: once this second report is in, the first one's answer was taken
  // (the minute counts from then).
  agent.daemon.ReportHealth(api::GpuHealthEvent{0, "xid", 13, "job", "Xid 13", 0});
  ASSERT_TRUE(WaitFor([&] { return server.health().size() == 2; }));
  EXPECT_FALSE(server.health()[1].has_processes);
  clock.Advance(std::chrono::seconds(59));
  agent.daemon.ReportProcesses(procs);  // the same list within the minute: not sent
  // ReportProcesses decides before it returns; the next report, for this event, is the
  // first that would carry the list (or come after one that did).
  agent.daemon.ReportHealth(api::GpuHealthEvent{1, "xid", 13, "job", "Xid 13", 0});
  ASSERT_TRUE(WaitFor([&] { return server.health().size() >= 3; }));
  EXPECT_FALSE(server.health()[2].has_processes) << "sent again within the minute";
  EXPECT_EQ(server.health()[2].events.size(), 1u);
  clock.Advance(std::chrono::seconds(1));
  agent.daemon.ReportProcesses(procs);
  ASSERT_TRUE(WaitFor([&] { return server.health().size() == 4; }));
  EXPECT_TRUE(server.health()[3].has_processes);
  ASSERT_EQ(server.health()[3].processes.size(), 1u);
  EXPECT_EQ(server.health()[3].processes[0].pid, 4242u);
}

// A share that no MPS server limits is watched: when its processes on its GPU
// use more GPU memory than it was promised it is stopped as OUT_OF_MEMORY with the
// figures, and its neighbour on the same GPU, within its promise, is not.
TEST(DaemonScripted, AShareOverItsSoftLimitIsStoppedAndItsNeighbourIsNot) {
  ScriptedServer server;
  AgentOptions o = Options(server.url(), 1000);
  o.gpu_sharing = "soft-limit: off (--mps off)";
  Agent agent(o);
  ASSERT_TRUE(agent.daemon.Start().ok());
  api::LaunchSpec a = Launch(21, 1000), b = Launch(22, 1000), whole = Launch(23, 1000);
  for (api::LaunchSpec* l : {&a, &b}) {
    l->gpus = GpuSet::FromIndices({2});
    l->share_milli = 500;
    l->gpu_memory_mib = 20480;
  }
  whole.gpus = GpuSet::FromIndices({3});
  server.Send(WorkOf({a, b, whole}, false));
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->launches().size() == 3; }));
  EXPECT_EQ(server.registrations()[0].gpu_sharing, "soft-limit: off (--mps off)");
  // No MPS: the shares' CUDA contexts find no pipe directory.
  EXPECT_EQ(agent.launcher->launches()[0].mps_pipe_dir, "");
  // Within the promise (two processes of job 21: 20 GiB together): nothing.
  agent.daemon.ReportProcesses({{2, 100, 10240, "bob", "python", 21},
                                {2, 101, 10240, "bob", "python", 21},
                                {2, 200, 5000, "bob", "python", 22},
                                {3, 300, 80000, "bob", "python", 23}});
  EXPECT_TRUE(agent.launcher->stops().empty());
  // Job 21 grows to 23.1 GiB; its processes elsewhere do not count against GPU 2.
  agent.daemon.ReportProcesses({{2, 100, 13414, "bob", "python", 21},
                                {2, 101, 10240, "bob", "python", 21},
                                {2, 200, 5000, "bob", "python", 22},
                                {3, 300, 80000, "bob", "python", 23}});
  ASSERT_EQ(agent.launcher->stops().size(), 1u);
  EXPECT_EQ(agent.launcher->stops()[0].job, 21);
  EXPECT_EQ(agent.launcher->stops()[0].kind, api::ExitKind::kOutOfMemory);
  EXPECT_EQ(agent.launcher->stops()[0].message,
            "used 23.1 GiB of GPU memory on GPU 2, promised 20 GiB (--gpu-mem)");
  ASSERT_TRUE(WaitFor([&] { return server.exits().size() == 1; }));
  EXPECT_EQ(server.exits()[0].kind, api::ExitKind::kOutOfMemory);
  EXPECT_EQ(agent.launcher->Running(), (std::vector<state::JobId>{22, 23}));
}

// With MPS, a share's launch carries its GPU's daemon (a fake
// nvidia-cuda-mps-control), which stops after the share's exit.
TEST(DaemonScripted, AShareGoesThroughItsGpusMpsDaemon) {
  char tmpl[] = "/tmp/hachi-daemon-mps-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  ScriptedServer server;
  AgentOptions o = Options(server.url(), 1000);
  MpsOptions m;
  m.control = FakeMpsControl();
  m.dir = dir;
  m.devices = {"0", "1", "GPU-2222"};
  m.check_interval_ms = 20;
  o.mps = std::make_shared<MpsDaemons>(m);
  o.gpu_sharing = "mps";
  Agent agent(o);
  ASSERT_TRUE(agent.daemon.Start().ok());
  api::LaunchSpec a = Launch(31, 1000);
  a.gpus = GpuSet::FromIndices({2});
  a.share_milli = 250;
  server.Send(WorkOf({a}, false));
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->launches().size() == 1; }));
  const api::LaunchSpec got = agent.launcher->launches()[0];
  EXPECT_EQ(got.mps_pipe_dir, dir + "/gpu2/pipe");
  EXPECT_EQ(got.mps_log_dir, dir + "/gpu2/log");
  EXPECT_EQ(got.mps_device, "GPU-2222");
  const pid_t daemon = o.mps->DaemonPid(2);
  EXPECT_GT(daemon, 0);
  ASSERT_TRUE(agent.launcher->Finish(31, 0));
  EXPECT_TRUE(WaitFor([&] { return o.mps->Serving().empty(); }));
  EXPECT_TRUE(WaitFor([&] { return kill(daemon, 0) != 0; }));
  agent.daemon.Stop();
  std::system(("rm -rf " + dir).c_str());
}

TEST(DaemonScripted, ReregistersWhenTold) {
  ScriptedServer server;
  Agent agent(Options(server.url(), 1000));
  ASSERT_TRUE(agent.daemon.Start().ok());
  server.Send(WorkOf({Launch(9, 1000)}, false));
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->launches().size() == 1; }));
  server.Send(WorkOf({}, true));
  ASSERT_TRUE(WaitFor([&] { return server.registrations().size() == 2; }));
  EXPECT_EQ(server.registrations()[1].running, std::vector<state::JobId>{9});
  EXPECT_EQ(server.registrations()[0].agent_started,
            server.registrations()[1].agent_started);
}

// The lease: with the server silent (its connection open, no answer: the poll in flight
// hangs), the agent stops its jobs when the lease has passed since the last call the
// server answered was sent, and not before; once the server answers again it reports
// them lost. The lease is the server's (register reply), else the agent's 30 s.
struct LeaseCase {
  const char* name;
  int server_lease_s;  // 0: the reply has none
  int lease_s;         // what the agent holds
};

class DaemonLease : public ::testing::TestWithParam<LeaseCase> {};

TEST_P(DaemonLease, StopsItsJobsWhenTheLeaseExpiresAndNotBefore) {
  const LeaseCase& c = GetParam();
  ScriptedServer server;
  server.SetLease(c.server_lease_s);
  FakeClock clock;
  AgentOptions o = Options(server.url(), 1000);
  o.clock = &clock;
  Agent agent(o);
  ASSERT_TRUE(agent.daemon.Start().ok());
  server.Send(WorkOf({Launch(7, 1000), Launch(8, 1000)}, false));
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->launches().size() == 2; }));
  server.Hang(true);
  ASSERT_TRUE(WaitFor([&] { return server.hung_calls() >= 1; })) << "a poll hangs";
  // Every call the server answered was sent at this clock time or before.
  clock.Advance(std::chrono::seconds(c.lease_s - 1));
  agent.daemon.TickLease();
  EXPECT_TRUE(agent.launcher->cancels().empty()) << "stopped before its lease expired";
  clock.Advance(std::chrono::seconds(2));
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->cancels().size() == 2; },
                      std::chrono::milliseconds(3000)))
      << "the lease checker does not wait for the hung poll";
  for (const auto& [job, reason] : agent.launcher->cancels()) {
    EXPECT_NE(reason.find("lease expired: no contact with the server for " +
                          std::to_string(c.lease_s) + " s"),
              std::string::npos)
        << reason;
  }
  EXPECT_TRUE(server.exits().empty()) << "nothing reached the server";
  server.Hang(false);
  ASSERT_TRUE(WaitFor([&] { return server.exits().size() == 2; }));
  for (const api::JobExit& e : server.exits()) {
    EXPECT_EQ(e.kind, api::ExitKind::kLost) << e.job;
    EXPECT_EQ(e.start_time, 1000) << e.job;
    EXPECT_NE(e.message.find("lease expired"), std::string::npos) << e.message;
  }
  agent.daemon.Stop();
}

INSTANTIATE_TEST_SUITE_P(All, DaemonLease,
                         ::testing::Values(LeaseCase{"FromTheServer", 20, 20},
                                           LeaseCase{"OlderServerDefault", 0, 30}),
                         [](const ::testing::TestParamInfo<LeaseCase>& p) {
                           return p.param.name;
                         });

// A server that is down (its address refuses connections) is no cut: the agent keeps
// its jobs past the lease for as long as the refusals go on (docs/fencing.md).
TEST(DaemonOutage, KeepsItsJobsWhileTheServersAddressRefusesConnections) {
  ScriptedServer server;
  server.SetLease(20);
  FakeClock clock;
  AgentOptions o = Options(server.url(), 1000);
  o.clock = &clock;
  char dir[] = "/tmp/hachi-daemon-lease-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  Result<std::unique_ptr<LeaseFile>> lease =
      LeaseFile::Open(std::string(dir) + "/lease", &clock);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  o.lease_file = std::move(*lease);
  const LeaseFile& file = *o.lease_file;
  Agent agent(o);
  ASSERT_TRUE(agent.daemon.Start().ok());
  server.Send(WorkOf({Launch(7, 1000), Launch(8, 1000)}, false));
  ASSERT_TRUE(WaitFor([&] { return agent.launcher->launches().size() == 2; }));
  ASSERT_TRUE(WaitFor([&] { return server.polls() >= 3; }));  // renewed after the launch
  server.Close();
  // Three leases, in steps shorter than one, each with a refusal seen after it.
  for (int step = 0; step < 4; ++step) {
    const int64_t before = clock.MonotonicMs();
    clock.Advance(std::chrono::seconds(15));
    ASSERT_TRUE(WaitFor([&] { return agent.daemon.last_refusal_ms() >= before + 15000; },
                        std::chrono::seconds(10)))
        << "step " << step;
    agent.daemon.TickLease();
    EXPECT_TRUE(agent.launcher->cancels().empty()) << "stopped at step " << step;
    // The job waiters, which stop the runs of a dead agent, are told the same.
    EXPECT_GT(file.deadline_ms(), clock.MonotonicMs()) << "step " << step;
  }
  agent.daemon.Stop(false);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hachi::agent
