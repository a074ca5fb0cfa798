#include "server/history.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/testing.h"

namespace hachi::server {
namespace {

using state::JobState;

JobBrief Pending(state::JobId id, const std::string& part, Time submit,
                 bool held = false) {
  return JobBrief{id, part, JobState::kPending, held, submit, 0, 1};
}
JobBrief Running(state::JobId id, const std::string& part, Time submit, Time start) {
  return JobBrief{id, part, JobState::kRunning, false, submit, start, 1};
}

state::NodeStatus Node(const std::string& name, int gpus, std::vector<state::JobId> jobs,
                       state::NodeState st = state::NodeState::kUp,
                       GpuSet unhealthy = {}) {
  state::NodeStatus n;
  n.record.name = name;
  n.record.state = st;
  n.record.unhealthy = unhealthy;
  n.gpus = gpus;
  n.gpu_jobs = std::move(jobs);
  n.gpu_jobs.resize(static_cast<size_t>(gpus), 0);
  return n;
}

TEST(HistoryTest, SummarizeQueuePerPartition) {
  struct Case {
    const char* name;
    std::vector<JobBrief> active, ended;
    CountedStarts counted;
    std::string part;
    int pending, running, started;
    double wait_pending, wait_started;
  };
  // now = 1000.
  // clang-format off
  const Case cases[] = {
      {"empty_partition_is_listed", {}, {}, {}, "gpu8", 0, 0, 0, -1, -1},
      {"median_of_odd", {Pending(1, "a", 900), Pending(2, "a", 700), Pending(3, "a", 990)},
       {}, {}, "a", 3, 0, 0, 100, -1},
      {"median_of_even", {Pending(1, "a", 900), Pending(2, "a", 700)},
       {}, {}, "a", 2, 0, 0, 200, -1},
      {"held_jobs_do_not_wait", {Pending(1, "a", 0, /*held=*/true), Pending(2, "a", 990)},
       {}, {}, "a", 1, 0, 0, 10, -1},
      {"new_runs_start", {Running(1, "a", 900, 990), Running(2, "a", 100, 900)},
       {}, {{2, 900}}, "a", 0, 2, 1, -1, 90},
      {"a_run_counted_before_does_not_start_again", {Running(1, "a", 900, 985)},
       {}, {{1, 985}}, "a", 0, 1, 0, -1, -1},
      {"a_requeued_jobs_new_run_starts", {Running(1, "a", 900, 995)},
       {}, {{1, 985}}, "a", 0, 1, 1, -1, 95},
      {"ended_between_samples_counts_its_start", {},
       {JobBrief{5, "a", JobState::kCompleted, false, 950, 991, 1},
        JobBrief{6, "a", JobState::kCancelled, false, 950, 0, 1}},
       {}, "a", 0, 0, 1, -1, 41},
      {"partitions_apart", {Pending(1, "a", 900), Pending(2, "b", 400)},
       {}, {}, "b", 1, 0, 0, 600, -1},
  };
  // clang-format on
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const HistorySample s =
        Summarize(1000, c.active, c.ended, c.counted, {}, {"a", "b", "gpu8"});
    ASSERT_EQ(s.partitions.count(c.part), 1u);
    const PartitionSample& p = s.partitions.at(c.part);
    EXPECT_EQ(p.pending, c.pending);
    EXPECT_EQ(p.running, c.running);
    EXPECT_EQ(p.started, c.started);
    EXPECT_DOUBLE_EQ(p.median_wait_pending, c.wait_pending);
    EXPECT_DOUBLE_EQ(p.median_wait_started, c.wait_started);
  }
}

TEST(HistoryTest, UtilisationIsAllocatedOverHealthyGpus) {
  const std::vector<state::NodeStatus> nodes = {
      Node("n1", 8, {7, 7, 0, 0, 0, 0, 0, 0}),
      // GPU 1 unhealthy (and not counted, even though a job still holds it).
      Node("n2", 8, {0, 9, 0, 0, 0, 0, 0, 3}, state::NodeState::kUp,
           GpuSet::FromIndices({1})),
      Node("n3", 8, {4, 4, 4, 4, 4, 4, 4, 4}, state::NodeState::kDown),  // serves nobody
      Node("n4", 8, {}, state::NodeState::kDrained),
  };
  const HistorySample s = Summarize(1000, {}, {}, {}, nodes, {});
  EXPECT_EQ(s.gpus_healthy, 8 + 7 + 8);
  EXPECT_EQ(s.gpus_allocated, 2 + 1);
  const nlohmann::json j = nlohmann::json::parse(HistoryToJson({s}, 15));
  EXPECT_EQ(j["interval_s"], 15);
  EXPECT_NEAR(j["samples"][0]["utilisation"].get<double>(), 3.0 / 23, 1e-9);
}

TEST(HistoryTest, SamplerRingFromAController) {
  FakeClock clock;
  ControllerOptions o;
  o.clock = &clock;
  testing::Harness h(o);
  h.Register("n1");
  HistorySampler sampler(&h.c(), HistorySampler::Options{15, 3});
  const Caller alice{"alice", 1000, 1000, /*authenticated=*/true, /*admin=*/false};
  auto submit = [&](int gpus) {
    Result<std::vector<state::JobId>> ids =
        h->jobs().Submit(testing::MakeSubmit().Gpus(gpus), alice);
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    return ids.ok() ? ids->front() : 0;
  };
  const state::JobId a = submit(2);
  sampler.Sample(clock.Now());  // before the start, in the same second
  h->RunCycle();
  const state::JobId b = submit(8);  // waits for a
  h->RunCycle();
  ASSERT_EQ(h.StateOf(a), JobState::kRunning);
  ASSERT_EQ(h.StateOf(b), JobState::kPending);
  clock.Advance(std::chrono::seconds(15));
  sampler.Sample(clock.Now());

  std::vector<HistorySample> all = sampler.Samples();
  ASSERT_EQ(all.size(), 2u);
  const std::string part = h.Job(a).req.partition;
  EXPECT_EQ(all[0].partitions.at(part).pending, 1);
  EXPECT_EQ(all[0].gpus_allocated, 0);
  EXPECT_EQ(all[1].partitions.at(part).pending, 1);
  EXPECT_EQ(all[1].partitions.at(part).running, 1);
  EXPECT_EQ(all[1].partitions.at(part).started, 1);
  EXPECT_EQ(all[1].gpus_allocated, 2);
  EXPECT_EQ(all[1].gpus_healthy, 8);
  EXPECT_EQ(sampler.Samples(all[0].at).size(), 1u) << "since: only newer samples";

  // The ring keeps the last `capacity` samples.
  for (int i = 0; i < 2; ++i) {
    clock.Advance(std::chrono::seconds(15));
    sampler.Sample(clock.Now());
  }
  all = sampler.Samples();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all.back().at - all.front().at, 30);
}

TEST(HistoryTest, StartSamplesAtOnceAndStopJoins) {
  testing::Harness h;
  h.Register("n1");
  HistorySampler sampler(&h.c(), HistorySampler::Options{3600, 10});
  sampler.Start();
  EXPECT_EQ(sampler.Samples().size(), 1u) << "a sample at start, not one interval later";
  sampler.Stop();  // wakes the thread's hour-long wait at once
  sampler.Stop();
  EXPECT_EQ(sampler.Samples().size(), 1u);
}

}  // namespace
}  // namespace hachi::server
