// MASTER_PORT from each node's port range: a job gets the lowest port of its
// rank-0 node's range that no other running job there holds, kept with its start.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "server/controller.h"
#include "server/testing.h"

namespace hachi::server {
namespace {

using state::JobState;
using testing::Harness;
using testing::MakeSubmit;

// The port the job's record holds and the one its launch on `node` carries: the same.
int PortOf(Harness& h, state::JobId id, const std::vector<api::LaunchSpec>& launches) {
  const int recorded = h.Job(id).master_port;
  for (const api::LaunchSpec& l : launches) {
    if (l.job == id) {
      EXPECT_EQ(l.master_port, recorded) << "job " << id;
      return recorded;
    }
  }
  ADD_FAILURE() << "no launch of job " << id;
  return -1;
}

TEST(MasterPort, TwoJobsOnOneNodeGetTheTwoLowestPorts) {
  Harness h;
  h.Register("n1");
  const state::JobId a = h.Submit(MakeSubmit().Gpus(1));
  h->RunCycle();
  const state::JobId b = h.Submit(MakeSubmit().Gpus(1));
  h->RunCycle();
  const AgentWork w = h.Work("n1");
  EXPECT_EQ(PortOf(h, a, w.launch), 29500);
  EXPECT_EQ(PortOf(h, b, w.launch), 29501);
}

TEST(MasterPort, APortFreedAtTheEndIsReused) {
  Harness h;
  h.Register("n1");
  const state::JobId a = h.Submit(MakeSubmit().Gpus(1));
  const state::JobId b = h.Submit(MakeSubmit().Gpus(1));
  h->RunCycle();
  AgentWork w = h.Work("n1");
  const std::set<int> first = {PortOf(h, a, w.launch), PortOf(h, b, w.launch)};
  EXPECT_EQ(first, std::set<int>({29500, 29501}));
  const int a_port = h.Job(a).master_port;
  h.Exit("n1", a, 0);
  ASSERT_EQ(h.StateOf(a), JobState::kCompleted);
  const state::JobId c = h.Submit(MakeSubmit().Gpus(1));
  h->RunCycle();
  w = h.Work("n1");
  EXPECT_EQ(PortOf(h, c, w.launch), a_port) << "the lowest free one: a's, freed";
}

// The old rule (29500 + id % 1000) gave jobs 10 and 1010 on one node the same port.
TEST(MasterPort, Jobs10And1010OnOneNodeDoNotCollide) {
  Harness h;
  h.Register("n1");
  std::vector<int> tasks;
  for (int i = 0; i < 9; ++i) tasks.push_back(i);
  ASSERT_EQ(h.Submit(MakeSubmit().Array(tasks, 0).Hold()), 1);  // ids 1-9, held
  const state::JobId ten = h.Submit(MakeSubmit().Gpus(1));
  ASSERT_EQ(ten, 10);
  h->RunCycle();
  tasks.clear();
  for (int i = 0; i < 999; ++i) tasks.push_back(i);
  ASSERT_EQ(h.Submit(MakeSubmit().Array(tasks, 0).Hold()), 11);  // ids 11-1009
  const state::JobId big = h.Submit(MakeSubmit().Gpus(1));
  ASSERT_EQ(big, 1010);
  h->RunCycle();
  ASSERT_EQ(h.StateOf(ten), JobState::kRunning);
  ASSERT_EQ(h.StateOf(big), JobState::kRunning);
  const AgentWork w = h.Work("n1");
  EXPECT_EQ(PortOf(h, ten, w.launch), 29500);
  EXPECT_EQ(PortOf(h, big, w.launch), 29501);
}

// With every port of the rank-0 node's range held, a job does not start there; it
// starts, with the freed port, once one is given back.
TEST(MasterPort, AFullRangeStartsNothingMoreThere) {
  ControllerOptions o;
  o.master_port_base = 40000;
  o.master_port_count = 2;
  Harness h(o);
  h.Register("n1");
  const state::JobId a = h.Submit(MakeSubmit().Gpus(1));
  const state::JobId b = h.Submit(MakeSubmit().Gpus(1));
  const state::JobId c = h.Submit(MakeSubmit().Gpus(1));
  h->RunCycle();
  EXPECT_EQ(h.StateOf(a), JobState::kRunning);
  EXPECT_EQ(h.StateOf(b), JobState::kRunning);
  EXPECT_EQ(h.StateOf(c), JobState::kPending) << "GPUs free, ports not";
  AgentWork w = h.Work("n1");
  EXPECT_EQ(w.launch.size(), 2u);
  EXPECT_EQ((std::set<int>{PortOf(h, a, w.launch), PortOf(h, b, w.launch)}),
            std::set<int>({40000, 40001}));
  h->RunCycle();
  EXPECT_EQ(h.StateOf(c), JobState::kPending) << "still none free";
  const int b_port = h.Job(b).master_port;
  h.Exit("n1", b, 0);
  h->RunCycle();
  ASSERT_EQ(h.StateOf(c), JobState::kRunning);
  w = h.Work("n1");
  EXPECT_EQ(PortOf(h, c, w.launch), b_port);
}

// Two gangs on the same two nodes: the same rank-0 node, so two ports; every part of a
// gang gets its gang's port.
TEST(MasterPort, TwoGangsOnTheSameNodesGetDifferentPorts) {
  Harness h;
  h.Register("n1");
  h.Register("n2");
  const state::JobId g1 = h.Submit(MakeSubmit().Gang(2, 4));
  const state::JobId g2 = h.Submit(MakeSubmit().Gang(2, 4));
  h->RunCycle();
  ASSERT_EQ(h.StateOf(g1), JobState::kRunning);
  ASSERT_EQ(h.StateOf(g2), JobState::kRunning);
  const AgentWork w1 = h.Work("n1");
  const AgentWork w2 = h.Work("n2");
  ASSERT_EQ(w1.launch.size(), 2u);
  ASSERT_EQ(w2.launch.size(), 2u);
  for (const api::LaunchSpec& l : w2.launch) {
    EXPECT_EQ(l.master_port, h.Job(l.job).master_port) << "rank " << l.node_rank;
  }
  const state::JobRecord r1 = h.Job(g1), r2 = h.Job(g2);
  ASSERT_EQ(r1.allocations[0].node, r2.allocations[0].node) << "one rank-0 node";
  EXPECT_EQ((std::set<int>{PortOf(h, g1, w1.launch), PortOf(h, g2, w1.launch)}),
            std::set<int>({29500, 29501}));
}

// The range is per address, MASTER_ADDR's: two nodes on one host (`hachi dev`'s
// simulated nodes, all 127.0.0.1) share it, two hosts do not.
TEST(MasterPort, NodesShareARangeExactlyWhenTheyShareAnAddress) {
  struct Case {
    const char* name;
    const char* addr1;
    const char* addr2;
    std::set<int> want;  // the ports of the jobs on n1 and n2
  };
  const Case cases[] = {
      {"OneHost", "127.0.0.1", "127.0.0.1", {29500, 29501}},
      {"TwoHosts", "10.79.0.2", "10.79.0.3", {29500}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Harness h;
    for (const auto& [node, addr] : {std::pair{"n1", c.addr1}, {"n2", c.addr2}}) {
      AgentRegistration reg = testing::MakeAgent(node);
      reg.address = addr;
      ASSERT_TRUE(h->nodes().Register(reg).ok());
    }
    // Whole nodes, so that one lands on each.
    const state::JobId a = h.Submit(MakeSubmit().Gpus(8));
    const state::JobId b = h.Submit(MakeSubmit().Gpus(8));
    h->RunCycle();
    ASSERT_EQ(h.StateOf(a), JobState::kRunning);
    ASSERT_EQ(h.StateOf(b), JobState::kRunning);
    ASSERT_NE(h.Job(a).allocations[0].node, h.Job(b).allocations[0].node);
    EXPECT_EQ((std::set<int>{h.Job(a).master_port, h.Job(b).master_port}), c.want);
  }
}

// A re-dispatch (the agent registered again and says it never got the launch) sends
// the port the start chose, not a new one.
TEST(MasterPort, ARedispatchSendsTheSamePort) {
  Harness h;
  h.Register("n1");
  const state::JobId a = h.Submit(MakeSubmit().Gpus(1));
  const state::JobId b = h.Submit(MakeSubmit().Gpus(1));
  h->RunCycle();
  const int b_port = h.Job(b).master_port;
  h.Exit("n1", a, 0);  // b's port is not the lowest free any more
  (void)h.Work("n1");
  h.Register("n1");  // no instance: the start times decide, and b started after 0
  const AgentWork w = h.Work("n1");
  ASSERT_EQ(w.launch.size(), 1u);
  EXPECT_EQ(w.launch[0].job, b);
  EXPECT_EQ(w.launch[0].master_port, b_port);
  EXPECT_EQ(b_port, 29501);
}

}  // namespace
}  // namespace hachi::server

namespace hachi::server {
namespace {

// A MASTER_PORT its agent found held by a process outside Hachi: the job is placed
// again with another port, not failed, and that port is skipped there afterwards.
TEST(MasterPort, APortHeldOutsideHachiIsSkippedAndTheJobPlacedAgain) {
  testing::Harness h;
  h.Register("n1");
  const state::JobId id = h.Submit(testing::MakeSubmit().Gpus(2));
  h->RunCycle();
  const AgentWork w = h.Work("n1");
  ASSERT_EQ(w.launch.size(), 1u);
  EXPECT_EQ(w.launch[0].master_port, 29500);
  api::JobExit e;
  e.job = id;
  e.start_time = w.launch[0].start_time;
  e.kind = api::ExitKind::kLaunchFailed;
  e.message = "MASTER_PORT 29500 is in use on n1 by a process outside Hachi";
  e.busy_port = 29500;
  ASSERT_TRUE(h->nodes().ReportExits("n1", {e}).ok());
  const state::JobRecord j = h.Job(id);
  EXPECT_EQ(j.state, state::JobState::kPending);
  EXPECT_NE(j.reason.find("placed again with another port"), std::string::npos)
      << j.reason;
  h->RunCycle();
  EXPECT_EQ(h.StateOf(id), state::JobState::kRunning);
  const AgentWork again = h.Work("n1");
  ASSERT_EQ(again.launch.size(), 1u);
  EXPECT_EQ(again.launch[0].master_port, 29501);
}

}  // namespace
}  // namespace hachi::server
