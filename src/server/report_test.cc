// `hachi report` on the Controller: the records' GPU-hours with the running
// jobs' usage so far, nodes grouped by their GPU model; and the job list's live usage.
#include <gtest/gtest.h>

#include <string>

#include "server/testing.h"

namespace hachi::server {
namespace {

using testing::Harness;
using testing::MakeSubmit;

// A sample of every GPU the job holds on `node` at `util` %.
api::AgentHealth Sample(const state::JobRecord& job, const std::string& node, Time at,
                        int util) {
  state::JobUsageSample s;
  s.job = job.id;
  s.start_time = job.start_time;
  s.at = at;
  for (const state::NodeAllocation& a : job.allocations) {
    if (a.node != node) continue;
    for (int g : a.gpus.Indices()) {
      state::GpuSample gs;
      gs.gpu = g;
      gs.util = util;
      s.gpus.push_back(gs);
    }
  }
  api::AgentHealth h;
  h.usage.push_back(s);
  return h;
}

TEST(Report, RunningJobsCountWithTheirUsageSoFar) {
  FakeClock clock;
  ControllerOptions o;
  o.clock = &clock;
  Harness h(o);
  h.Register("n1");
  const Time t0 = clock.Now();
  const state::JobId sampled = h.Submit(MakeSubmit().Gpus(4));
  const state::JobId unsampled = h.Submit(MakeSubmit().Gpus(2));
  h->RunCycle();
  ASSERT_EQ(h.Work("n1").launch.size(), 2u);
  ASSERT_EQ(h.StateOf(sampled), state::JobState::kRunning);
  ASSERT_EQ(h.StateOf(unsampled), state::JobState::kRunning);
  clock.Advance(std::chrono::hours(1));
  const state::JobRecord job = h.Job(sampled);
  ASSERT_TRUE(h->nodes().ReportHealth("n1", Sample(job, "n1", clock.Now(), 40)).ok());

  // The job list carries the running job's usage so far, as GET /jobs/ID does.
  for (const state::JobRecord& r : h->job_views().Jobs(true)) {
    if (r.id == sampled) {
      EXPECT_EQ(r.usage.samples, 4);
      EXPECT_DOUBLE_EQ(r.usage.gpu_util, 40);
    } else {
      EXPECT_EQ(r.usage.samples, 0) << r.id;
    }
  }

  report::ReportQuery q;
  q.from = t0 - 3600;
  q.to = t0 + 7200;
  q.by = report::ReportBy::kNodeGroup;
  const report::GpuReport r = h->cluster_views().GpuHours(q);
  EXPECT_EQ(r.now, clock.Now());
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.groups[0].name, h->cluster_views().Nodes()[0].gpu_model);
  EXPECT_FALSE(r.groups[0].name.empty());
  // Both run from t0 to now (1 h): 6 GPU-h, of which 4 sampled at 40 %.
  EXPECT_EQ(r.total.jobs, 2);
  EXPECT_DOUBLE_EQ(r.total.gpu_hours, 6);
  EXPECT_DOUBLE_EQ(r.total.measured_gpu_hours, 4);
  EXPECT_DOUBLE_EQ(r.total.used_gpu_hours, 1.6);
  EXPECT_DOUBLE_EQ(r.total.unmeasured_gpu_hours, 2);
  ASSERT_EQ(r.idlest.size(), 1u);
  EXPECT_EQ(r.idlest[0].id, sampled);
  EXPECT_DOUBLE_EQ(r.idlest[0].idle_gpu_hours, 2.4);

  // Ended, the run's summary is in its record, and the sums do not change.
  h.Exit("n1", sampled, 0);
  ASSERT_EQ(h.StateOf(sampled), state::JobState::kCompleted);
  EXPECT_EQ(h.Job(sampled).usage.samples, 4);
  const report::GpuReport after = h->cluster_views().GpuHours(q);
  EXPECT_DOUBLE_EQ(after.total.measured_gpu_hours, 4);
  EXPECT_DOUBLE_EQ(after.total.used_gpu_hours, 1.6);
}

}  // namespace
}  // namespace hachi::server
