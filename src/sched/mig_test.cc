// MIG devices as devices of their own (mig.h): the profile check, submit-time
// validation, placement (best fit by devices left), the applier's booking and release,
// and the diagnosis with its numbers.
#include "sched/mig.h"

#include <gtest/gtest.h>

#include "sched/apply.h"
#include "sched/inspect.h"
#include "sched/scheduler.h"
#include "sched/testing.h"

namespace hachi::sched {
namespace {

using testing::MakeJob;

std::unique_ptr<Scheduler> MakeScheduler(const std::string& policy) {
  SchedConfig c;
  c.policy = policy;
  c.explain = true;
  return std::move(Scheduler::Create(c).value());
}

TEST(MigTest, ProfilesAreRecognised) {
  struct Row {
    const char* text;
    bool mig;
  };
  const Row rows[] = {{"1g.10gb", true},    {"3g.40gb", true},    {"7g.80gb", true},
                      {"1c.3g.40gb", true}, {"1g.10gb+me", true}, {"1g.5gb", true},
                      {"a100", false},      {"h100-80", false},   {"1g", false},
                      {"g.10gb", false},    {"1g.10gb+", false},  {"1g.10", false},
                      {"1g.10gbx", false},  {"", false}};
  for (const Row& r : rows) EXPECT_EQ(LooksLikeMigProfile(r.text), r.mig) << r.text;
}

// Node 0: GPU 0 in 7 1g.10gb devices, GPU 1 as 3g.40gb + 2 1g.10gb; node 1: GPU 0 in
// 2 1g.10gb devices. Every other GPU whole.
testing::ClusterBuilder MigCluster() {
  std::vector<std::string> seven(7, "1g.10gb");
  testing::ClusterBuilder b;
  b.Nodes(2, "hgx-h100")
      .Mig(0, 0, seven)
      .Mig(0, 1, {"3g.40gb", "1g.10gb", "1g.10gb"})
      .Mig(1, 0, {"1g.10gb", "1g.10gb"})
      .Partition("gpu");
  return b;
}

TEST(MigTest, ValidationRefusesWhatCannotRun) {
  ClusterState s = MigCluster().Build();
  auto refused = [&](JobRequest r) {
    r.partition = r.partition.empty() ? "gpu" : r.partition;
    Result<Job> v = ValidateRequest(s, r);
    return v.ok() ? std::string() : v.status().message();
  };
  JobRequest ok;
  ok.gpus = 2;
  ok.mig_profile = "1g.10gb";
  EXPECT_EQ(refused(ok), "");
  JobRequest gang = ok;
  gang.nodes = 2;
  EXPECT_NE(refused(gang).find("single-node"), std::string::npos) << refused(gang);
  JobRequest excl = ok;
  excl.exclusive = true;
  EXPECT_NE(refused(excl).find("--exclusive"), std::string::npos);
  JobRequest missing = ok;
  missing.mig_profile = "2g.20gb";
  EXPECT_EQ(refused(missing),
            "no node of partition gpu has 2g.20gb MIG devices (MIG profiles there: "
            "1g.10gb, 3g.40gb)");
  JobRequest many = ok;
  many.gpus = 10;  // node 0 has 9
  EXPECT_EQ(refused(many),
            "asks for 10 1g.10gb MIG devices on one node; the most in partition gpu is "
            "9 (n0)");
  JobRequest bad = ok;
  bad.mig_profile = "1g";
  EXPECT_NE(refused(bad).find("not a MIG profile"), std::string::npos);
  // A whole-node partition gives no MIG devices.
  testing::ClusterBuilder b = MigCluster();
  b.Partition("gpu8", PartitionMode::kWholeNode);
  s = b.Build();
  JobRequest whole = ok;
  whole.partition = "gpu8";
  EXPECT_NE(refused(whole).find("gives whole nodes"), std::string::npos)
      << refused(whole);
  // A whole-node job takes every GPU whole: never a node with a MIG GPU.
  JobRequest eight;
  eight.gpus = 8;
  eight.partition = "gpu8";
  EXPECT_NE(refused(eight).find("has GPUs in MIG mode"), std::string::npos)
      << refused(eight);
  // Whole GPUs in a shared partition: only those not in MIG mode count (7 on node 1).
  JobRequest shared8;
  shared8.gpus = 8;
  EXPECT_NE(refused(shared8).find("has 7"), std::string::npos) << refused(shared8);
}

TEST(MigTest, PlacedBestFitAndWholeGpusNeverOnMigGpus) {
  ClusterState s = MigCluster()
                       .Pending(MakeJob(1).Mig("1g.10gb", 2).Submit(1))
                       .Pending(MakeJob(2).Mig("3g.40gb").Submit(2))
                       .Pending(MakeJob(3).Gpus(8).Submit(3))
                       .Build();
  for (const std::string policy : {"hachi", "easy", "fifo"}) {
    const Plan plan = MakeScheduler(policy)->Schedule(s, 100);
    ASSERT_EQ(plan.starts.size(), 2u) << policy;  // 8 whole GPUs exist nowhere
    // Job 1: node 1 has exactly 2 (none left after), node 0 has 9.
    const Allocation& a = plan.starts[0].allocations[0];
    EXPECT_EQ(plan.starts[0].job, 1);
    EXPECT_EQ(a.node, 1) << policy;
    EXPECT_EQ(a.mig, (std::vector<std::string>{"MIG-n1-g0-0", "MIG-n1-g0-1"}));
    EXPECT_EQ(a.gpus, GpuSet::FromIndices({0}));
    const Allocation& b = plan.starts[1].allocations[0];
    EXPECT_EQ(b.node, 0);
    EXPECT_EQ(b.mig, std::vector<std::string>{"MIG-n0-g1-0"});
    EXPECT_EQ(b.gpus, GpuSet::FromIndices({1}));
    ASSERT_EQ(plan.pending.size(), 1u);
    EXPECT_EQ(plan.pending[0].job, 3);
  }
  // Whole-GPU jobs take the other GPUs: 6 on node 1 at most (GPU 0 is MIG).
  s.pending = {};
  testing::ClusterBuilder b = MigCluster();
  b.Pending(MakeJob(4).Gpus(7).Submit(1));
  const Plan plan = MakeScheduler("hachi")->Schedule(b.Build(), 100);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].allocations[0].node, 1);
  EXPECT_FALSE(plan.starts[0].allocations[0].gpus.contains(0));
}

