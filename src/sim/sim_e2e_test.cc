// End-to-end simulations with the real policies on tiny hand-made traces whose waits
// are worked out by hand, and determinism on a slice of the Philly trace.
#include <gtest/gtest.h>

#include "core/testing/paths.h"
#include "sim/simulator.h"
#include "sim/testing.h"

namespace hachi::sim {
namespace {

using testing::Trace;

std::vector<Time> Waits(const SimResult& r) {
  std::vector<Time> w;
  for (const JobOutcome& o : r.outcomes) w.push_back(o.start - o.submit);
  return w;
}

// Lean cycles (explain = false), as RunSimulation runs them, unless `explain`.
Result<SimResult> RunOn(const std::string& spec, const std::vector<TraceJob>& trace,
                        const std::string& policy, TimeLimitModel limits,
                        bool explain = false) {
  Result<sched::ClusterState> cluster = BuildCluster(spec);
  if (!cluster.ok()) return cluster.status();
  sched::SchedConfig config;
  config.policy = policy;
  config.explain = explain;
  Result<std::unique_ptr<sched::Scheduler>> s = sched::Scheduler::Create(config);
  if (!s.ok()) return s.status();
  SimOptions opts;
  opts.time_limits = limits;
  return Simulate(trace, std::move(*cluster), **s, opts);
}

// One 8-GPU node. Job 1 holds 4 GPUs for 100 s; job 2 (8 GPUs) must wait for it and is
// the head of the queue from t=1; job 3 (2 GPUs, 50 s) ends before t=100 and can be
// backfilled; job 4 (2 GPUs, 200 s) would delay job 2 and cannot.
//   fifo:          1@0, 2@100, 3@200, 4@200          waits 0, 99, 198, 197
//   easy, exact:   3 backfilled at t=2                waits 0, 99, 0, 197
//   easy, rounded: job 3 asks for 15m, which would delay job 2: as fifo
TEST(SimEndToEndTest, FifoVersusEasyOnOneNode) {
  const std::vector<TraceJob> trace =
      Trace({{0, 4, 100}, {1, 8, 100}, {2, 2, 50}, {3, 2, 200}});
  struct Case {
    const char* name;
    const char* policy;
    TimeLimitModel limits;
    std::vector<Time> waits;
  };
  const Case cases[] = {
      {"fifo exact", "fifo", TimeLimitModel::kExact, {0, 99, 198, 197}},
      {"fifo rounded", "fifo", TimeLimitModel::kRounded, {0, 99, 198, 197}},
      {"easy exact backfills job 3", "easy", TimeLimitModel::kExact, {0, 99, 0, 197}},
      {"easy rounded cannot", "easy", TimeLimitModel::kRounded, {0, 99, 198, 197}},
  };
  for (const Case& c : cases) {
    Result<SimResult> r = RunOn("1x8:hgx-h100", trace, c.policy, c.limits);
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.status().ToString();
    EXPECT_EQ(Waits(*r), c.waits) << c.name;
  }
}

// Jobs of 8, 1, 1, 8 GPUs on one node, 100 s each, one second apart.
//   fifo:  1@0; 2 and 3 @100; 4 waits for both: @200       waits 0, 99, 98, 197
//   easy:  nothing can be backfilled (the node is full until 100): the same
//   hachi: the size factor of the priority (docs/scheduler.md: 500 x GPUs/8) puts job 4
//          ahead of the 1-GPU jobs, whose ages differ by seconds: 4@100, 2 and 3 @200
//                                                            waits 0, 199, 198, 97
TEST(SimEndToEndTest, EightOneOneEight) {
  const std::vector<TraceJob> trace =
      Trace({{0, 8, 100}, {1, 1, 100}, {2, 1, 100}, {3, 8, 100}});
  struct Case {
    const char* policy;
    std::vector<Time> waits;
  };
  const Case cases[] = {{"fifo", {0, 99, 98, 197}},
                        {"easy", {0, 99, 98, 197}},
                        {"hachi", {0, 199, 198, 97}}};
  for (const Case& c : cases) {
    Result<SimResult> r = RunOn("1x8:hgx-h100", trace, c.policy, TimeLimitModel::kExact);
    ASSERT_TRUE(r.ok()) << c.policy << ": " << r.status().ToString();
    EXPECT_EQ(Waits(*r), c.waits) << c.policy;
  }
}

TEST(SimEndToEndTest, GangsAndRejections) {
  // Two nodes: the 16-GPU gang waits for both to be empty; a 24-GPU gang can never run.
  const std::vector<TraceJob> trace = Trace({{0, 8, 100}, {10, 16, 50}, {20, 24, 10}});
  for (const char* policy : {"fifo", "easy", "hachi"}) {
    Result<SimResult> r = RunOn("2x8:hgx-h100", trace, policy, TimeLimitModel::kExact);
    ASSERT_TRUE(r.ok()) << policy << ": " << r.status().ToString();
    EXPECT_EQ(r->rejected, 1) << policy;
    ASSERT_EQ(r->outcomes.size(), 2u) << policy;
    EXPECT_EQ(r->outcomes[1].start, 100) << policy;
    ASSERT_EQ(r->rejections.size(), 1u);
    EXPECT_NE(r->rejections[0].find("job 3"), std::string::npos) << r->rejections[0];
  }
}

// Two 8-GPU nodes, two partitions: training (tier 0, over both, preempted with a 5 min
// grace) and inference (tier 1, over both, may preempt lower tiers, owns n0 08:00-20:00
// UTC; the trace starts at midnight). Exact limits. Jobs (submit, GPUs, run, partition):
//   1  00:00  8  6h  training   n0 00:00-06:00 (ends before 08:00, so n0 is allowed)
//   2  00:00  8 10h  training   n1 00:00; preempted at 08:00 for job 5, killed 08:05
//   3  01:00  8  3h  training   never on n0 in the day (06:00 + 3h crosses 08:00)
//   4  07:00  8  2h  inference  n0 07:00-09:00 (the owner may start any time)
//   5  08:00  8  1h  inference  n0 is busy until 09:00 with job 4 (same tier: never a
//                               victim); job 2 on n1 is: it takes n1 08:05-09:05
// Requeue: job 2 waits again (n0 is inference's until 20:00) and runs on n1
// 09:05-19:05 (older than job 3); job 3 on n1 19:05-22:05. Lost: 8 GPUs x 8h05m.
// Cancel: job 2 ends at 08:05; job 3 runs on n1 09:05-12:05.
TEST(SimEndToEndTest, PreemptionAndATimeWindow) {
  std::vector<TraceJob> trace = Trace({{0, 8, 6 * kHour},
                                       {0, 8, 10 * kHour},
                                       {kHour, 8, 3 * kHour},
                                       {7 * kHour, 8, 2 * kHour},
                                       {8 * kHour, 8, kHour}});
  for (TraceJob& j : trace) j.partition = j.id >= 4 ? "inference" : "training";
  struct Case {
    const char* name;
    sched::PreemptMode mode;
    std::vector<int64_t> ids;
    std::vector<Time> waits;
    int64_t requeues, cancelled;
    double lost_gpu_s;
  };
  const Case cases[] = {
      {"requeue",
       sched::PreemptMode::kRequeue,
       {1, 2, 3, 4, 5},
       {0, 9 * kHour + 5 * kMinute, 18 * kHour + 5 * kMinute, 0, 5 * kMinute},
       1,
       0,
       8.0 * (8 * kHour + 5 * kMinute)},
      {"cancel",
       sched::PreemptMode::kCancel,
       {1, 3, 4, 5},
       {0, 8 * kHour + 5 * kMinute, 0, 5 * kMinute},
       0,
       1,
       0},
  };
  for (const Case& c : cases) {
    Result<sched::ClusterState> cluster = BuildCluster("2x8:hgx-h100");
    ASSERT_TRUE(cluster.ok());
    sched::ClusterState& s = *cluster;
    for (sched::Node& n : s.nodes) n.partitions = {0, 1};
    sched::Partition training = s.partitions[0];
    training.name = "training";
    training.tier = 0;
    training.preempt_mode = c.mode;
    training.grace = 5 * kMinute;
    sched::Partition inference = training;
    inference.name = "inference";
    inference.tier = 1;
    inference.preempt_lower_tiers = true;
    inference.windows = {{8 * 60, 20 * 60, {}}};
    inference.window_nodes = {0};
    s.partitions = {training, inference};
    sched::SchedConfig config;  // hachi, lean cycles as in `hachi sim`
    config.explain = false;
    auto scheduler = sched::Scheduler::Create(config);
    ASSERT_TRUE(scheduler.ok());
    SimOptions opts;
    opts.time_limits = TimeLimitModel::kExact;
    Result<SimResult> r = Simulate(trace, std::move(s), **scheduler, opts);
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.status().ToString();
    std::vector<int64_t> ids;
    for (const JobOutcome& o : r->outcomes) ids.push_back(o.id);
    EXPECT_EQ(ids, c.ids) << c.name;
    EXPECT_EQ(Waits(*r), c.waits) << c.name;
    EXPECT_EQ(r->preemptions, 1) << c.name;
    EXPECT_EQ(r->requeues, c.requeues) << c.name;
    EXPECT_EQ(r->cancelled, c.cancelled) << c.name;
    EXPECT_DOUBLE_EQ(r->lost_gpu_seconds, c.lost_gpu_s) << c.name;
  }
}

std::vector<TraceJob> PhillySlice(size_t n) {
  TraceFormat f = TraceFormat::kPhilly;
  Result<std::vector<TraceJob>> t =
      ReadTrace(SourceDir() + "/testdata/traces/philly_first2000.csv", &f);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return {};
  t->resize(std::min(n, t->size()));
  return std::move(*t);
}

TEST(SimEndToEndTest, SameTraceAndPolicyGiveIdenticalResults) {
  // 32 nodes x 8 GPUs keep this slice busy enough for queues and backfill to matter.
  const std::vector<TraceJob> trace = PhillySlice(2000);
  for (const char* policy : {"fifo", "easy", "hachi"}) {
    Result<SimResult> a = RunOn("32x8:hgx-h100", trace, policy, TimeLimitModel::kRounded);
    Result<SimResult> b = RunOn("32x8:hgx-h100", trace, policy, TimeLimitModel::kRounded);
    ASSERT_TRUE(a.ok()) << policy << ": " << a.status().ToString();
    ASSERT_TRUE(b.ok()) << policy << ": " << b.status().ToString();
    ASSERT_EQ(a->outcomes.size(), trace.size()) << policy;
    ASSERT_EQ(a->outcomes.size(), b->outcomes.size()) << policy;
    for (size_t i = 0; i < a->outcomes.size(); ++i) {
      const JobOutcome &x = a->outcomes[i], &y = b->outcomes[i];
      ASSERT_EQ(x.id, y.id) << policy;
      ASSERT_EQ(x.start, y.start) << policy << " job " << x.id;
      ASSERT_EQ(x.end, y.end) << policy << " job " << x.id;
      ASSERT_GE(x.start, x.submit) << policy << " job " << x.id;
    }
    EXPECT_EQ(a->cycle_ms.size(), b->cycle_ms.size()) << policy;
    EXPECT_EQ(a->backfilled, b->backfilled) << policy;
  }
}

TEST(SimEndToEndTest, LeanCyclesStartTheSameJobsAsExplainingOnes) {
  const std::vector<TraceJob> trace = PhillySlice(1000);
  for (const char* policy : {"fifo", "easy", "hachi"}) {
    Result<SimResult> lean =
        RunOn("24x8:hgx-h100", trace, policy, TimeLimitModel::kRounded);
    Result<SimResult> full =
        RunOn("24x8:hgx-h100", trace, policy, TimeLimitModel::kRounded, /*explain=*/true);
    ASSERT_TRUE(lean.ok()) << policy << ": " << lean.status().ToString();
    ASSERT_TRUE(full.ok()) << policy << ": " << full.status().ToString();
    ASSERT_EQ(lean->outcomes.size(), full->outcomes.size()) << policy;
    for (size_t i = 0; i < lean->outcomes.size(); ++i) {
      ASSERT_EQ(lean->outcomes[i].start, full->outcomes[i].start)
          << policy << " job " << lean->outcomes[i].id;
    }
  }
}

TEST(SimEndToEndTest, RunSimulationFillsTheMetrics) {
  RunConfig config;
  config.cluster = "32x8:hgx-h100";
  config.sched.policy = "easy";
  Result<SimMetrics> m = RunSimulation(PhillySlice(500), config);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->jobs, 500);
  EXPECT_EQ(m->policy, "easy");
  EXPECT_EQ(m->cluster_gpus, 256);
  EXPECT_EQ(m->time_limits, "rounded");
  EXPECT_GT(m->gpu_utilization, 0);
  EXPECT_LE(m->gpu_utilization, 1);
  EXPECT_LE(m->wait_p50_s, m->wait_p95_s);
  EXPECT_LE(m->wait_p95_s, m->wait_p99_s);
  EXPECT_GT(m->cycles, 0);
}

// Pools: 2 fixed nodes and 2 burst nodes that take 300 s to come up and are powered
// down after 600 s idle. Four whole-node jobs of 1,000 s at t=0: two start at once,
// two when the burst nodes are up; the burst nodes go off at 1,300 + 600.
SimOptions PoolOptions() {
  SimOptions o;
  o.time_limits = TimeLimitModel::kExact;
  sched::PowerPool fixed{"owned", false, {0, 1}};
  fixed.price_per_gpu_hour = 1;
  sched::PowerPool burst{"burst", true, {2, 3}};
  burst.suspend_after = 600;
  burst.resume_timeout = 900;
  burst.price_per_gpu_hour = 3;
  o.pools = {fixed, burst};
  o.resume_delay = 300;
  return o;
}

Result<SimResult> RunPools(const std::vector<TraceJob>& trace, const SimOptions& o) {
  Result<sched::ClusterState> cluster = BuildCluster("4x8:hgx-h100");
  if (!cluster.ok()) return cluster.status();
  Result<std::unique_ptr<sched::Scheduler>> s = sched::Scheduler::Create({});
  if (!s.ok()) return s.status();
  return Simulate(trace, std::move(*cluster), **s, o);
}

TEST(SimEndToEndTest, BurstNodesArePoweredUpForAPeakAndDownAfterIt) {
  const std::vector<TraceJob> trace =
      testing::Trace({{0, 8, 1000}, {0, 8, 1000}, {0, 8, 1000}, {0, 8, 1000}});
  Result<SimResult> r = RunPools(trace, PoolOptions());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Waits(*r), (std::vector<Time>{0, 0, 300, 300}));
  ASSERT_EQ(r->pools.size(), 2u);
  const PoolUse& burst = r->pools[1];
  EXPECT_EQ(burst.resumes, 2);
  EXPECT_EQ(burst.suspends, 2);
  EXPECT_EQ(burst.max_powered, 2);
  EXPECT_DOUBLE_EQ(burst.powered_gpu_seconds, 2 * 8 * 1900.0);  // 0 .. 1,300 + 600
  EXPECT_DOUBLE_EQ(burst.busy_gpu_seconds, 2 * 8 * 1000.0);
  EXPECT_DOUBLE_EQ(burst.cost(), 2 * 8 * 1900.0 / 3600 * 3);
  EXPECT_EQ(r->end, 1900);
  EXPECT_DOUBLE_EQ(r->pools[0].powered_gpu_seconds, 2 * 8 * 1900.0);  // always on
  EXPECT_EQ(r->pools[0].resumes, 0);
}

