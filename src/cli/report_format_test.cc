// `hachi report`'s table and CSV (cli/report_format.h): golden files from a hand-built
// history, and --from/--to parsing.
#include "cli/report_format.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "cli/golden_testing.h"

namespace hachi::cli {
namespace {

using state::JobRecord;

constexpr Time kH = 3600;
constexpr Time kDay0 = 1795910400;  // 2026-11-29T00:00:00Z

JobRecord Job(state::JobId id, const std::string& account, const std::string& user,
              const std::string& node, int gpus, int share_milli, Time start, Time end,
              double util) {
  JobRecord j;
  j.id = id;
  j.req.account = account;
  j.req.user = user;
  j.req.partition = share_milli > 0 ? "shared" : "gpu8";
  state::NodeAllocation a;
  a.node = node;
  a.gpus = GpuSet::FirstN(gpus);
  a.share_milli = share_milli;
  j.allocations.push_back(a);
  j.state = end > 0 ? state::JobState::kCompleted : state::JobState::kRunning;
  j.start_time = kDay0 + start;
  j.end_time = end > 0 ? kDay0 + end : 0;
  if (util >= 0) {
    j.usage.samples = 100;
    j.usage.gpu_util = util;
  }
  return j;
}

report::GpuReport Sample(report::ReportBy by, int top,
                         const std::map<std::string, double>& prices = {}) {
  const std::vector<JobRecord> jobs = {
      Job(101, "vision", "alice", "n1", 8, 0, -2 * kH, 2 * kH, 50),
      Job(102, "vision", "bob", "n1", 4, 0, 5 * kH, 0, 25),
      Job(103, "nlp, speech", "carol", "n2", 1, 250, 1 * kH, 5 * kH, 80),
      Job(104, "", "erin", "n3", 2, 0, 0, 1 * kH, -1),
  };
  report::ReportQuery q;
  q.from = kDay0;
  q.to = kDay0 + 10 * kH;
  q.by = by;
  q.top = top;
  const std::map<std::string, std::string> groups =
      by == report::ReportBy::kPool
          ? std::map<std::string, std::string>{{"n1", "owned"}, {"n2", "burst"}}
          : std::map<std::string, std::string>{{"n1", "NVIDIA H100 80GB HBM3"},
                                               {"n2", "NVIDIA L40S"}};
  return report::ComputeGpuReport(jobs, q, kDay0 + 8 * kH, groups, prices);
}

TEST(ReportFormat, Golden) {
  setenv("TZ", "UTC", 1);
  tzset();
  std::string out = FormatReport(Sample(report::ReportBy::kAccount, 3)) + "\n" +
                    FormatReport(Sample(report::ReportBy::kNodeGroup, 0)) + "\n" +
                    FormatReport(Sample(report::ReportBy::kUser, 0));
  testing::ExpectGolden("report.txt", out);
  testing::ExpectGolden("report.csv",
                        FormatReportCsv(Sample(report::ReportBy::kAccount, 3)));
}

// With priced pools (docs/pools.md) the table and the CSV gain a cost column.
TEST(ReportFormat, CostWithPricedPools) {
  setenv("TZ", "UTC", 1);
  tzset();
  const std::map<std::string, double> prices = {{"n1", 2.0}, {"n2", 4.5}};
  testing::ExpectGolden(
      "report-pools.txt",
      FormatReport(Sample(report::ReportBy::kPool, 0, prices)) +
          FormatPoolsPowered({{"burst", 4, 1, 31.25, 125.0}, {"spot", 2, 0, 0.5, 0.9}}) +
          "\n" + FormatReportCsv(Sample(report::ReportBy::kAccount, 0, prices)));
  EXPECT_EQ(FormatPoolsPowered({}), "");
}

TEST(ReportFormat, Times) {
  setenv("TZ", "UTC", 1);
  tzset();
  const Time now = kDay0 + 12 * kH;
  EXPECT_EQ(*ParseReportTime("1795910400", now), kDay0);
  EXPECT_EQ(*ParseReportTime("now-7days", now), now - 7 * 86400);
  EXPECT_EQ(*ParseReportTime("2026-11-29", now), kDay0);
  EXPECT_EQ(*ParseReportTime("2026-11-28T06:00", now), kDay0 - 18 * kH);
  EXPECT_EQ(*ParseReportTime("now", now), now);
  EXPECT_FALSE(ParseReportTime("last tuesday", now).ok());
}

}  // namespace
}  // namespace hachi::cli