TEST(MigTest, ApplierBooksReleasesAndRefusesDoubleBooking) {
  testing::ClusterBuilder b = MigCluster();
  b.Pending(MakeJob(1).Mig("1g.10gb").Submit(1))
      .Pending(MakeJob(2).Mig("1g.10gb").Submit(2));
  ClusterState s = b.Build();
  PlanApplier applier(&s);
  Allocation a;
  a.node = 1;
  a.gpus = GpuSet::FromIndices({0});
  a.mig = {"MIG-n1-g0-1"};
  a.cpus = 1;
  const Job j1 = s.pending[0];
  ASSERT_TRUE(applier.Apply(j1, {1, {a}, false}).ok());
  EXPECT_EQ(s.nodes[1].mig[1].job, 1);
  EXPECT_EQ(s.nodes[1].mig[0].job, 0);
  // The same device again, a device of another profile, wrong parents, a whole GPU
  // of a MIG GPU.
  Job j2 = s.pending[1];
  EXPECT_NE(applier.Check(j2, {2, {a}, false}).message().find("held by job 1"),
            std::string::npos);
  Allocation other = a;
  other.node = 0;
  other.gpus = GpuSet::FromIndices({1});
  other.mig = {"MIG-n0-g1-0"};
  EXPECT_NE(applier.Check(j2, {2, {other}, false}).message().find("is a 3g.40gb"),
            std::string::npos);
  Allocation parents = a;
  parents.mig = {"MIG-n1-g0-0"};
  parents.gpus = GpuSet::FromIndices({1});
  EXPECT_NE(applier.Check(j2, {2, {parents}, false}).message().find("are not those"),
            std::string::npos);
  Job whole = MakeJob(3).Gpus(1).job();
  whole.partition = 0;
  whole.req.partition = "gpu";
  Allocation g0;
  g0.node = 1;
  g0.gpus = GpuSet::FromIndices({0});
  EXPECT_FALSE(applier.Check(whole, {3, {g0}, false}).ok());
  // Release frees exactly the job's device; the GPU stays out of free_gpus.
  Job running = j1;
  running.allocations = {a};
  applier.Release(running);
  EXPECT_EQ(s.nodes[1].mig[1].job, 0);
  EXPECT_FALSE(s.nodes[1].free_gpus.contains(0));
  EXPECT_EQ(s.nodes[1].free_cpus, s.nodes[1].cpus);
  // Take (a running job from the records) books its device again.
  ASSERT_TRUE(applier.Take(running, a).ok());
  EXPECT_EQ(s.nodes[1].mig[1].job, 1);
}

TEST(MigTest, BusyDevicesGiveAReasonWithNumbers) {
  testing::ClusterBuilder b;
  b.Nodes(1, "hgx-h100").Mig(0, 0, {"1g.10gb", "1g.10gb"}).Partition("gpu-shared");
  ClusterState s = b.Build();
  PlanApplier applier(&s);
  // Both devices taken by running jobs.
  for (int k = 0; k < 2; ++k) {
    Job j = MakeJob(10 + k).Mig("1g.10gb").job();
    j.partition = 0;
    j.req.partition = "gpu-shared";
    j.req.time_limit = kHour;
    Allocation a;
    a.node = 0;
    a.gpus = GpuSet::FromIndices({0});
    a.mig = {s.nodes[0].mig[k].uuid};
    ASSERT_TRUE(applier.Take(j, a).ok());
    j.allocations = {a};
    s.running.push_back(j);
  }
  Job p = MakeJob(3).Mig("1g.10gb").Submit(1).job();
  Result<Job> v = ValidateRequest(s, p.req);
  ASSERT_TRUE(v.ok()) << v.status().message();
  p.req = v->req;
  p.partition = v->partition;
  s.pending.push_back(p);
  const Plan plan = MakeScheduler("hachi")->Schedule(s, 100);
  ASSERT_TRUE(plan.starts.empty());
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].reason, Reason::kMigBusy);
  EXPECT_EQ(plan.pending[0].Format(s, 100),
            "no free 1g.10gb MIG device: 0 of 2 free on the nodes of gpu-shared");
  EXPECT_TRUE(plan.reservations.empty());
  // hachi explain's node breakdown: the node has the profile, none free.
  const NodeBreakdown nodes = ExplainNodes(s, s.pending[0], 100);
  EXPECT_EQ(nodes.verdicts[static_cast<int>(NodeVerdict::kGpus)], 1);
  EXPECT_EQ(nodes.unsuitable, 0);
  // Once one ends, the job starts on its device.
  applier.Release(s.running[0]);
  s.running.erase(s.running.begin());
  const Plan next = MakeScheduler("hachi")->Schedule(s, 200);
  ASSERT_EQ(next.starts.size(), 1u);
  EXPECT_EQ(next.starts[0].allocations[0].mig, std::vector<std::string>{"MIG-n0-g0-0"});
}

}  // namespace
}  // namespace hachi::sched
