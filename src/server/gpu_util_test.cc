// The node board's shading (docs/dashboard.md): a node's `gpu_util` is each
// GPU's SM utilisation in the latest sample of the running job holding it, and -1 for a
// GPU nothing measured: free, never sampled, another job's GPU, or once the job ended.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/testing.h"

namespace hachi::server {
namespace {

using state::JobState;
using testing::Harness;
using testing::MakeSubmit;

std::vector<int> GpuUtil(Harness& h, const std::string& node) {
  for (const state::NodeStatus& n : h->cluster_views().Nodes()) {
    if (n.record.name == node) return n.gpu_util;
  }
  return {};
}

// One sample of `job`'s run: (gpu, util) pairs.
api::AgentHealth Sample(const state::JobRecord& job, Time at,
                        const std::vector<std::pair<int, int>>& gpus) {
  state::JobUsageSample s;
  s.job = job.id;
  s.start_time = job.start_time;
  s.at = at;
  for (const auto& [gpu, util] : gpus) {
    state::GpuSample g;
    g.gpu = gpu;
    g.util = util;
    s.gpus.push_back(g);
  }
  api::AgentHealth report;
  report.usage.push_back(s);
  return report;
}

TEST(GpuUtil, EachGpuShowsTheLatestSampleOfTheRunHoldingIt) {
  Harness h;
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit().Gpus(2).Time(600));
  h->RunCycle();
  const state::JobRecord job = h.Job(id);
  ASSERT_EQ(job.state, JobState::kRunning);
  const GpuSet held = job.allocations[0].gpus;
  const std::vector<int> own = held.Indices();
  ASSERT_EQ(own.size(), 2u);
  const int a = own[0];
  const int b = own[1];
  int other = 0;
  while (held.contains(other)) ++other;
  const std::vector<int> none(GpuUtil(h, "n1").size(), -1);
  ASSERT_GE(none.size(), 3u);
  EXPECT_EQ(GpuUtil(h, "n1"), none) << "nothing sampled yet";

  // A figure for a GPU the job does not hold is not shown on it.
  ASSERT_TRUE(h->nodes()
                  .ReportHealth("n1", Sample(job, job.start_time + 10,
                                             {{a, 40}, {b, 90}, {other, 77}}))
                  .ok());
  std::vector<int> want = none;
  want[a] = 40;
  want[b] = 90;
  EXPECT_EQ(GpuUtil(h, "n1"), want);

  // The next sample replaces it; a GPU without a figure keeps its last one.
  ASSERT_TRUE(
      h->nodes()
          .ReportHealth("n1", Sample(job, job.start_time + 20, {{a, 55}, {b, -1}}))
          .ok());
  want[a] = 55;
  EXPECT_EQ(GpuUtil(h, "n1"), want);

  // A sample of an earlier run of the job is ignored.
  state::JobRecord old = job;
  old.start_time = job.start_time - 100;
  ASSERT_TRUE(
      h->nodes().ReportHealth("n1", Sample(old, job.start_time + 30, {{a, 3}})).ok());
  EXPECT_EQ(GpuUtil(h, "n1"), want);

  // Ended: its GPUs are free and show nothing.
  h.Exit("n1", id, 0);
  ASSERT_EQ(h.StateOf(id), JobState::kCompleted);
  EXPECT_EQ(GpuUtil(h, "n1"), none);
}

}  // namespace
}  // namespace hachi::server
