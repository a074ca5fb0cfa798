// Jobs without GPUs: refused where the partition does not take them,
// placed on CPUs and memory only, never next to a whole-node job (isolation), and
// never holding a GPU.
#include <gtest/gtest.h>

#include "sched/eligibility.h"
#include "sched/scheduler.h"
#include "sched/testing.h"

namespace hachi::sched {
namespace {

using testing::MakeCluster;
using testing::MakeJob;

Plan RunCycle(const ClusterState& s, const std::string& policy = "hachi",
              Time now = 1000) {
  SchedConfig c;
  c.policy = policy;
  auto sched = Scheduler::Create(c);
  EXPECT_TRUE(sched.ok()) << sched.status().ToString();
  return (*sched)->Schedule(s, now);
}

TEST(CpuJobsTest, RefusedWhereThePartitionTakesNone) {
  const ClusterState s = MakeCluster().Nodes(1, "hgx-h100").Partition("gpu").Build();
  JobRequest r;
  r.cpus = 4;
  Result<Job> v = ValidateRequest(s, r);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kUnsatisfiable);
  EXPECT_NE(v.status().message().find("partition gpu"), std::string::npos)
      << v.status().message();
  EXPECT_NE(v.status().message().find("allow_cpu_jobs"), std::string::npos)
      << v.status().message();
}

TEST(CpuJobsTest, AcceptedWithAllowCpuJobsOrMinGpusZero) {
  for (int variant = 0; variant < 2; ++variant) {
    auto b = MakeCluster().Nodes(1, "hgx-h100").Partition("cpu");
    if (variant == 0) {
      b.AllowCpuJobs();
    } else {
      b.MinGpus(0);
    }
    const ClusterState s = b.Build();
    JobRequest r;  // nothing asked: 1 CPU
    Result<Job> v = ValidateRequest(s, r);
    ASSERT_TRUE(v.ok()) << variant << ": " << v.status().ToString();
    EXPECT_EQ(v->req.TotalGpus(), 0);
    EXPECT_EQ(v->req.cpus, 1);
    EXPECT_FALSE(IsWholeNode(s, *v));
  }
}

TEST(CpuJobsTest, DefaultMemoryIsOneGpusWorth) {
  const ClusterState s =
      MakeCluster().Nodes(1, "hgx-h100").Partition("cpu").AllowCpuJobs().Build();
  JobRequest r;
  r.cpus = 2;
  Result<Job> v = ValidateRequest(s, r);
  ASSERT_TRUE(v.ok());
  ApplyDefaultMemory(s, &*v);
  EXPECT_EQ(v->req.memory_mib, s.nodes[0].memory_mib / 8);
  EXPECT_EQ(v->req.memory_mib_per_gpu, 0);
}

TEST(CpuJobsTest, StartsOnCpusOnlyWhenEveryGpuIsBusy) {
  // All 8 GPUs of n0 are taken by a shared job: a CPU job still fits there.
  const ClusterState s = MakeCluster()
                             .Nodes(1, "hgx-h100")
                             .Partition("p")
                             .AllowCpuJobs()
                             .Running(MakeJob(9).Gpus(8).Cpus(8).Start(0), 0)
                             .Pending(MakeJob(1).Cpus(16).MemoryMib(1024))
                             .Build();
  for (const char* policy : {"hachi", "easy", "fifo"}) {
    const Plan plan = RunCycle(s, policy);
    ASSERT_EQ(plan.starts.size(), 1u) << policy;
    const Allocation& a = plan.starts[0].allocations.at(0);
    EXPECT_EQ(a.node, 0);
    EXPECT_TRUE(a.gpus.empty()) << policy << ": " << a.gpus.ToString();
    EXPECT_EQ(a.cpus, 16);
    EXPECT_EQ(a.memory_mib, 1024);
  }
}

TEST(CpuJobsTest, NeverBesideAWholeNodeJob) {
  // n0 runs a whole-node job (exclusive), n1 is idle: the CPU job goes to n1 even
  // though n0 has CPUs free; with n1 busy too, it waits with reason Isolation.
  auto b = MakeCluster()
               .Nodes(2, "hgx-h100")
               .Partition("p")
               .AllowCpuJobs()
               .Running(MakeJob(9).Gpus(8).Exclusive().Cpus(8).Start(0), 0)
               .Pending(MakeJob(1).Cpus(4));
  Plan plan = RunCycle(b.Build());
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_EQ(plan.starts[0].allocations[0].node, 1);

  b.Running(MakeJob(8).Gpus(8).Exclusive().Cpus(8).Start(0), 1);
  plan = RunCycle(b.Build());
  EXPECT_TRUE(plan.starts.empty());
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].reason, Reason::kIsolation);
}

