// PowerService on a Controller driven cycle by cycle, with power programs the test
// ends when it chooses (no process, no sleep): a waiting job resumes just enough burst
// nodes, the node registers, passes burn-in and takes the job; idle, it is suspended;
// a resume that fails, one that never registers, a node that fails burn-in; a gang
// gets all its nodes or none.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "server/testing.h"
#include "state/sqlite_store.h"
#include "topo/topology_testing.h"

namespace hachi::server {
namespace {

using state::JobState;
using testing::Harness;
using testing::MakeSubmit;

// Records each call; the test ends them.
class FakePrograms : public PowerPrograms {
 public:
  Result<int> Start(const Call& call) override {
    calls.push_back(call);
    return static_cast<int>(calls.size());
  }
  std::vector<Ended> Poll() override {
    std::vector<Ended> out;
    out.swap(ended);
    return out;
  }
  // "resume b[1-2]" for each call so far.
  std::vector<std::string> Said() const {
    std::vector<std::string> out;
    for (const Call& c : calls) out.push_back(c.action + " " + c.hostlist);
    return out;
  }
  void End(int id, bool ok) { ended.push_back({id, ok, ok ? "exited 0" : "exited 3"}); }

  std::vector<Call> calls;
  std::vector<Ended> ended;
};

// A fixed pool of node n1 and a burst pool b[1-burst] of HGX H100 nodes.
ControllerOptions PoolOptions(FakeClock* clock, std::shared_ptr<PowerPrograms> programs,
                              const std::string& extra = "", int burst = 2) {
  ControllerOptions o = testing::WithConfig(
      "[[pool]]\nname = \"owned\"\nnodes = \"n1\"\nprice_per_gpu_hour = 2.0\n"
      "[[pool]]\nname = \"burst\"\nnodes = \"b[1-" +
          std::to_string(burst) +
          "]\"\nkind = \"burst\"\npreset = \"hgx-h100\"\n"
          "resume_program = \"/opt/up\"\nsuspend_program = \"/opt/down\"\n"
          "resume_fail_program = \"/opt/failed\"\n"
          "suspend_after = \"10m\"\nresume_timeout = \"5m\"\n"
          "price_per_gpu_hour = 4.0\n" +
          extra,
      clock);
  o.power_programs = std::move(programs);
  return o;
}

// A fixed node n1, full for ten hours, and a burst pool of HGX H100 nodes.
struct Cluster {
  explicit Cluster(const std::string& extra = "", int burst = 2) {
    h = std::make_unique<Harness>(PoolOptions(&clock, programs, extra, burst));
    h->Register("n1");
    const state::JobId full = h->Submit(MakeSubmit().Gpus(8).Time(10 * kHour));
    (*h)->RunCycle();
    EXPECT_EQ(h->StateOf(full), JobState::kRunning);
  }
  std::string Power(const std::string& node) {
    for (const state::NodeStatus& n : (*h)->cluster_views().Nodes()) {
      if (n.record.name == node) return n.power + (n.pool.empty() ? "" : "@" + n.pool);
    }
    return "missing";
  }
  std::string Reason(const std::string& node) {
    for (const state::NodeStatus& n : (*h)->cluster_views().Nodes()) {
      if (n.record.name == node) return n.record.state_reason;
    }
    return "missing";
  }
  std::string Why(state::JobId id) {
    std::optional<PendingInfo> p = (*h)->job_views().Pending(id);
    return p ? p->diagnosis : "";
  }

