// MIG devices across the server (sched/mig.h): the devices of a node's MIG
// GPU come from the topology its agent registered; two 1g.10gb jobs take the two
// devices, the launches carry each device's UUID and instance ids, a third waits with
// the numbers; after a restart the records book the devices again (the third still
// waits), and when one job ends the third gets that job's device.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "server/testing.h"
#include "state/store.h"
#include "topo/presets.h"
#include "topo/topology_file.h"
#include "topo/topology_testing.h"

namespace hachi::server {
namespace {

using state::JobState;
using testing::Harness;
using testing::MakeSubmit;

class MigServerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Harness> Open() {
    Result<std::unique_ptr<state::Store>> store =
        state::OpenSqliteStore(dir_.path() + "/hachi.db");
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return std::make_unique<Harness>(ControllerOptions{}, std::move(*store));
  }
  // n1: an HGX H100 whose GPU 0 is in MIG mode as two 1g.10gb devices.
  static AgentRegistration MigAgent(Time agent_started) {
    AgentRegistration r = testing::MakeAgent("n1", agent_started);
    topo::Topology t = *topo::LoadPreset("hgx-h100");
    t.mutable_gpu(0).mig_enabled = true;
    t.mutable_gpu(0).mig_devices = {{"1g.10gb", "MIG-aaaa", 1, 0, 9728},
                                    {"1g.10gb", "MIG-bbbb", 2, 0, 9728}};
    r.topology_json = topo::TopologyToJson(t);
    return r;
  }
  static SubmitRequest Mig() {
    SubmitRequest r = MakeSubmit().r;
    r.req.gpus = 1;
    r.req.mig_profile = "1g.10gb";
    return r;
  }
  topo::TempDir dir_;
};

TEST_F(MigServerTest, DevicesAreBookedFromTheRecordsAfterARestart) {
  const Time agent_started = RealClock()->Now() - 100;
  state::JobId a = 0, b = 0, c = 0;
  {
    auto h = Open();
    ASSERT_TRUE(h->c().nodes().Register(MigAgent(agent_started)).ok());
    a = h->Submit(Mig());
    b = h->Submit(Mig());
    h->c().RunCycle();
    ASSERT_EQ(h->StateOf(a), JobState::kRunning);
    ASSERT_EQ(h->StateOf(b), JobState::kRunning);
    EXPECT_EQ(h->Job(a).allocations[0].mig, std::vector<std::string>{"MIG-aaaa"});
    EXPECT_EQ(h->Job(b).allocations[0].mig, std::vector<std::string>{"MIG-bbbb"});
    EXPECT_EQ(h->Job(a).allocations[0].gpus, GpuSet::FromIndices({0}));
    const AgentWork w = h->Work("n1");
    ASSERT_EQ(w.launch.size(), 2u);
    EXPECT_EQ(w.launch[1].mig, (std::vector<api::MigLaunch>{{"MIG-bbbb", 0, 2, 0}}));
    // The node's status names the devices and their jobs.
    const std::vector<state::NodeStatus> nodes = h->c().cluster_views().Nodes();
    ASSERT_EQ(nodes.size(), 1u);
    ASSERT_EQ(nodes[0].mig_devices.size(), 2u);
    EXPECT_EQ(nodes[0].mig_devices[0].job, a);
    EXPECT_EQ(nodes[0].mig_devices[1].job, b);
    EXPECT_EQ(nodes[0].gpu_jobs[0], 0);  // the MIG GPU is nobody's whole
    // Whole GPUs: 7 fit beside the MIG GPU, 8 never.
    SubmitRequest eight = MakeSubmit().Gpus(8).r;
    EXPECT_FALSE(h->c().jobs().Submit(eight, testing::kAlice).ok());
  }
  auto h = Open();
  ASSERT_TRUE(h->c().nodes().Register(MigAgent(agent_started)).ok());  // the same agent
  c = h->Submit(Mig());
  h->c().RunCycle();
  EXPECT_EQ(h->StateOf(a), JobState::kRunning);
  EXPECT_EQ(h->StateOf(c), JobState::kPending);
  Result<report::JobExplain> e = h->c().job_views().Explain(c);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->reason, "MigBusy");
  EXPECT_EQ(e->diagnosis,
            "no free 1g.10gb MIG device: 0 of 2 free on the nodes of default");

  h->Exit("n1", a, 0);
  h->c().RunCycle();
  ASSERT_EQ(h->StateOf(c), JobState::kRunning);
  EXPECT_EQ(h->Job(c).allocations[0].mig, std::vector<std::string>{"MIG-aaaa"});
}

}  // namespace
}  // namespace hachi::server