TEST(CpuJobsTest, AWholeNodeJobWaitsForTheCpuJob) {
  const ClusterState s = MakeCluster()
                             .Nodes(1, "hgx-h100")
                             .Partition("p")
                             .AllowCpuJobs()
                             .Running(MakeJob(9).Cpus(2).Start(0).Limit(kHour), 0)
                             .Pending(MakeJob(1).Gpus(8).Exclusive())
                             .Build();
  const Plan plan = RunCycle(s);
  EXPECT_TRUE(plan.starts.empty());
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].reason, Reason::kIsolation);
  // Its reservation starts when the CPU job leaves.
  ASSERT_EQ(plan.reservations.size(), 1u);
  EXPECT_EQ(plan.reservations[0].start, kHour);
}

TEST(CpuJobsTest, InAWholeNodePartitionTheyStayCpuOnly) {
  const ClusterState s = MakeCluster()
                             .Nodes(2, "hgx-h100")
                             .Partition("gpu8", PartitionMode::kWholeNode)
                             .AllowCpuJobs()
                             .Pending(MakeJob(1).Cpus(4))
                             .Build();
  EXPECT_EQ(s.pending[0].req.TotalGpus(), 0);  // not rounded up to a whole node
  const Plan plan = RunCycle(s);
  ASSERT_EQ(plan.starts.size(), 1u);
  EXPECT_TRUE(plan.starts[0].allocations[0].gpus.empty());
}

TEST(CpuJobsTest, WaitsForCpusWithTheirReason) {
  const ClusterState s = MakeCluster()
                             .Nodes(1, "hgx-h100")
                             .Partition("p")
                             .AllowCpuJobs()
                             .Running(MakeJob(9).Cpus(120).Start(0), 0)
                             .Pending(MakeJob(1).Cpus(16).MemoryMib(512))
                             .Build();
  const Plan plan = RunCycle(s);
  EXPECT_TRUE(plan.starts.empty());
  ASSERT_EQ(plan.pending.size(), 1u);
  EXPECT_EQ(plan.pending[0].reason, Reason::kResources);
  EXPECT_EQ(plan.pending[0].Format(s, 1000),
            "needs 16 CPUs and 512 MiB of memory, no GPU, on one node; no node has that "
            "much free; earliest start 04:00 on n0 when job 9 hits its time limit");
}

TEST(CpuJobsTest, AGangWithoutGpus) {
  const ClusterState s = MakeCluster()
                             .Nodes(3, "hgx-h100")
                             .Partition("p")
                             .AllowCpuJobs()
                             .Pending(MakeJob(1).Gang(2, 0).Cpus(8))
                             .Build();
  ASSERT_EQ(s.pending[0].req.nodes, 2);
  const Plan plan = RunCycle(s);
  ASSERT_EQ(plan.starts.size(), 1u);
  ASSERT_EQ(plan.starts[0].allocations.size(), 2u);
  for (const Allocation& a : plan.starts[0].allocations) EXPECT_TRUE(a.gpus.empty());
}

}  // namespace
}  // namespace hachi::sched
