#include "report/job_stats.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>

#include "cli/golden_testing.h"
#include "cli/slurm_format.h"
#include "core/strings.h"

namespace hachi::report {
namespace {

using state::JobId;
using state::JobRecord;
using state::JobState;
using state::NodeAllocation;

constexpr Time kNow = 100000;

JobRecord Job(JobId id, std::string part, int gpus, Time submit) {
  JobRecord j;
  j.id = id;
  j.req.partition = std::move(part);
  j.req.gpus = gpus;
  j.submit_time = submit;
  return j;
}
JobRecord Run(JobRecord j, Time start, int share_milli = 0) {
  j.state = JobState::kRunning;
  j.start_time = start;
  NodeAllocation a;
  a.node = "n1";
  a.gpus = GpuSet::FirstN(j.req.gpus);
  a.share_milli = share_milli;
  j.allocations.push_back(a);
  return j;
}
JobRecord End(JobRecord j, JobState s, Time end) {
  j.state = s;
  j.end_time = end;
  return j;
}

// Hand-worked: window (96400, 100000].
//   p: A 1 GPU waited 1000, runs from 97000 (3000 GPU-s); B 2 GPUs waited 600, ran
//      97600-98600 (2000); C 2 GPUs started before the window, ended 97400 (2000 inside,
//      no wait sample); D 4 GPUs pending since 98800 (1200); E 4 GPUs held; F 1 GPU
//      pending since 99000 (1000). Waits 600 1000 1000 1200: p50 1000, p95 1200.
//   q: G a 0.5 share, waited 100, runs from 99100 (450 GPU-s); H cancelled while pending.
std::vector<JobRecord> Jobs() {
  JobRecord e = Job(5, "p", 4, 90000);
  e.held = true;
  JobRecord g = Job(7, "q", 1, 99000);
  g.req.gpu_share_milli = 500;
  return {
      Run(Job(1, "p", 1, 96000), 97000),
      End(Run(Job(2, "p", 2, 97000), 97600), JobState::kCompleted, 98600),
      End(Run(Job(3, "p", 2, 90000), 95000), JobState::kFailed, 97400),
      Job(4, "p", 4, 98800),
      e,
      Job(6, "p", 1, 99000),
      Run(g, 99100, 500),
      End(Job(8, "q", 8, 99000), JobState::kCancelled, 99500),
  };
}

TEST(JobStats, HandWorked) {
  JobStats s = ComputeStats(Jobs(), kNow, kHour, 15 * kMinute, 4);
  ASSERT_EQ(s.partitions.size(), 2u);
  const PartitionStats& p = s.partitions[0];
  EXPECT_EQ(p.all.partition, "p");
  EXPECT_EQ(p.all.started, 2);
  EXPECT_EQ(p.all.pending, 2);
  EXPECT_EQ(p.all.held, 1);
  EXPECT_EQ(p.all.samples, 4);
  EXPECT_EQ(p.all.wait_p50, 1000);
  EXPECT_EQ(p.all.wait_p95, 1200);
  EXPECT_DOUBLE_EQ(p.all.gpu_seconds, 7000);
  EXPECT_TRUE(p.alert);
  ASSERT_EQ(p.by_gpus.size(), 3u);
  EXPECT_EQ(p.by_gpus[0].gpus, 1);
  EXPECT_EQ(p.by_gpus[0].wait_p50, 1000);
  EXPECT_DOUBLE_EQ(p.by_gpus[0].gpu_seconds, 3000);
  EXPECT_EQ(p.by_gpus[1].gpus, 2);
  EXPECT_EQ(p.by_gpus[1].started, 1);
  EXPECT_EQ(p.by_gpus[1].samples, 1);
  EXPECT_EQ(p.by_gpus[1].wait_p95, 600);
  EXPECT_DOUBLE_EQ(p.by_gpus[1].gpu_seconds, 4000);
  EXPECT_EQ(p.by_gpus[2].gpus, 4);
  EXPECT_EQ(p.by_gpus[2].pending, 1);
  EXPECT_EQ(p.by_gpus[2].held, 1);
  const PartitionStats& q = s.partitions[1];
  EXPECT_EQ(q.all.partition, "q");
  EXPECT_EQ(q.all.started, 1);
  EXPECT_EQ(q.all.wait_p50, 100);
  EXPECT_FALSE(q.alert);
  ASSERT_EQ(q.by_gpus.size(), 1u);
  EXPECT_EQ(q.by_gpus[0].gpus, 0);
  EXPECT_DOUBLE_EQ(q.all.gpu_seconds, 450);
  EXPECT_DOUBLE_EQ(s.gpu_seconds, 7450);
  EXPECT_NEAR(s.utilisation, 7450.0 / (4 * 3600), 1e-12);

  // The default threshold (20 min) raises no alert; no GPU total, no utilisation.
  JobStats d = ComputeStats(Jobs(), kNow, kHour);
  EXPECT_FALSE(d.partitions[0].alert);
  EXPECT_LT(d.utilisation, 0);
}

TEST(JobStats, Percentile) {
  struct Case {
    std::string name;
    std::vector<Duration> v;
    int p;
    Duration want;
  };
  const std::vector<Case> cases = {
      {"empty", {}, 50, 0},
      {"one", {7}, 95, 7},
      {"p50_even", {4, 1, 3, 2}, 50, 2},
      {"p95_of_20", std::vector<Duration>(20, 1), 95, 1},
      {"p95_tail",
       {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 100},
       95,
       19},
      {"p100", {3, 9, 1}, 100, 9},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(Percentile(c.v, c.p), c.want);
  }
}

// The JSON the server sends reads back to the same statistics (hachi stats renders the
// server's GET /stats); a broken reply names the field.
TEST(JobStats, JsonRoundTrip) {
  const JobStats s = ComputeStats(Jobs(), kNow, kHour, 15 * kMinute, 4);
  std::string text = JobStatsToJson(s);
  Result<JobStats> back = JobStatsFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(JobStatsToJson(*back), text);
  EXPECT_EQ(cli::FormatStats(*back), cli::FormatStats(s));
  text.insert(1, "\"scheduler\": {\"cycles\": 3},");  // the server's extra
  EXPECT_TRUE(JobStatsFromJson(text).ok());
  Result<JobStats> bad = JobStatsFromJson(R"({"now": 1, "window_s": "x"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "stats.window_s: missing or not a number");
  EXPECT_FALSE(JobStatsFromJson("[]").ok());
}

TEST(JobStats, Golden) {
  setenv("TZ", "UTC", 1);
  tzset();
  std::string out = cli::FormatStats(ComputeStats(Jobs(), kNow, kHour, 15 * kMinute, 4)) +
                    "\n" + cli::FormatStats(ComputeStats({}, kNow, kDay));
  // The server's view of the flagged partition p: 8 GPUs, 2 + 2 free on two nodes, and
  // mostly 4-GPU jobs of one user waiting: fragmentation first, then the burst.
  JobStats flagged = ComputeStats(Jobs(), kNow, kHour, 15 * kMinute, 4);
  PartitionLoad p;
  p.partition = "p";
  p.nodes = p.nodes_up = 2;
  p.gpus = 16;
  p.allocated_gpus = 12;
  p.free_gpus = 4;
  p.largest_free = 2;
  p.largest_free_node = "n1";
  std::vector<PartitionLoad> loads = {p};
  AddPending(&loads, {{"p", "ann", 4, 4, kHour, sched::Reason::kFragmented},
                      {"p", "ann", 4, 4, kHour, sched::Reason::kFragmented},
                      {"p", "bob", 1, 1, kHour, sched::Reason::kPriority}});
  AttachLoads(&flagged, loads);
  out += "\n" + cli::FormatStats(flagged);
  cli::testing::ExpectGolden("stats.txt", out);
}

}  // namespace
}  // namespace hachi::report
