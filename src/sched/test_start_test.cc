// sbatch --test-only's answer (test_start.h): a job that fits starts now, one that must
// wait gets its backfill reservation, and its id never clashes with the queue's.
#include "sched/test_start.h"

#include <gtest/gtest.h>

#include "sched/testing.h"

namespace hachi::sched {
namespace {

using testing::MakeCluster;
using testing::MakeJob;

constexpr Time kNow = 1000;

std::unique_ptr<Scheduler> Hachi() {
  SchedConfig c;
  c.policy = "hachi";
  Result<std::unique_ptr<Scheduler>> s = Scheduler::Create(c);
  return std::move(*s);
}

// One hgx-h100 with GPUs 0-3 busy until 2 h.
testing::ClusterBuilder Busy() {
  return MakeCluster()
      .Nodes(1, "hgx-h100")
      .Partition("p")
      .Running(MakeJob(90).Gpus(4).Start(0).Limit(2 * kHour), 0, "0-3");
}

Job Probe(int gpus) {
  Job j = MakeJob(1).Gpus(gpus).Limit(kHour).job();
  j.partition = 0;
  j.req.partition = "p";
  return j;
}

TEST(PredictStart, FitsNow) {
  const PredictedStart p = PredictStart(*Hachi(), Busy().Build(), Probe(4), kNow);
  ASSERT_TRUE(p.known);
  EXPECT_EQ(p.start, kNow);
  ASSERT_EQ(p.allocations.size(), 1u);
  EXPECT_EQ(p.allocations[0].node, 0);
  EXPECT_EQ(p.allocations[0].gpus.size(), 4);
}

TEST(PredictStart, WaitsForTheRunningJob) {
  const PredictedStart p = PredictStart(*Hachi(), Busy().Build(), Probe(8), kNow);
  ASSERT_TRUE(p.known);
  EXPECT_EQ(p.start, 2 * kHour);
}

TEST(PredictStart, QueuedJobsAheadCountAndIdsDoNotClash) {
  // Job 1 (pending, submitted first) takes the free half now: the probe, also asking
  // for 4, waits for the first of the two to end (job 1, after its hour). Its id would
  // be 1 too, were it not replaced.
  const ClusterState s =
      Busy().Pending(MakeJob(1).Gpus(4).Limit(kHour).Submit(1).Partition("p")).Build();
  const PredictedStart p = PredictStart(*Hachi(), s, Probe(4), kNow);
  ASSERT_TRUE(p.known);
  EXPECT_EQ(p.start, kNow + kHour);
}

}  // namespace
}  // namespace hachi::sched