  FakeClock clock;
  std::shared_ptr<FakePrograms> programs = std::make_shared<FakePrograms>();
  std::unique_ptr<Harness> h;
};

TEST(Power, AWaitingJobResumesANodeThatTakesItAndIsSuspendedWhenIdle) {
  Cluster c;
  Harness& h = *c.h;
  EXPECT_EQ(c.Power("b1"), "off@burst");  // never registered: listed, off
  EXPECT_EQ(c.Power("n1"), "");           // a fixed pool's node has no power state
  const state::JobId id = h.Submit(MakeSubmit().Gpus(4));
  h->RunCycle();
  EXPECT_EQ(c.programs->Said(), std::vector<std::string>{"resume b1"});
  EXPECT_EQ(c.programs->calls[0].program, "/opt/up");
  EXPECT_EQ(c.programs->calls[0].pool, "burst");
  EXPECT_EQ(c.Power("b1"), "resuming@burst");
  EXPECT_EQ(h.StateOf(id), JobState::kPending);
  EXPECT_NE(c.Why(id).find("resuming 1 node of pool burst, 5m00s left of 5m00s"),
            std::string::npos)
      << c.Why(id);
  // The next cycles wait for it rather than resume another.
  c.clock.Advance(std::chrono::minutes(2));
  h->RunCycle();
  EXPECT_EQ(c.programs->calls.size(), 1u);
  EXPECT_NE(c.Why(id).find("3m00s left of 5m00s"), std::string::npos) << c.Why(id);
  c.programs->End(1, true);  // the program's part is done; the node boots
  h->RunCycle();
  EXPECT_EQ(c.Power("b1"), "resuming@burst");
  h.Register("b1");
  EXPECT_EQ(c.Power("b1"), "on@burst");
  h->RunCycle();
  ASSERT_EQ(h.StateOf(id), JobState::kRunning);
  EXPECT_EQ(h.Job(id).allocations[0].node, "b1");
  // Busy: never suspended, however long.
  c.clock.Advance(std::chrono::minutes(30));
  h->RunCycle();
  EXPECT_EQ(c.programs->calls.size(), 1u);
  h.Work("b1");
  h.Exit("b1", id, 0);
  h->RunCycle();  // idle from now
  c.clock.Advance(std::chrono::minutes(9));
  h->RunCycle();
  EXPECT_EQ(c.programs->calls.size(), 1u);
  c.clock.Advance(std::chrono::minutes(1));
  h->RunCycle();
  EXPECT_EQ(c.programs->Said(), (std::vector<std::string>{"resume b1", "suspend b1"}));
  EXPECT_EQ(c.Power("b1"), "suspending@burst");
  // No job lands on a node being suspended.
  const state::JobId late = h.Submit(MakeSubmit().Gpus(1));
  h->RunCycle();
  EXPECT_EQ(h.StateOf(late), JobState::kPending);
  c.programs->End(2, true);
  h->RunCycle();
  EXPECT_EQ(c.Power("b1"), "off@burst");
}

TEST(Power, AGangGetsAllItsNodesOrNone) {
  {
    Cluster c("", 3);
    const state::JobId id = c.h->Submit(MakeSubmit().Gang(3, 8));
    (*c.h)->RunCycle();
    EXPECT_EQ(c.programs->Said(), std::vector<std::string>{"resume b[1-3]"});
    EXPECT_NE(c.Why(id).find("resuming 3 nodes of pool burst"), std::string::npos);
  }
  Cluster capped("max_powered = 2\n", 3);
  capped.h->Submit(MakeSubmit().Gang(3, 8));
  (*capped.h)->RunCycle();
  EXPECT_TRUE(capped.programs->calls.empty());
}

TEST(Power, AResumeProgramThatFailsMarksItsNodesAndPowersThemDown) {
  Cluster c;
  Harness& h = *c.h;
  const state::JobId id = h.Submit(MakeSubmit().Gpus(8));
  h->RunCycle();
  c.programs->End(1, false);
  h->RunCycle();
  EXPECT_EQ(c.programs->Said(), (std::vector<std::string>{"resume b1", "resume-failed b1",
                                                          "suspend b1", "resume b2"}));
  EXPECT_EQ(c.Power("b1"), "resume-failed@burst");
  EXPECT_EQ(c.Reason("b1"), "resume program exited 3");
  // The job waits for the other node now; b1 is not tried again.
  EXPECT_NE(c.Why(id).find("resuming 1 node of pool burst"), std::string::npos);
  c.programs->End(3, true);  // b1's suspend: it stays failed
  h->RunCycle();
  EXPECT_EQ(c.Power("b1"), "resume-failed@burst");
  // Until an admin resumes it: then it is off, and may be powered up again.
  EXPECT_EQ(h->power().ResetFailed("b1", testing::kAlice).status().code(),
            StatusCode::kPermissionDenied);
  Result<bool> reset = h->power().ResetFailed("b1", testing::kRoot);
  ASSERT_TRUE(reset.ok());
  EXPECT_TRUE(*reset);
  EXPECT_EQ(c.Power("b1"), "off@burst");
  EXPECT_FALSE(*h->power().ResetFailed("n1", testing::kRoot));  // not failed: no-op
}

TEST(Power, AResumeThatNeverRegistersTimesOut) {
  Cluster c;
  Harness& h = *c.h;
  h.Submit(MakeSubmit().Gpus(8));
  h->RunCycle();
  c.programs->End(1, true);
  c.clock.Advance(std::chrono::minutes(5));
  h->RunCycle();
  EXPECT_EQ(c.Power("b1"), "resume-failed@burst");
  const std::vector<std::string> said = c.programs->Said();
  EXPECT_EQ(std::vector<std::string>(said.begin(), said.begin() + 3),
            (std::vector<std::string>{"resume b1", "resume-failed b1", "suspend b1"}));
  EXPECT_EQ(c.Reason("b1"), "did not register within 5m00s");
}

TEST(Power, AResumedNodeTakesNoJobBeforeItPassesBurnIn) {
  Cluster c("[node.\"b[1-2]\"]\nburn_in = [\"doctor\"]\n");
  Harness& h = *c.h;
  const state::JobId id = h.Submit(MakeSubmit().Gpus(8));
  h->RunCycle();
  h.Register("b1");
  EXPECT_EQ(c.Power("b1"), "burn-in@burst");
  h->RunCycle();
  EXPECT_EQ(h.StateOf(id), JobState::kPending);
  EXPECT_EQ(c.programs->calls.size(), 1u);  // burn-in is capacity coming
  const api::AgentWork w = h.Work("b1");
  ASSERT_TRUE(w.burn_in.has_value());
  api::BurnInReport pass;
  pass.run = w.burn_in->run;
  pass.passed = true;
  ASSERT_TRUE(h->burn_in().Report("b1", pass).ok());
  EXPECT_EQ(c.Power("b1"), "on@burst");
  h->RunCycle();
  EXPECT_EQ(h.StateOf(id), JobState::kRunning);
}

TEST(Power, ANodeThatFailsBurnInAfterItsResumeIsPoweredDown) {
  Cluster c("[node.\"b[1-2]\"]\nburn_in = [\"doctor\"]\n");
  Harness& h = *c.h;
  const state::JobId id = h.Submit(MakeSubmit().Gpus(8));
  h->RunCycle();
  h.Register("b1");
  const api::AgentWork w = h.Work("b1");
  ASSERT_TRUE(w.burn_in.has_value());
  api::BurnInReport fail;
  fail.run = w.burn_in->run;
  fail.check = "doctor";
  fail.reason = "GPU 3: NVLink 2 down";
  ASSERT_TRUE(h->burn_in().Report("b1", fail).ok());
  EXPECT_EQ(c.Power("b1"), "resume-failed@burst");
  h->RunCycle();
  const std::vector<std::string> said = c.programs->Said();
  EXPECT_EQ(std::vector<std::string>(said.begin(), said.begin() + 3),
            (std::vector<std::string>{"resume b1", "resume-failed b1", "suspend b1"}));
  EXPECT_EQ(h.StateOf(id), JobState::kPending);
  // Another node is resumed for the job.
  EXPECT_EQ(said.back(), "resume b2");
}

// A burst pool's powered GPU time runs from the resume's start until the node is off:
// what the cloud bills, used or not.
TEST(Power, APoolsPoweredTimeIsCountedFromResumeUntilOff) {
  Cluster c;
  Harness& h = *c.h;
  const state::JobId id = h.Submit(MakeSubmit().Gpus(8).Time(kHour));
  h->RunCycle();  // resume b1
  c.clock.Advance(std::chrono::minutes(2));
  h.Register("b1");
  h->RunCycle();
  ASSERT_EQ(h.StateOf(id), JobState::kRunning);
  c.clock.Advance(std::chrono::minutes(8));
  auto burst = [&] {
    for (const sched::PoolPower& p : h->cluster_views().Pools()) {
      if (p.name == "burst") return p;
    }
    return sched::PoolPower{};
  };
  EXPECT_EQ(burst().powered, 1);
  EXPECT_EQ(burst().nodes, 2);
  EXPECT_EQ(burst().gpus, 16);
  EXPECT_DOUBLE_EQ(burst().powered_gpu_seconds, 8.0 * 10 * 60);
  h.Work("b1");
  h.Exit("b1", id, 0);
  h->RunCycle();
  c.clock.Advance(std::chrono::minutes(10));  // suspend_after
  h->RunCycle();
  ASSERT_EQ(c.Power("b1"), "suspending@burst");
  c.programs->End(2, true);
  h->RunCycle();
  ASSERT_EQ(c.Power("b1"), "off@burst");
  c.clock.Advance(std::chrono::hours(5));  // off: not billed
  EXPECT_EQ(burst().powered, 0);
  EXPECT_DOUBLE_EQ(burst().powered_gpu_seconds, 8.0 * 20 * 60);
  const std::string metrics = h->cluster_views().MetricsText();
  EXPECT_NE(metrics.find("hachi_pool_powered_gpu_seconds_total{pool=\"burst\"} 9600"),
            std::string::npos);
  EXPECT_NE(metrics.find("hachi_pool_powered_nodes{pool=\"owned\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics.find("hachi_pool_price_per_gpu_hour{pool=\"burst\"} 4"),
            std::string::npos);
}

// What a pool cost is durable: the spells are in the store, a server that starts goes
// on with the open spell of a node still powered (the time it was away billed too) and
// closes the spell of a node found off where it was last known powered; each spell at
// its pool's price when it began.
TEST(Power, PoweredSpellsOutliveTheServer) {
  topo::TempDir dir;
  const std::string db = dir.path() + "/hachi.db";
  auto open = [&] {
    Result<std::unique_ptr<state::Store>> s = state::OpenSqliteStore(db);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : state::NewMemoryStore();
  };
  FakeClock clock;
  const Time t0 = clock.Now();
  auto programs = std::make_shared<FakePrograms>();
  {
    Harness h(PoolOptions(&clock, programs), open());
    h.Register("n1");
    h.Submit(MakeSubmit().Gpus(8).Time(10 * kHour));
    h->RunCycle();
    h.Register("b2");  // booted by hand: powered, billed from now
    const state::JobId id = h.Submit(MakeSubmit().Gpus(8).Time(10 * kHour));
    h.Submit(MakeSubmit().Gpus(8).Time(10 * kHour));
    h->RunCycle();  // one job on b2, the other resumes b1
    ASSERT_EQ(programs->Said(), std::vector<std::string>{"resume b1"});
    ASSERT_EQ(h.StateOf(id), JobState::kRunning);
    clock.Advance(std::chrono::minutes(2));
    h.Register("b1");
    h->RunCycle();
    clock.Advance(std::chrono::minutes(10));
  }  // the server stops at t0 + 12m (its last flush)
  {
    // While it was away, b2's agent was lost (as a standby's takeover would find it).
    std::unique_ptr<state::Store> s = open();
    ASSERT_TRUE(s->Commit({state::NodeStateChanged{"b2", state::NodeState::kDown,
                                                   "agent lost", t0 + 13 * 60}})
                    .ok());
  }
  clock.Advance(std::chrono::minutes(3));
  Harness h(PoolOptions(&clock, programs, "", 2), open());
  h->RunCycle();
  auto costs = [&] {
    Result<std::map<std::string, PowerService::PoolCost>> c =
        h->power().Costs(0, clock.Now() + 1);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? (*c)["burst"] : PowerService::PoolCost{};
  };
  // b1: from its resume (t0) until now (t0 + 15m); b2: from t0 until t0 + 12m.
  EXPECT_DOUBLE_EQ(costs().gpu_seconds, 8.0 * 15 * 60 + 8.0 * 12 * 60);
  EXPECT_DOUBLE_EQ(costs().cost, (8.0 * 27 * 60) / 3600 * 4.0);
  clock.Advance(std::chrono::minutes(5));
  EXPECT_DOUBLE_EQ(costs().gpu_seconds, 8.0 * 20 * 60 + 8.0 * 12 * 60);
  // /metrics' counter is this server's: b1's spell from its start (5 minutes ago).
  for (const sched::PoolPower& p : h->cluster_views().Pools()) {
    if (p.name == "burst") {
      EXPECT_DOUBLE_EQ(p.powered_gpu_seconds, 8.0 * 5 * 60);
    }
  }
  // A window: the last 5 minutes hold b1's only.
  Result<std::map<std::string, PowerService::PoolCost>> last =
      h->power().Costs(clock.Now() - 5 * 60, clock.Now());
  ASSERT_TRUE(last.ok());
  EXPECT_DOUBLE_EQ((*last)["burst"].gpu_seconds, 8.0 * 5 * 60);
  EXPECT_EQ(last->count("owned"), 0u);  // a fixed pool is not billed by the spell
}

// A suspend program that fails leaves the node powered (on, billed) and idle from then:
// it is suspended again after suspend_after, not taken for off.
TEST(Power, ASuspendThatFailsKeepsTheNodePoweredAndTriesAgain) {
  Cluster c;
  Harness& h = *c.h;
  h.Register("b2");
  h->RunCycle();  // idle from now
  c.clock.Advance(std::chrono::minutes(10));
  h->RunCycle();
  ASSERT_EQ(c.programs->Said(), std::vector<std::string>{"suspend b2"});
  c.programs->End(1, false);
  h->RunCycle();
  EXPECT_EQ(c.Power("b2"), "on@burst");
  EXPECT_EQ(c.Reason("b2"),
            "suspend program exited 3; still powered, suspended again when idle");
  c.clock.Advance(std::chrono::minutes(9));
  h->RunCycle();
  EXPECT_EQ(c.programs->calls.size(), 1u);
  c.clock.Advance(std::chrono::minutes(1));
  h->RunCycle();
  EXPECT_EQ(c.programs->Said(), (std::vector<std::string>{"suspend b2", "suspend b2"}));
  c.programs->End(2, true);
  h->RunCycle();
  EXPECT_EQ(c.Power("b2"), "off@burst");
  // Billed throughout: 20 minutes on, 8 GPUs.
  Result<std::map<std::string, PowerService::PoolCost>> cost =
      h->power().Costs(0, c.clock.Now() + 3600);
  ASSERT_TRUE(cost.ok());
  EXPECT_DOUBLE_EQ((*cost)["burst"].gpu_seconds, 8.0 * 20 * 60);
}

// A node idle until its suspend is due, or resuming until its timeout, asks for no
// cycle now: the loop's timer finds them due (a wake-up each cycle made the loop run
// cycles back to back, a core's worth of CPU while any burst node idled).
TEST(Power, WaitingForASuspendOrAResumeRunsNoCycleAtOnce) {
  Cluster c;
  Harness& h = *c.h;
  h.Register("b2");  // on and idle: suspended in 10 minutes
  h->RunCycle();
  EXPECT_FALSE(h->cluster_views().stats().cycle_due);
  h.Submit(MakeSubmit().Gpus(8));
  h.Submit(MakeSubmit().Gpus(8));
  h->RunCycle();  // one job on b2; the other resumes b1 and waits for it
  ASSERT_EQ(c.Power("b1"), "resuming@burst");
  h->RunCycle();
  EXPECT_FALSE(h->cluster_views().stats().cycle_due);
  c.clock.Advance(std::chrono::minutes(10));
  h->RunCycle();
  EXPECT_FALSE(h->cluster_views().stats().cycle_due);
}

// A burst node that registers unasked is on; one never registered is off.
TEST(Power, ABurstNodeThatRegistersIsOnAndTheMetricsSaySo) {
  Cluster c;
  c.h->Register("b2");
  EXPECT_EQ(c.Power("b2"), "on@burst");
  EXPECT_EQ(c.Power("b1"), "off@burst");
  const std::string metrics = (*c.h)->cluster_views().MetricsText();
  EXPECT_NE(
      metrics.find("hachi_node_power_state{node=\"b1\",pool=\"burst\",state=\"off\"} 1"),
      std::string::npos);
}

}  // namespace
}  // namespace hachi::server
