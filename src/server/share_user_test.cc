// GPU shares, one user per GPU (sched/gpu_share.h): the server's snapshot
// gives each running share its user, so a restarted server keeps packing only the same
// user's shares on a GPU; a share of another user waits and `hachi explain` says why.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>

#include "server/testing.h"
#include "state/store.h"
#include "topo/topology_testing.h"

namespace hachi::server {
namespace {

using state::JobState;
using testing::Harness;
using testing::kAlice;
using testing::MakeSubmit;

const Caller kBob{"bob", 1001, 1001, true, false};

class ShareUserTest : public ::testing::Test {
 protected:
  std::unique_ptr<Harness> Open() {
    Result<std::unique_ptr<state::Store>> store =
        state::OpenSqliteStore(dir_.path() + "/hachi.db");
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    ControllerOptions o;
    config::ClusterConfig cfg;
    config::PartitionConfig p;
    p.partition.name = "any";
    p.partition.allow_gpu_sharing = true;
    p.nodes.all = true;
    cfg.partitions.push_back(p);
    o.config = cfg;
    return std::make_unique<Harness>(o, std::move(*store));
  }
  state::JobId SubmitAs(Harness& h, const Caller& who, int milli) {
    Result<std::vector<state::JobId>> ids =
        h->jobs().Submit(MakeSubmit().Share(milli), who);
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    return ids.ok() ? ids->front() : 0;
  }
  topo::TempDir dir_;
};

TEST_F(ShareUserTest, RestartKeepsEachSharedGpuItsUsers) {
  const Time agent_started = RealClock()->Now() - 100;
  std::set<state::JobId> alice;
  state::JobId bob = 0;
  {
    auto h = Open();
    h->Register("n1", agent_started);
    // 600 milli each: no two fit one GPU, so alice's shares hold all 8 GPUs.
    for (int i = 0; i < 8; ++i) alice.insert(SubmitAs(*h, kAlice, 600));
    h->c().RunCycle();
    for (state::JobId id : alice) ASSERT_EQ(h->StateOf(id), JobState::kRunning);
  }
  auto h = Open();
  h->Register("n1", agent_started);  // the same agent process: the shares still run
  for (state::JobId id : alice) ASSERT_EQ(h->StateOf(id), JobState::kRunning);
  bob = SubmitAs(*h, kBob, 250);
  const state::JobId alice_more = SubmitAs(*h, kAlice, 250);
  h->c().RunCycle();
  EXPECT_EQ(h->StateOf(alice_more), JobState::kRunning);  // packed beside hers
  EXPECT_EQ(h->StateOf(bob), JobState::kPending);

  Result<report::JobExplain> e = h->c().job_views().Explain(bob);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->reason, "MpsOtherUser");
  EXPECT_EQ(e->diagnosis,
            "needs a 0.25 share of one GPU; 8 shared GPUs with room hold other users' "
            "shares (MPS serves one user per GPU)");
  ASSERT_EQ(e->nodes.size(), 1u);
  EXPECT_EQ(e->nodes[0].reason, "other_user");
  EXPECT_EQ(e->nodes[0].text,
            "1 node: 7 shared GPUs with room hold other users' shares (MPS serves one "
            "user per GPU)");

  // Alice's shares end: her GPUs are anyone's again, and bob's share starts.
  alice.insert(alice_more);
  for (state::JobId id : alice) h->Exit("n1", id, 0);
  h->c().RunCycle();
  EXPECT_EQ(h->StateOf(bob), JobState::kRunning);
}

}  // namespace
}  // namespace hachi::server
