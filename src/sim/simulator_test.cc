// The event loop and plan applier, driven by small fake schedulers: completions free
// resources, fair-share usage decays, bad plans and stuck runs are errors, not loops.
// (End-to-end runs with the real policies are in sim_e2e_test.cc.)
#include "sim/simulator.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sim/testing.h"

namespace hachi::sim {
namespace {

// Starts pending jobs in id order while a single node has room (count-only first fit,
// lowest free GPUs first). Records what each cycle saw.
class FirstFit : public sched::Scheduler {
 public:
  const sched::SchedConfig& config() const override { return config_; }
  sched::Plan Schedule(const sched::ClusterState& state, Time now) override {
    seen_.push_back({now, state.fairshare.usage});
    std::vector<const sched::Job*> order;
    for (const sched::Job& j : state.pending) order.push_back(&j);
    std::sort(order.begin(), order.end(),
              [](const sched::Job* a, const sched::Job* b) { return a->id < b->id; });
    std::vector<GpuSet> free;
    for (const sched::Node& n : state.nodes) free.push_back(n.free_gpus);
    sched::Plan plan;
    for (const sched::Job* j : order) {
      bool started = false;
      for (size_t n = 0; n < free.size() && !started; ++n) {
        if (free[n].size() < j->req.gpus) continue;
        GpuSet take;
        for (int g : free[n].Indices()) {
          if (take.size() < j->req.gpus) take.Insert(g);
        }
        free[n] = free[n] - take;
        plan.starts.push_back({j->id, {{static_cast<int>(n), take, 0, 0}}, false});
        started = true;
      }
      if (!started) plan.pending.push_back(sched::Diagnosis{.job = j->id});
    }
    return plan;
  }

  struct Seen {
    Time now;
    std::unordered_map<std::string, double> usage;
  };
  std::vector<Seen> seen_;

 private:
  sched::SchedConfig config_;
};

// Never starts anything.
class Never : public FirstFit {
 public:
  sched::Plan Schedule(const sched::ClusterState& state, Time) override {
    sched::Plan plan;
    for (const sched::Job& j : state.pending) {
      sched::Diagnosis d;
      d.job = j.id;
      d.reason = sched::Reason::kResources;
      plan.pending.push_back(d);
    }
    return plan;
  }
};

// First fit, and once, at the first cycle at or after `at`, preempts running job 1
// (at every cycle if `twice`: a bad plan).
class PreemptOne : public FirstFit {
 public:
  PreemptOne(Time at, Duration grace, sched::PreemptMode mode, bool twice = false)
      : at_(at), grace_(grace), mode_(mode), twice_(twice) {}
  sched::Plan Schedule(const sched::ClusterState& state, Time now) override {
    sched::Plan plan = FirstFit::Schedule(state, now);
    if (now < at_ || (done_ && !twice_)) return plan;
    for (const sched::Job& j : state.running) {
      if (j.id != 1) continue;
      plan.preemptions.push_back({1, mode_, now, now + grace_, 0, -1});
      done_ = true;
    }
    return plan;
  }

