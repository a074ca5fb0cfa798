// The likely cause of a flagged partition: AddPending's summary and ClassifyAlert's
// verdicts, one named row per situation.
#include "report/stats_cause.h"

#include <gtest/gtest.h>

#include "report/job_stats.h"

namespace hachi::report {
namespace {

using sched::Reason;

// A partition of 4 nodes x 8 GPUs, all up; `allocated` of its 32 GPUs in use, the
// largest free set `largest` on n2.
PartitionLoad Nodes(int allocated, int largest) {
  PartitionLoad l;
  l.partition = "gpu";
  l.nodes = 4;
  l.nodes_up = 4;
  l.gpus = 32;
  l.allocated_gpus = allocated;
  l.free_gpus = 32 - allocated;
  l.largest_free = largest;
  l.largest_free_node = largest > 0 ? "n2" : "";
  return l;
}

PendingJob P(std::string user, int gpus, Reason reason, Duration limit = kHour) {
  return PendingJob{"gpu", std::move(user), gpus, gpus, limit, reason};
}

std::vector<PendingJob> Repeat(int n, const PendingJob& j) {
  return std::vector<PendingJob>(n, j);
}

std::vector<PendingJob> Cat(std::vector<PendingJob> a, const std::vector<PendingJob>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Row {
  const char* name;
  PartitionLoad nodes;
  std::vector<PendingJob> pending;
  std::vector<std::string> kinds;  // ClassifyAlert's, in order
  std::string first_text;          // its first cause's text
};

TEST(ClassifyAlert, Table) {
  const std::vector<Row> rows = {
      {"quota: most pending jobs wait for a quota",
       Nodes(8, 8),
       {P("ann", 2, Reason::kUserQuota), P("bob", 2, Reason::kUserQuota),
        P("cat", 2, Reason::kUserQuota), P("dan", 2, Reason::kAccountQuota),
        P("eve", 2, Reason::kPriority)},
       {"quota"},
       "4 of 5 pending jobs wait for a user or account GPU quota"},
      {"fragmentation: 26 free, but 3 at most on one node",
       Nodes(6, 3),
       Cat(Repeat(2, P("ann", 4, Reason::kFragmented)),
           {P("bob", 8, Reason::kFragmented), P("cat", 4, Reason::kResources)}),
       {"fragmentation"},
       "3 of 4 pending jobs fit the partition's 26 free GPUs in all but no node has "
       "enough "
       "of them together (largest free set 3 on n2 < 4 needed)"},
      {"user burst: one user has most of the queue",
       Nodes(32, 0),
       Cat(Repeat(6, P("ann", 1, Reason::kResources)), {P("bob", 1, Reason::kResources)}),
       {"user_burst", "too_few_nodes"},
       "user ann has 6 of 7 pending jobs (6 of 7 pending GPUs)"},
      {"user burst by GPUs: few jobs, most of the GPUs",
       Nodes(30, 2),
       {P("ann", 16, Reason::kResources), P("bob", 1, Reason::kResources),
        P("cat", 1, Reason::kResources)},
       {"user_burst", "too_few_nodes"},
       "user ann has 1 of 3 pending jobs (16 of 18 pending GPUs)"},
      {"too few nodes: running plus waiting exceed the partition",
       Nodes(28, 4),
       {P("ann", 8, Reason::kResources, 10 * kHour), P("bob", 8, Reason::kResources),
        P("cat", 8, Reason::kResources)},
       {"too_few_nodes"},
       "28 GPUs in use + 24 pending > 32 in service on 4 of 4 nodes up (pending work "
       "96.0 "
       "GPU-hours, 3.0 h of the whole partition)"},
      {"quota comes first when several hold",
       Nodes(32, 0),
       Repeat(4, P("ann", 8, Reason::kUserQuota)),
       {"quota", "user_burst", "too_few_nodes"},
       "4 of 4 pending jobs wait for a user or account GPU quota"},
      {"nothing fits a single cause",
       Nodes(16, 8),
       {P("ann", 2, Reason::kDependency), P("bob", 2, Reason::kPriority)},
       {"unknown"},
       "no single cause: 2 pending jobs (1 Dependency, 1 Priority)"},
      {"a single pending job is no burst",
       Nodes(16, 8),
       {P("ann", 2, Reason::kTimeWindow)},
       {"unknown"},
       "no single cause: 1 pending job (1 TimeWindow)"},
  };
  for (const Row& r : rows) {
    std::vector<PartitionLoad> loads = {r.nodes};
    AddPending(&loads, r.pending);
    const std::vector<AlertCause> got = ClassifyAlert(loads[0]);
    std::vector<std::string> kinds;
    for (const AlertCause& c : got) kinds.push_back(c.kind);
    EXPECT_EQ(kinds, r.kinds) << r.name;
    ASSERT_FALSE(got.empty()) << r.name;
    EXPECT_EQ(got[0].text, r.first_text) << r.name;
  }
}

TEST(AddPending, SummarisesPerPartition) {
  PartitionLoad a = Nodes(0, 8), b = Nodes(0, 8);
  b.partition = "other";
  std::vector<PartitionLoad> loads = {a, b};
  AddPending(&loads, {P("ann", 4, Reason::kFragmented, 2 * kHour),
                      P("ann", 2, Reason::kFragmented), P("bob", 8, Reason::kUserQuota),
                      PendingJob{"nowhere", "x", 1, 1, kHour, Reason::kResources}});
  const PartitionLoad& l = loads[0];
  EXPECT_EQ(l.pending_jobs, 3);
  EXPECT_EQ(l.pending_gpus, 14);
  EXPECT_DOUBLE_EQ(l.pending_gpu_hours, 8 + 2 + 8);
  EXPECT_EQ(l.quota_jobs, 1);
  EXPECT_EQ(l.fragmented_jobs, 2);
  EXPECT_EQ(l.needed_gpus, 2);
  EXPECT_EQ(l.top_user, "ann");
  EXPECT_EQ(l.top_user_jobs, 2);
  EXPECT_EQ(l.top_user_gpus, 6);
  EXPECT_EQ(l.reasons, (std::map<std::string, int>{{"Fragmented", 2}, {"UserQuota", 1}}));
  EXPECT_EQ(loads[1].pending_jobs, 0);
}

TEST(JobStatsJson, LoadAndCausesRoundTrip) {
  JobStats s;
  s.now = 1000;
  s.window = 3600;
  s.alert_threshold = 60;
  PartitionStats p;
  p.all.partition = "gpu";
  p.alert = true;
  s.partitions.push_back(p);
  std::vector<PartitionLoad> loads = {Nodes(6, 3)};
  AddPending(&loads, Repeat(3, P("ann", 4, Reason::kFragmented)));
  AttachLoads(&s, loads);
  ASSERT_TRUE(s.partitions[0].has_load);
  ASSERT_EQ(s.partitions[0].causes.size(), 2u);  // fragmentation, then ann's burst
  Result<JobStats> back = JobStatsFromJson(JobStatsToJson(s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  const PartitionStats& q = back->partitions[0];
  EXPECT_TRUE(q.has_load);
  EXPECT_EQ(q.load.largest_free_node, "n2");
  EXPECT_EQ(q.load.fragmented_jobs, 3);
  EXPECT_EQ(q.load.reasons, loads[0].reasons);
  ASSERT_EQ(q.causes.size(), 2u);
  EXPECT_EQ(q.causes[0].kind, "fragmentation");
  EXPECT_EQ(q.causes[0].text, s.partitions[0].causes[0].text);
}

}  // namespace
}  // namespace hachi::report
