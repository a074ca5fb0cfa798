// Metrics: nearest-rank percentiles and the job statistics, on hand-computed data.
#include "sim/metrics.h"

#include <gtest/gtest.h>

namespace hachi::sim {
namespace {

TEST(PercentileTest, NearestRank) {
  const std::vector<double> ten = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5};  // 1..10 shuffled
  std::vector<double> twenty;
  for (int i = 1; i <= 20; ++i) twenty.push_back(i);
  struct Case {
    const char* name;
    std::vector<double> values;
    double p;
    double want;
  };
  const Case cases[] = {
      {"empty", {}, 50, 0},
      {"single", {7}, 99, 7},
      {"p50 of 10 is rank 5", ten, 50, 5},
      {"p95 of 10 is rank 10", ten, 95, 10},
      {"p10 of 10 is rank 1", ten, 10, 1},
      {"p11 of 10 is rank 2", ten, 11, 2},
      {"p100", ten, 100, 10},
      {"p95 of 20 is rank 19, not 20", twenty, 95, 19},
      {"p99 of 20 is rank 20", twenty, 99, 20},
      {"p50 of 4 is rank 2", {40, 10, 30, 20}, 50, 20},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Percentile(c.values, c.p), c.want) << c.name;
  }
}

TEST(GpuBucketTest, Buckets) {
  struct Case {
    int gpus;
    const char* want;
  };
  const Case cases[] = {{1, "1"}, {2, "2"}, {3, "4"},   {4, "4"},
                        {5, "8"}, {8, "8"}, {12, ">8"}, {128, ">8"}};
  for (const Case& c : cases) EXPECT_EQ(GpuBucket(c.gpus), c.want) << c.gpus;
}

TEST(MetricsTest, HandComputedRun) {
  // 4 jobs on an 8-GPU cluster. Waits 0, 10, 20, 30; JCTs 100, 60, 70, 130.
  const std::vector<JobOutcome> jobs = {
      {1, 8, 0, 0, 100},
      {2, 1, 0, 10, 60},
      {3, 2, 50, 70, 120},
      {4, 16, 70, 100, 200},
  };
  SimMetrics m;
  ComputeMetrics(jobs, 8, {3.0, 1.0, 2.0}, &m);
  EXPECT_EQ(m.jobs, 4);
  EXPECT_DOUBLE_EQ(m.wait_mean_s, 15);
  EXPECT_EQ(m.wait_p50_s, 10);
  EXPECT_EQ(m.wait_p95_s, 30);
  EXPECT_EQ(m.wait_p99_s, 30);
  EXPECT_DOUBLE_EQ(m.jct_mean_s, 90);
  EXPECT_EQ(m.makespan_s, 200);
  // Busy GPU-s: 8*100 + 1*50 + 2*50 + 16*100 = 2550 over 8 GPUs x 200 s.
  EXPECT_DOUBLE_EQ(m.gpu_utilization, 2550.0 / 1600.0);
  EXPECT_EQ(m.wait_p50_s_by_gpus.at("8"), 0);
  EXPECT_EQ(m.wait_p95_s_by_gpus.at(">8"), 30);
  EXPECT_EQ(m.wait_p50_s_by_gpus.count("4"), 0u);  // no 3-4 GPU jobs
  EXPECT_EQ(m.jobs_by_gpus.at("2"), 1);
  EXPECT_EQ(m.cycles, 3);
  EXPECT_EQ(m.cycle_ms_p50, 2);
  EXPECT_EQ(m.cycle_ms_p99, 3);
  EXPECT_DOUBLE_EQ(m.cycle_ms_mean, 2);
  EXPECT_DOUBLE_EQ(m.sched_s, 0.006);
}

}  // namespace
}  // namespace hachi::sim