 private:
  Time at_;
  Duration grace_;
  sched::PreemptMode mode_;
  bool twice_;
  bool done_ = false;
};

// Gives every pending job GPU 0 of node 0: the second start in a cycle books it twice.
class DoubleBooker : public FirstFit {
 public:
  sched::Plan Schedule(const sched::ClusterState& state, Time) override {
    sched::Plan plan;
    for (const sched::Job& j : state.pending) {
      plan.starts.push_back({j.id, {{0, GpuSet(1), 0, 0}}, false});
    }
    return plan;
  }
};

using testing::Trace;

sched::ClusterState OneNode() {
  Result<sched::ClusterState> c = BuildCluster("1x8:hgx-h100");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(*c);
}

TEST(SimulatorTest, CompletionsFreeGpusForLaterJobs) {
  // 6 GPUs for 100 s, then 4 GPUs (waits for the first), then 2 (fits beside the first).
  std::vector<TraceJob> trace = Trace({{0, 6, 100}, {10, 4, 50}, {20, 2, 30}});
  FirstFit s;
  Result<SimResult> r = Simulate(trace, OneNode(), s, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->outcomes.size(), 3u);
  // FirstFit starts in id order but skips blocked jobs: job 3 starts at 20.
  EXPECT_EQ(r->outcomes[0].start, 0);
  EXPECT_EQ(r->outcomes[1].start, 100);
  EXPECT_EQ(r->outcomes[1].end, 150);
  EXPECT_EQ(r->outcomes[2].start, 20);
  EXPECT_EQ(r->outcomes[2].end, 50);
  // Cycles: t=0, 10, 20, 50 (job 3 ends: job 2 still blocked), 100.
  EXPECT_EQ(r->cycle_ms.size(), 5u);
}

TEST(SimulatorTest, SameSecondCompletionIsFreeForArrival) {
  std::vector<TraceJob> trace = Trace({{0, 8, 100}, {100, 8, 10}});
  FirstFit s;
  Result<SimResult> r = Simulate(trace, OneNode(), s, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outcomes[1].start, 100);
}

TEST(SimulatorTest, FairShareUsageDecaysWithHalfLife) {
  // 8 GPUs for one half-life H = 100 s: usage = 8 * H/ln2 * (1 - 1/2).
  std::vector<TraceJob> trace = Trace({{0, 8, 100}, {100, 1, 1}});
  FirstFit s;
  SimOptions opts;
  opts.fairshare_half_life = 100;
  Result<SimResult> r = Simulate(trace, OneNode(), s, opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(s.seen_.size(), 2u);
  EXPECT_EQ(s.seen_[0].usage.at("a"), 0);
  EXPECT_NEAR(s.seen_[1].usage.at("a"), 8 * 100 / std::log(2.0) * 0.5, 1e-6);
}

// Job 1 (2 GPUs, 100 s) is preempted at t=10 (job 2 arrives); what happens after.
TEST(SimulatorTest, PreemptionsEndAJobOnce) {
  const std::vector<TraceJob> trace = Trace({{0, 2, 100}, {10, 1, 10}});
  struct Case {
    const char* name;
    Duration grace;
    sched::PreemptMode mode;
    std::vector<int64_t> ids;  // finished
    Time job1_start, job1_end;
    int64_t requeues, cancelled;
    double lost;
  };
  const Case cases[] = {
      // Ends on its own at 100, before its kill at 210: not killed, not counted twice.
      {"finishes_before_the_kill",
       200,
       sched::PreemptMode::kRequeue,
       {1, 2},
       0,
       100,
       0,
       0,
       0},
      // Killed at 20, requeued, started again at once: its old completion (100) is stale.
      {"requeued_and_restarted",
       10,
       sched::PreemptMode::kRequeue,
       {1, 2},
       20,
       120,
       1,
       0,
       2 * 20},
      {"cancelled", 10, sched::PreemptMode::kCancel, {2}, 0, 0, 0, 1, 0},
  };
  for (const Case& c : cases) {
    PreemptOne s(10, c.grace, c.mode);
    Result<SimResult> r = Simulate(trace, OneNode(), s, {});
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.status().ToString();
    std::vector<int64_t> ids;
    for (const JobOutcome& o : r->outcomes) ids.push_back(o.id);
    EXPECT_EQ(ids, c.ids) << c.name;
    if (ids.front() == 1) {
      EXPECT_EQ(r->outcomes[0].submit, 0) << c.name;
      EXPECT_EQ(r->outcomes[0].start, c.job1_start) << c.name;
      EXPECT_EQ(r->outcomes[0].end, c.job1_end) << c.name;
    }
    EXPECT_EQ(r->preemptions, 1) << c.name;
    EXPECT_EQ(r->requeues, c.requeues) << c.name;
    EXPECT_EQ(r->cancelled, c.cancelled) << c.name;
    EXPECT_EQ(r->lost_gpu_seconds, c.lost) << c.name;
  }
}

TEST(SimulatorTest, PreemptingAJobTwiceIsAnInternalError) {
  const std::vector<TraceJob> trace = Trace({{0, 2, 100}, {10, 1, 10}, {20, 8, 10}});
  PreemptOne s(10, 500, sched::PreemptMode::kRequeue, /*twice=*/true);
  Result<SimResult> r = Simulate(trace, OneNode(), s, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal) << r.status().ToString();
  EXPECT_NE(r.status().message().find("already being preempted"), std::string::npos);
}

TEST(SimulatorTest, StuckRunIsAnErrorNamingTheJobs) {
  std::vector<TraceJob> trace = Trace({{0, 1, 10}, {5, 2, 10}});
  Never s;
  Result<SimResult> r = Simulate(trace, OneNode(), s, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsatisfiable);
  EXPECT_NE(r.status().message().find("stuck at t=5s"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("job 2 (2 GPUs): Resources"), std::string::npos)
      << r.status().message();
}

TEST(SimulatorTest, DoubleBookedGpuIsAnInternalError) {
  std::vector<TraceJob> trace = Trace({{0, 1, 10}, {0, 1, 10}});
  DoubleBooker s;
  Result<SimResult> r = Simulate(trace, OneNode(), s, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  // The applier's text (sched/apply.h): the job, the node, the GPUs and why.
  EXPECT_NE(r.status().message().find("job 2 on node n0001: GPUs {0} are not free"),
            std::string::npos)
      << r.status().message();
}

TEST(SimulatorTest, UnsortedTraceIsRefused) {
  std::vector<TraceJob> trace = Trace({{10, 1, 10}, {5, 1, 10}});
  FirstFit s;
  Result<SimResult> r = Simulate(trace, OneNode(), s, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hachi::sim
