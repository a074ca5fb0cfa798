#include "report/gpu_report.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace hachi::report {
namespace {

using state::JobId;
using state::JobRecord;
using state::JobState;
using state::NodeAllocation;
using state::UsageSummary;

constexpr Time kH = 3600;
const std::string kH100 = "NVIDIA H100 80GB HBM3";
const std::string kA100 = "NVIDIA A100-SXM4-80GB";
const std::map<std::string, std::string> kGroups = {{"n1", kH100}, {"n2", kA100}};

// A job of `account`/`user` in `partition` holding `alloc` (node, GPUs, share).
struct Alloc {
  std::string node;
  int gpus;
  int share_milli = 0;
};
JobRecord Job(JobId id, std::string account, std::string user, std::string partition,
              std::vector<Alloc> alloc) {
  JobRecord j;
  j.id = id;
  j.req.account = std::move(account);
  j.req.user = std::move(user);
  j.req.partition = std::move(partition);
  for (const Alloc& a : alloc) {
    NodeAllocation n;
    n.node = a.node;
    n.gpus = GpuSet::FirstN(a.gpus);
    n.share_milli = a.share_milli;
    j.allocations.push_back(n);
  }
  return j;
}
JobRecord Ran(JobRecord j, Time start, Time end, double util = -1) {
  j.state = end > 0 ? JobState::kCompleted : JobState::kRunning;
  j.start_time = start;
  j.end_time = end;
  if (util >= 0) {
    j.usage.samples = 12;
    j.usage.gpu_util = util;
  }
  return j;
}

// The period [10h, 20h), now 22h. Worked by hand:
//   1 vision/alice gpu8, 8 GPUs on n1, ran 8h-12h at 50 %: 2 h inside, 16 GPU-h, 8 used.
//   2 vision/bob gpu8, 4 GPUs on n1, ran 19h-21h at 25 %: 1 h inside, 4 GPU-h, 1 used.
//   3 nlp/carol shared, a 250-milli share on n2, ran 12h-16h at 80 %: 1 GPU-h, 0.8 used.
//   4 nlp/dave gpu8, a gang of 4 GPUs on n1 + 2 on n2, running since 15h at 10 %: 5 h
//     inside, 30 GPU-h (20 on n1, 10 on n2), 3 used.
//   5 (no account)/erin gpu8, 2 GPUs on n3 (no group), ran 10h-11h, never sampled: 2
//     GPU-h, not measured.
//   Not counted: 6 ran 2h-5h; 7 pending; 8 ended at 10h; 9 started at 20h; 10 no GPUs.
// Total 53 GPU-h, 51 measured, 12.8 used, 2 not measured.
std::vector<JobRecord> History() {
  JobRecord pending = Job(7, "vision", "alice", "gpu8", {});
  pending.req.gpus = 8;
  return {
      Ran(Job(1, "vision", "alice", "gpu8", {{"n1", 8}}), 8 * kH, 12 * kH, 50),
      Ran(Job(2, "vision", "bob", "gpu8", {{"n1", 4}}), 19 * kH, 21 * kH, 25),
      Ran(Job(3, "nlp", "carol", "shared", {{"n2", 1, 250}}), 12 * kH, 16 * kH, 80),
      Ran(Job(4, "nlp", "dave", "gpu8", {{"n1", 4}, {"n2", 2}}), 15 * kH, 0, 10),
      Ran(Job(5, "", "erin", "gpu8", {{"n3", 2}}), 10 * kH, 11 * kH),
      Ran(Job(6, "vision", "alice", "gpu8", {{"n1", 8}}), 2 * kH, 5 * kH, 90),
      pending,
      Ran(Job(8, "vision", "alice", "gpu8", {{"n1", 8}}), 9 * kH, 10 * kH, 0),
      Ran(Job(9, "nlp", "dave", "gpu8", {{"n2", 8}}), 20 * kH, 0, 0),
      Ran(Job(10, "nlp", "dave", "cpu", {{"n3", 0}}), 10 * kH, 12 * kH),
  };
}

GpuReport Report(ReportBy by, int top = 10) {
  ReportQuery q;
  q.from = 10 * kH;
  q.to = 20 * kH;
  q.by = by;
  q.top = top;
  return ComputeGpuReport(History(), q, 22 * kH, kGroups);
}

// name, jobs, allocated, measured, used.
void ExpectGroup(const ReportGroup& g, const std::string& name, int jobs, double hours,
                 double measured, double used) {
  SCOPED_TRACE(name);
  EXPECT_EQ(g.name, name);
  EXPECT_EQ(g.jobs, jobs);
  EXPECT_DOUBLE_EQ(g.gpu_hours, hours);
  EXPECT_DOUBLE_EQ(g.measured_gpu_hours, measured);
  EXPECT_DOUBLE_EQ(g.used_gpu_hours, used);
  EXPECT_DOUBLE_EQ(g.unmeasured_gpu_hours, hours - measured);
}

TEST(GpuReport, TotalSumsExactly) {
  const GpuReport r = Report(ReportBy::kAccount);
  EXPECT_EQ(r.from, 10 * kH);
  EXPECT_EQ(r.to, 20 * kH);
  EXPECT_EQ(r.now, 22 * kH);
  ExpectGroup(r.total, "total", 5, 53, 51, 12.8);
  EXPECT_DOUBLE_EQ(r.total.Utilisation(), 100 * 12.8 / 51);
  EXPECT_DOUBLE_EQ(r.total.IdleGpuHours(), 51 - 12.8);
}

TEST(GpuReport, ByAccount) {
  const GpuReport r = Report(ReportBy::kAccount);
  ASSERT_EQ(r.groups.size(), 3u);
  ExpectGroup(r.groups[0], "nlp", 2, 31, 31, 3.8);
  ExpectGroup(r.groups[1], "vision", 2, 20, 20, 9);
  ExpectGroup(r.groups[2], "", 1, 2, 0, 0);
  EXPECT_EQ(r.groups[2].Utilisation(), -1);  // nothing measured: no figure
  EXPECT_DOUBLE_EQ(r.groups[1].Utilisation(), 45);
}

TEST(GpuReport, ByUserAndPartition) {
  const GpuReport users = Report(ReportBy::kUser);
  ASSERT_EQ(users.groups.size(), 5u);
  ExpectGroup(users.groups[0], "dave", 1, 30, 30, 3);
  ExpectGroup(users.groups[1], "alice", 1, 16, 16, 8);
  ExpectGroup(users.groups[2], "bob", 1, 4, 4, 1);
  ExpectGroup(users.groups[3], "erin", 1, 2, 0, 0);
  ExpectGroup(users.groups[4], "carol", 1, 1, 1, 0.8);

  // Each account's users apart (sreport's AccountUtilizationByUser).
  const GpuReport pairs = Report(ReportBy::kAccountUser);
  ASSERT_EQ(pairs.groups.size(), 5u);
  ExpectGroup(pairs.groups[0], "nlp/dave", 1, 30, 30, 3);
  ExpectGroup(pairs.groups[1], "vision/alice", 1, 16, 16, 8);
  ExpectGroup(pairs.groups[4], "nlp/carol", 1, 1, 1, 0.8);

  const GpuReport parts = Report(ReportBy::kPartition);
  ASSERT_EQ(parts.groups.size(), 2u);
  ExpectGroup(parts.groups[0], "gpu8", 4, 52, 50, 12);
  ExpectGroup(parts.groups[1], "shared", 1, 1, 1, 0.8);
}

// A gang over two node groups is split by the GPUs it holds on each; the total counts
// it once.
TEST(GpuReport, ByNodeGroupSplitsGangs) {
  const GpuReport r = Report(ReportBy::kNodeGroup);
  ASSERT_EQ(r.groups.size(), 3u);
  ExpectGroup(r.groups[0], kH100, 3, 40, 40, 11);
  ExpectGroup(r.groups[1], kA100, 2, 11, 11, 1.8);
  ExpectGroup(r.groups[2], "", 1, 2, 0, 0);  // n3: no topology known
  EXPECT_EQ(r.total.jobs, 5);
  EXPECT_DOUBLE_EQ(r.total.gpu_hours, 53);
}

// Pools (docs/pools.md): n1 owned at 2 a GPU-hour, n2 burst at 4, n3 in none. Each
// part of a job costs its pool's price; by pool the gang splits as by node group.
TEST(GpuReport, CostAtEachPoolsPrice) {
  ReportQuery q;
  q.from = 10 * kH;
  q.to = 20 * kH;
  const std::map<std::string, std::string> pools = {{"n1", "owned"}, {"n2", "burst"}};
  const std::map<std::string, double> prices = {{"n1", 2.0}, {"n2", 4.0}};
  q.by = ReportBy::kPool;
  GpuReport r = ComputeGpuReport(History(), q, 22 * kH, pools, prices);
  ASSERT_EQ(r.groups.size(), 3u);
  ExpectGroup(r.groups[0], "owned", 3, 40, 40, 11);
  EXPECT_DOUBLE_EQ(r.groups[0].cost, 80);
  ExpectGroup(r.groups[1], "burst", 2, 11, 11, 1.8);
  EXPECT_DOUBLE_EQ(r.groups[1].cost, 44);
  EXPECT_DOUBLE_EQ(r.groups[2].cost, 0);  // n3: no pool, no price
  EXPECT_DOUBLE_EQ(r.total.cost, 124);
  q.by = ReportBy::kAccount;
  r = ComputeGpuReport(History(), q, 22 * kH, {}, prices);
  ASSERT_EQ(r.groups.size(), 3u);
  EXPECT_EQ(r.groups[0].name, "nlp");  // 1 GPU-h on n2, 20 on n1, 10 on n2
  EXPECT_DOUBLE_EQ(r.groups[0].cost, 4 + 40 + 40);
  EXPECT_EQ(r.groups[1].name, "vision");  // 20 GPU-h on n1
  EXPECT_DOUBLE_EQ(r.groups[1].cost, 40);
  EXPECT_DOUBLE_EQ(r.total.cost, 124);
  Result<GpuReport> back = GpuReportFromJson(GpuReportToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
}

TEST(GpuReport, IdlestJobs) {
  const GpuReport r = Report(ReportBy::kAccount, 3);
  ASSERT_EQ(r.idlest.size(), 3u);
  EXPECT_EQ(r.idlest[0].id, 4u);
  EXPECT_DOUBLE_EQ(r.idlest[0].idle_gpu_hours, 27);
  EXPECT_DOUBLE_EQ(r.idlest[0].gpus, 6);
  EXPECT_DOUBLE_EQ(r.idlest[0].gpu_hours, 30);
  EXPECT_DOUBLE_EQ(r.idlest[0].used_gpu_hours, 3);
  EXPECT_DOUBLE_EQ(r.idlest[0].gpu_util, 10);
  EXPECT_EQ(r.idlest[0].user, "dave");
  EXPECT_EQ(r.idlest[0].account, "nlp");
  EXPECT_EQ(r.idlest[0].partition, "gpu8");
  EXPECT_EQ(r.idlest[1].id, 1u);
  EXPECT_DOUBLE_EQ(r.idlest[1].idle_gpu_hours, 8);
  EXPECT_EQ(r.idlest[2].id, 2u);
  EXPECT_DOUBLE_EQ(r.idlest[2].idle_gpu_hours, 3);
  // A share: 0.25 GPU.
  const GpuReport all = Report(ReportBy::kAccount, 100);
  ASSERT_EQ(all.idlest.size(), 4u);  // job 5 was never measured: not idle, unknown
  EXPECT_EQ(all.idlest[3].id, 3u);
  EXPECT_DOUBLE_EQ(all.idlest[3].gpus, 0.25);
  EXPECT_NEAR(all.idlest[3].idle_gpu_hours, 0.2, 1e-12);
  EXPECT_TRUE(Report(ReportBy::kAccount, 0).idlest.empty());
}

// The server adds a running job with its usage so far, not the record's (empty) one.
TEST(GpuReport, BuilderTakesTheRunsUsage) {
  ReportQuery q;
  q.from = 0;
  q.to = 10 * kH;
  GpuReportBuilder b(q, 2 * kH, nullptr);
  JobRecord running = Ran(Job(1, "a", "u", "p", {{"n1", 2}}), kH, 0);
  UsageSummary live;
  live.samples = 3;
  live.gpu_util = 75;
  b.Add(running, live);
  const GpuReport r = b.Finish();
  ExpectGroup(r.total, "total", 1, 2, 2, 1.5);
}

TEST(GpuReport, EmptyPeriod) {
  ReportQuery q;
  q.from = 30 * kH;
  q.to = 40 * kH;
  const GpuReport r = ComputeGpuReport(History(), q, 22 * kH, kGroups);
  EXPECT_TRUE(r.groups.empty());
  EXPECT_TRUE(r.idlest.empty());
  ExpectGroup(r.total, "total", 0, 0, 0, 0);
  EXPECT_EQ(r.total.Utilisation(), -1);
}

TEST(GpuReport, JsonRoundTrip) {
  const GpuReport r = Report(ReportBy::kNodeGroup, 2);
  Result<GpuReport> back = GpuReportFromJson(GpuReportToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  EXPECT_FALSE(GpuReportFromJson("[]").ok());
  Result<GpuReport> bad = GpuReportFromJson(R"({"from":1,"to":2,"now":3,"by":"x"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("report.by"), std::string::npos);
  bad = GpuReportFromJson(
      R"({"from":1,"to":2,"now":3,"by":"user","groups":[{"name":"a"}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("report.groups[0].jobs"), std::string::npos)
      << bad.status().message();
}

TEST(GpuReport, ByNames) {
  for (ReportBy by : {ReportBy::kAccount, ReportBy::kUser, ReportBy::kAccountUser,
                      ReportBy::kPartition, ReportBy::kNodeGroup, ReportBy::kPool}) {
    ReportBy back = ReportBy::kAccount;
    ASSERT_TRUE(ParseReportBy(ReportByName(by), &back));
    EXPECT_EQ(back, by);
  }
  ReportBy x;
  EXPECT_FALSE(ParseReportBy("cluster", &x));
}

}  // namespace
}  // namespace hachi::report
