// The burn-in gate in the Controller (server/burn_in.cc): which registrations
// and resumes start a run, what the agent's report does, and that a node or GPU in
// burn-in never gets a job.
#include "server/burn_in.h"

#include <gtest/gtest.h>

#include "config/cluster_config.h"
#include "core/clock.h"
#include "server/testing.h"
#include "state/edits.h"

namespace hachi::server {
namespace {

using testing::Harness;
using testing::kAlice;
using testing::kRoot;
using testing::MakeAgent;
using testing::MakeSubmit;

// A real (not simulated) HGX H100 node's registration, with a driver.
AgentRegistration RealAgent(const std::string& node, const std::string& driver) {
  AgentRegistration r = MakeAgent(node);
  r.simulated = false;
  r.gpu_driver = driver;
  return r;
}

ControllerOptions WithChecks(std::vector<std::string> checks, const Clock* clock) {
  ControllerOptions o;
  o.config.emplace();
  o.config->burn_in.checks = std::move(checks);
  o.clock = clock;
  return o;
}

state::NodeRecord NodeOf(Harness& h, const std::string& name) {
  for (const state::NodeStatus& n : h->cluster_views().Nodes()) {
    if (n.record.name == name) return n.record;
  }
  ADD_FAILURE() << "no node " << name;
  return {};
}

api::BurnInReport Report(int run, bool passed, std::string check = "",
                         std::string reason = "") {
  api::BurnInReport r;
  r.run = run;
  r.passed = passed;
  r.check = std::move(check);
  r.reason = std::move(reason);
  return r;
}

TEST(BurnInFingerprint, DriverAndHardwareNotSpelling) {
  const std::string topo = testing::PresetJson("hgx-h100");
  Result<std::string> a = BurnInFingerprint("550.54.15", topo, "n1");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->size(), 16u);
  EXPECT_EQ(*BurnInFingerprint("550.54.15", topo, "n2"), *a);  // the name is not in it
  EXPECT_NE(*BurnInFingerprint("560.35.03", topo, "n1"), *a);  // a driver upgrade
  EXPECT_NE(*BurnInFingerprint("550.54.15", testing::PresetJson("dgx1-v100"), "n1"), *a);
  EXPECT_FALSE(BurnInFingerprint("550", "{not json", "n1").ok());
  EXPECT_EQ(BurnInRunningReason({"doctor --expect-gpus 8", "commtest"},
                                GpuSet::FromIndices({3})),
            "burn-in: running doctor, commtest (GPU 3)");
  EXPECT_EQ(BurnInFailedReason("doctor --x", "persistence (GPU 3): off"),
            "burn-in failed: doctor: persistence (GPU 3): off");
}

// A new real node is burned in before it takes a job; a failure keeps it out with the
// failing check as its reason; resume runs the checks again; a pass puts it in service.
TEST(BurnIn, NewNodeTakesNoJobUntilItPasses) {
  FakeClock clock;
  Harness h(WithChecks({"doctor"}, &clock));
  ASSERT_TRUE(h->nodes().Register(RealAgent("n1", "550.54.15")).ok());
  state::NodeRecord n = NodeOf(h, "n1");
  EXPECT_EQ(n.state, state::NodeState::kBurnIn);
  EXPECT_EQ(n.state_reason, "burn-in: running doctor");
  EXPECT_EQ(n.burn_in, state::BurnInPhase::kRunning);
  EXPECT_EQ(n.burn_in_run, 1);
  AgentWork w = h.Work("n1");
  ASSERT_TRUE(w.burn_in.has_value());
  EXPECT_EQ(w.burn_in->run, 1);
  EXPECT_EQ(w.burn_in->checks, std::vector<std::string>{"doctor"});
  EXPECT_TRUE(w.burn_in->gpus.empty());
  EXPECT_EQ(w.burn_in->timeout, 1800);

  const state::JobId id = h.Submit(MakeSubmit().Gpus(1));
  h->RunCycle();
  EXPECT_EQ(h.StateOf(id), state::JobState::kPending);
  EXPECT_TRUE(h.Work("n1").launch.empty());

  ASSERT_TRUE(h->burn_in()
                  .Report("n1", Report(1, false, "doctor",
                                       "persistence (GPU 3): persistence mode is off"))
                  .ok());
  n = NodeOf(h, "n1");
  EXPECT_EQ(n.state, state::NodeState::kBurnIn);
  EXPECT_EQ(n.burn_in, state::BurnInPhase::kFailed);
  EXPECT_EQ(n.state_reason,
            "burn-in failed: doctor: persistence (GPU 3): persistence mode is off");
  EXPECT_EQ(n.burn_in_passed, "");
  h->RunCycle();
  EXPECT_EQ(h.StateOf(id), state::JobState::kPending);

  // Only an admin resumes; resume runs the checks again (run 2).
  EXPECT_FALSE(h->nodes().Resume("n1", -1, kAlice).ok());
  ASSERT_TRUE(h->nodes().Resume("n1", -1, kRoot).ok());
  n = NodeOf(h, "n1");
  EXPECT_EQ(n.burn_in_run, 2);
  EXPECT_EQ(n.burn_in, state::BurnInPhase::kRunning);
  w = h.Work("n1");
  ASSERT_TRUE(w.burn_in.has_value());
  EXPECT_EQ(w.burn_in->run, 2);
  // Run 1's report, late, changes nothing.
  ASSERT_TRUE(h->burn_in().Report("n1", Report(1, true)).ok());
  EXPECT_EQ(NodeOf(h, "n1").state, state::NodeState::kBurnIn);

  ASSERT_TRUE(h->burn_in().Report("n1", Report(2, true)).ok());
  n = NodeOf(h, "n1");
  EXPECT_EQ(n.state, state::NodeState::kUp);
  EXPECT_EQ(n.state_reason, "");
  EXPECT_EQ(n.burn_in, state::BurnInPhase::kNone);
  EXPECT_EQ(n.burn_in_passed,
            *BurnInFingerprint("550.54.15", testing::PresetJson("hgx-h100"), "n1"));
  h->RunCycle();
  EXPECT_EQ(h.StateOf(id), state::JobState::kRunning);
  EXPECT_EQ(h.Work("n1").launch.size(), 1u);

  // The same node again (an agent restart): no new run. Another driver: burned in again.
  ASSERT_TRUE(h->nodes().Register(RealAgent("n1", "550.54.15")).ok());
  EXPECT_EQ(NodeOf(h, "n1").state, state::NodeState::kUp);
  EXPECT_FALSE(h.Work("n1").burn_in.has_value());
  ASSERT_TRUE(h->nodes().Register(RealAgent("n1", "560.35.03")).ok());
  EXPECT_EQ(NodeOf(h, "n1").state, state::NodeState::kBurnIn);
  EXPECT_EQ(NodeOf(h, "n1").burn_in_run, 3);
  EXPECT_TRUE(h.Work("n1").burn_in.has_value());
}

// Simulated nodes skip [burn_in]'s checks unless it says simulated = true; with no
// checks at all a node goes straight into service.
TEST(BurnIn, SimulatedAndUncheckedNodesGoStraightIn) {
  FakeClock clock;
  Harness h(WithChecks({"doctor"}, &clock));
  ASSERT_TRUE(h->nodes().Register(MakeAgent("sim1")).ok());  // simulated
  EXPECT_EQ(NodeOf(h, "sim1").state, state::NodeState::kUp);
  EXPECT_FALSE(h.Work("sim1").burn_in.has_value());

  ControllerOptions o = WithChecks({"/opt/site/check"}, &clock);
  o.config->burn_in.simulated = true;
  Harness asked(std::move(o));
  ASSERT_TRUE(asked->nodes().Register(MakeAgent("sim1")).ok());
  EXPECT_EQ(NodeOf(asked, "sim1").state, state::NodeState::kBurnIn);

  Harness off(WithChecks({}, &clock));
  ASSERT_TRUE(off->nodes().Register(RealAgent("n1", "550.54.15")).ok());
  EXPECT_EQ(NodeOf(off, "n1").state, state::NodeState::kUp);
}

// A node known from before burn-in existed (its row upgraded: kBurnInAdopt) is adopted:
// its fingerprint now is taken as passed, and no run takes it out of service.
TEST(BurnIn, NodesFromBeforeBurnInAreAdopted) {
  FakeClock clock;
  std::unique_ptr<state::Store> store = state::NewMemoryStore();
  state::NodeRecord old = state::NodeRecord{};
  old.name = "n1";
  old.topology_json = testing::PresetJson("hgx-h100");
  old.cpus = 128;
  old.memory_mib = 1 << 20;
  old.state = state::NodeState::kUp;
  old.burn_in_passed = kBurnInAdopt;
  ASSERT_TRUE(store->Commit({state::NodeUpserted{old}}).ok());
  Harness h(WithChecks({"doctor"}, &clock), std::move(store));
  ASSERT_TRUE(h->nodes().Register(RealAgent("n1", "550.54.15")).ok());
  const state::NodeRecord n = NodeOf(h, "n1");
  EXPECT_EQ(n.state, state::NodeState::kUp);
  EXPECT_EQ(n.burn_in_passed,
            *BurnInFingerprint("550.54.15", testing::PresetJson("hgx-h100"), "n1"));
  EXPECT_FALSE(h.Work("n1").burn_in.has_value());
}

// A GPU back from repair is burned in alone: it stays out of service (unhealthy, with
// the run as its reason) while the node keeps its other GPUs in service.
TEST(BurnIn, GpuBackFromRepairStaysOutUntilItPasses) {
  FakeClock clock;
  Harness h(WithChecks({"doctor"}, &clock));
  ASSERT_TRUE(h->nodes().Register(RealAgent("n1", "550.54.15")).ok());
  ASSERT_TRUE(h->burn_in().Report("n1", Report(1, true)).ok());
  api::AgentHealth health;
  health.events.push_back(
      {5, "xid", 79, "fatal", "Xid 79: GPU has fallen off the bus", 0});
  ASSERT_TRUE(h->nodes().ReportHealth("n1", health).ok());
  ASSERT_EQ(NodeOf(h, "n1").unhealthy, GpuSet::FromIndices({5}));

  ASSERT_TRUE(h->nodes().Resume("n1", 5, kRoot).ok());
  state::NodeRecord n = NodeOf(h, "n1");
  EXPECT_EQ(n.state, state::NodeState::kUp);
  EXPECT_EQ(n.unhealthy, GpuSet::FromIndices({5}));
  EXPECT_EQ(n.unhealthy_reasons.at(5), "burn-in: running doctor (GPU 5)");
  EXPECT_EQ(n.burn_in_gpus, GpuSet::FromIndices({5}));
  AgentWork w = h.Work("n1");
  ASSERT_TRUE(w.burn_in.has_value());
  EXPECT_EQ(w.burn_in->gpus, std::vector<int>{5});

  // Eight GPUs are not free meanwhile; seven are.
  const state::JobId eight = h.Submit(MakeSubmit().Gpus(8));
  const state::JobId seven = h.Submit(MakeSubmit().Gpus(7));
  h->RunCycle();
  EXPECT_EQ(h.StateOf(eight), state::JobState::kPending);
  EXPECT_EQ(h.StateOf(seven), state::JobState::kRunning);

  ASSERT_TRUE(h->burn_in()
                  .Report("n1", Report(w.burn_in->run, false, "doctor",
                                       "ecc (GPU 5): 2 "
                                       "uncorrectable"))
                  .ok());
  n = NodeOf(h, "n1");
  EXPECT_EQ(n.unhealthy, GpuSet::FromIndices({5}));
  EXPECT_EQ(n.unhealthy_reasons.at(5),
            "burn-in failed: doctor: ecc (GPU 5): 2 uncorrectable");
  EXPECT_EQ(n.burn_in, state::BurnInPhase::kFailed);

  ASSERT_TRUE(h->nodes().Resume("n1", 5, kRoot).ok());
  w = h.Work("n1");
  ASSERT_TRUE(w.burn_in.has_value());
  ASSERT_TRUE(h->burn_in().Report("n1", Report(w.burn_in->run, true)).ok());
  n = NodeOf(h, "n1");
  EXPECT_TRUE(n.unhealthy.empty());
  EXPECT_TRUE(n.unhealthy_reasons.empty());
  EXPECT_EQ(n.burn_in, state::BurnInPhase::kNone);
  EXPECT_TRUE(n.burn_in_gpus.empty());
}

// A drained node keeps its drain through a new driver; resume sends it to burn-in rather
// than straight into service.
TEST(BurnIn, DrainWinsAndResumeBurnsIn) {
  FakeClock clock;
  Harness h(WithChecks({"doctor"}, &clock));
  ASSERT_TRUE(h->nodes().Register(RealAgent("n1", "550.54.15")).ok());
  ASSERT_TRUE(h->burn_in().Report("n1", Report(1, true)).ok());
  ASSERT_TRUE(h->nodes().Drain("n1", "driver upgrade", kRoot).ok());
  ASSERT_TRUE(h->nodes().Register(RealAgent("n1", "560.35.03")).ok());
  EXPECT_EQ(NodeOf(h, "n1").state, state::NodeState::kDrained);
  EXPECT_FALSE(h.Work("n1").burn_in.has_value());
  ASSERT_TRUE(h->nodes().Resume("n1", -1, kRoot).ok());
  EXPECT_EQ(NodeOf(h, "n1").state, state::NodeState::kBurnIn);
  AgentWork w = h.Work("n1");
  ASSERT_TRUE(w.burn_in.has_value());
  // Drained again while its run runs: the run's failure keeps the admin's drain.
  ASSERT_TRUE(h->nodes().Drain("n1", "rack power work", kRoot).ok());
  ASSERT_TRUE(
      h->burn_in().Report("n1", Report(w.burn_in->run, false, "doctor", "x")).ok());
  const state::NodeRecord n = NodeOf(h, "n1");
  EXPECT_EQ(n.state, state::NodeState::kDrained);
  EXPECT_EQ(n.state_reason, "rack power work");
  EXPECT_EQ(n.burn_in, state::BurnInPhase::kFailed);
}

// An agent that never reports (an older agent, a wedged check): the run fails at its
// timeout plus a margin, and says so.
TEST(BurnIn, ARunNeverReportedFailsAtItsTimeout) {
  FakeClock clock;
  ControllerOptions o = WithChecks({"doctor"}, &clock);
  o.config->burn_in.timeout = 600;
  Harness h(std::move(o));
  ASSERT_TRUE(h->nodes().Register(RealAgent("n1", "550.54.15")).ok());
  clock.Advance(std::chrono::seconds(600 + kBurnInReportSlack - 1));
  h.Work("n1");  // the agent polls on: alive, but silent about the run
  h->RunCycle();
  EXPECT_EQ(NodeOf(h, "n1").burn_in, state::BurnInPhase::kRunning);
  clock.Advance(std::chrono::seconds(2));
  h.Work("n1");
  h->RunCycle();
  const state::NodeRecord n = NodeOf(h, "n1");
  EXPECT_EQ(n.burn_in, state::BurnInPhase::kFailed);
  EXPECT_EQ(n.state_reason,
            "burn-in failed: burn-in: no report from the agent within 600 s");
}

}  // namespace
}  // namespace hachi::server