TEST(SimEndToEndTest, AGangWaitsForAllItsBurstNodesAndACapHoldsIt) {
  // A 3-node gang while a fixed node is busy: one fixed node free + 2 burst nodes.
  const std::vector<TraceJob> trace = testing::Trace({{0, 8, 1000}, {1, 24, 500}});
  Result<SimResult> r = RunPools(trace, PoolOptions());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Waits(*r), (std::vector<Time>{0, 300}));  // up at 1 + 300
  EXPECT_EQ(r->pools[1].resumes, 2);
  // Capped at one powered burst node, the gang needs job 1's node too: 1 free + 1 burst
  // is all it could have now (all or none), so the burst node is resumed to be up when
  // job 1 ends at 1,000 (its time limit), and the gang starts then.
  SimOptions capped = PoolOptions();
  capped.pools[1].max_powered = 1;
  r = RunPools(trace, capped);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pools[1].max_powered, 1);
  EXPECT_EQ(r->pools[1].resumes, 1);
  EXPECT_EQ(Waits(*r)[1], 999);  // not 1,299: a resume only once job 1 had ended
}

TEST(SimEndToEndTest, PoolsNeedAnExplainingScheduler) {
  Result<sched::ClusterState> cluster = BuildCluster("4x8:hgx-h100");
  ASSERT_TRUE(cluster.ok());
  sched::SchedConfig lean;
  lean.explain = false;
  Result<std::unique_ptr<sched::Scheduler>> s = sched::Scheduler::Create(lean);
  ASSERT_TRUE(s.ok());
  Result<SimResult> r =
      Simulate(testing::Trace({{0, 8, 10}}), std::move(*cluster), **s, PoolOptions());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hachi::sim
