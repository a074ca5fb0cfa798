// The plan applier: one row per check (fits, and each kind of refusal), a gang all or
// nothing (the state untouched on any refusal), a release that restores the nodes
// exactly, and the server's Take of running jobs' allocations.
#include "sched/apply.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "sched/testing.h"

namespace hachi::sched {
namespace {

using testing::ClusterBuilder;
using testing::JobBuilder;
using testing::MakeCluster;
using testing::MakeJob;

// n0, n1: hgx-h100; n2: pcie-8x-l40s (another interconnect class and GPU model);
// "gpu" (shared, GPU shares allowed) over n0-n2; "whole" (whole-node) over n3.
ClusterBuilder Base() {
  ClusterBuilder b = MakeCluster().Nodes(2, "hgx-h100").Nodes(1, "pcie-8x-l40s");
  b.Partition("gpu").AllowSharing();
  b.Nodes(1, "hgx-h100").Partition("whole", PartitionMode::kWholeNode, {3});
  return b;
}

Allocation Part(int node, const std::string& gpus, int cpus = 0, int64_t memory_mib = 0,
                int share_milli = 0, int64_t gpu_memory_mib = 0) {
  Allocation a;
  a.node = node;
  a.gpus = *GpuSet::Parse(gpus);
  a.cpus = cpus;
  a.memory_mib = memory_mib;
  a.share_milli = share_milli;
  a.gpu_memory_mib = gpu_memory_mib;
  return a;
}

// The job as the scheduler sees it: resolved through the cluster (partition index,
// whole-node rounding), as ClusterBuilder::Pending does.
Job Resolved(ClusterBuilder& b, const JobBuilder& j) {
  b.Pending(j);
  Job job = b.state().pending.back();
  b.state().pending.pop_back();
  return job;
}

// Every field the applier books, per node (share use per GPU, not the vector's size).
void ExpectSameNodes(const ClusterState& want, const ClusterState& got) {
  ASSERT_EQ(want.nodes.size(), got.nodes.size());
  for (size_t i = 0; i < want.nodes.size(); ++i) {
    const Node& w = want.nodes[i];
    const Node& g = got.nodes[i];
    SCOPED_TRACE("node " + w.name);
    EXPECT_EQ(w.free_gpus, g.free_gpus);
    EXPECT_EQ(w.shared_gpus, g.shared_gpus);
    EXPECT_EQ(w.unhealthy, g.unhealthy);
    EXPECT_EQ(w.free_cpus, g.free_cpus);
    EXPECT_EQ(w.free_memory_mib, g.free_memory_mib);
    EXPECT_EQ(w.whole_node_jobs, g.whole_node_jobs);
    EXPECT_EQ(w.shared_jobs, g.shared_jobs);
    for (int gpu = 0; gpu < w.gpu_count(); ++gpu) {
      EXPECT_EQ(ShareUse(w, gpu).milli, ShareUse(g, gpu).milli) << "GPU " << gpu;
      EXPECT_EQ(ShareUse(w, gpu).memory_mib, ShareUse(g, gpu).memory_mib)
          << "GPU " << gpu;
    }
  }
}

struct Case {
  ClusterState state;
  Job job;
  Start start;
};

struct Row {
  const char* name;
  std::function<Case()> make;
  const char* error;  // a part of the Internal error's text; nullptr: the start fits
};

Case Make(ClusterBuilder b, const JobBuilder& j, std::vector<Allocation> parts) {
  Case c;
  c.job = Resolved(b, j);
  c.state = b.Build();
  c.start.job = c.job.id;
  c.start.allocations = std::move(parts);
  return c;
}

class PlanApplierTest : public ::testing::TestWithParam<Row> {};

TEST_P(PlanApplierTest, ChecksThenApplies) {
  Case c = GetParam().make();
  const ClusterState before = c.state;
  PlanApplier applier(&c.state);
  const Status checked = applier.Check(c.job, c.start);
  const Status s = applier.Apply(c.job, c.start);
  EXPECT_EQ(checked.ok(), s.ok());
  if (GetParam().error == nullptr) {
    ASSERT_TRUE(s.ok()) << s.ToString();
    // Booked: every part's GPUs left the free set, its CPUs and memory are taken.
    for (const Allocation& a : c.start.allocations) {
      const Node& n = c.state.nodes[a.node];
      EXPECT_TRUE((n.free_gpus & a.gpus).empty());
      EXPECT_EQ(n.free_cpus, before.nodes[a.node].free_cpus - a.cpus);
      EXPECT_EQ(n.free_memory_mib, before.nodes[a.node].free_memory_mib - a.memory_mib);
    }
    // Release restores exactly.
    c.job.allocations = c.start.allocations;
    applier.Release(c.job);
    ExpectSameNodes(before, c.state);
    return;
  }
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find(GetParam().error), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("job " + std::to_string(c.job.id)), std::string::npos)
      << s.message();
  ExpectSameNodes(before, c.state);  // all or nothing: untouched
}

INSTANTIATE_TEST_SUITE_P(
    Rows, PlanApplierTest,
    ::testing::Values(
        // ---- Fits ----
        Row{"whole_gpus",
            [] { return Make(Base(), MakeJob(1).Gpus(2).Cpus(8), {Part(0, "0,1", 8)}); },
            nullptr},
        Row{"share",
            [] {
              return Make(Base(), MakeJob(1).Share(250, 1024),
                          {Part(0, "3", 0, 0, 250, 1024)});
            },
            nullptr},
        Row{"share_beside_share",
            [] {
              ClusterBuilder b = Base();
              b.Running(MakeJob(9).Share(500), 0, "3");
              return Make(b, MakeJob(1).Share(500), {Part(0, "3", 0, 0, 500)});
            },
            nullptr},
        Row{"gang",
            [] {
              return Make(Base(), MakeJob(1).Gang(2, 8),
                          {Part(0, "0-7"), Part(1, "0-7")});
            },
            nullptr},
        Row{"whole_node",
            [] {
              return Make(Base(), MakeJob(1).Gpus(8).Partition("whole"),
                          {Part(3, "0-7")});
            },
            nullptr},
        Row{"gpu_model",
            [] { return Make(Base(), MakeJob(1).Gpus(1).Model("L40S"), {Part(2, "0")}); },
            nullptr},
        // ---- Refusals ----
        Row{"gang_short_of_parts",
            [] { return Make(Base(), MakeJob(1).Gang(2, 8), {Part(0, "0-7")}); },
            "1 nodes; it asks for 2"},
        Row{"node_index", [] { return Make(Base(), MakeJob(1).Gpus(1), {Part(7, "0")}); },
            "node index 7"},
        Row{"node_down",
            [] {
              return Make(Base().NodeState(0, NodeState::kDrained), MakeJob(1).Gpus(1),
                          {Part(0, "0")});
            },
            "not up"},
        Row{"other_partition",
            [] { return Make(Base(), MakeJob(1).Gpus(1), {Part(3, "0")}); },
            "not in the job's partition gpu"},
        Row{"gpu_model_mismatch",
            [] { return Make(Base(), MakeJob(1).Gpus(1).Model("L40S"), {Part(0, "0")}); },
            "do not suit"},
        Row{"gpu_memory_too_small",
            [] {
              return Make(Base(), MakeJob(1).Gpus(1).MinGpuMemoryMib(1 << 30),
                          {Part(0, "0")});
            },
            "do not suit"},
        Row{"gang_across_interconnects",
            [] {
              return Make(Base(), MakeJob(1).Gang(2, 8),
                          {Part(0, "0-7"), Part(2, "0-7")});
            },
            "interconnect"},
        Row{"gang_node_twice",
            [] {
              return Make(Base(), MakeJob(1).Gang(2, 4),
                          {Part(0, "0-3"), Part(0, "4-7")});
            },
            "two parts of the gang on one node"},
        Row{"gpu_count",
            [] { return Make(Base(), MakeJob(1).Gpus(2), {Part(0, "0-2")}); },
            "3 GPUs {0-2}; it asks for 2 per node"},
        Row{"whole_node_job_short_of_the_node",
            [] {
              return Make(Base(), MakeJob(1).Gpus(8).Partition("whole"),
                          {Part(3, "0-3")});
            },
            "a whole-node job takes every GPU of the node"},
        Row{"whole_node_job_after_a_config_change",  // pending since its partition
            [] {                                     // was shared: the node's GPUs
              ClusterBuilder b = Base();
              Case c = Make(b, MakeJob(1).Gpus(2).Partition("whole"), {Part(3, "0-7")});
              c.job.req.gpus = 2;  // as submitted, before the partition became whole
              return c;
            },
            nullptr},
        Row{"gpus_taken",
            [] {
              ClusterBuilder b = Base();
              b.Running(MakeJob(9).Gpus(2), 0, "0,1");
              return Make(b, MakeJob(1).Gpus(2), {Part(0, "1,2")});
            },
            "are not free"},
        Row{"gpu_unhealthy",
            [] {
              ClusterBuilder b = Base();
              b.state().nodes[0].unhealthy = *GpuSet::Parse("5");  // free mask lags
              return Make(b, MakeJob(1).Gpus(1), {Part(0, "5")});
            },
            "are not free"},
        Row{"gang_second_part_taken",  // all or nothing: n0 is not booked either
            [] {
              ClusterBuilder b = Base();
              b.Running(MakeJob(9).Gpus(1), 1, "7");
              return Make(b, MakeJob(1).Gang(2, 8), {Part(0, "0-7"), Part(1, "0-7")});
            },
            "node n1: GPUs {0-7} are not free"},
        Row{"share_milli_differs",
            [] { return Make(Base(), MakeJob(1).Share(250), {Part(0, "0", 0, 0, 500)}); },
            "a share of 500 milli, 0 MiB; it asks for 250, 0"},
        Row{"share_memory_differs",
            [] {
              return Make(Base(), MakeJob(1).Share(250, 1024), {Part(0, "0", 0, 0, 250)});
            },
            "it asks for 250, 1024"},
        Row{"share_on_two_gpus",
            [] {
              return Make(Base(), MakeJob(1).Share(250), {Part(0, "0,1", 0, 0, 250)});
            },
            "needs one GPU"},
        Row{"share_on_taken_gpu",
            [] {
              ClusterBuilder b = Base();
              b.Running(MakeJob(9).Gpus(1), 0, "0");
              return Make(b, MakeJob(1).Share(250), {Part(0, "0", 0, 0, 250)});
            },
            "neither free nor shared"},
        Row{"share_overcommits_milli",
            [] {
              ClusterBuilder b = Base();
              b.Running(MakeJob(9).Share(800), 0, "0");
              return Make(b, MakeJob(1).Share(250), {Part(0, "0", 0, 0, 250)});
            },
            "overcommits GPU 0"},
        Row{"share_beside_another_users_share",
            [] {
              ClusterBuilder b = Base();
              b.Running(MakeJob(9).Share(250).User("alice"), 0, "0");
              return Make(b, MakeJob(1).Share(250).User("bob"),
                          {Part(0, "0", 0, 0, 250)});
            },
            "GPU 0 holds shares of user alice; a share of user bob cannot join them (an "
            "MPS "
            "server serves one user per GPU)"},
        Row{"share_overcommits_memory",
            [] {
              ClusterBuilder b = Base();
              const int64_t mib = b.state().nodes[0].gpu_memory_mib;
              b.Running(MakeJob(9).Share(100, mib - 10), 0, "0");
              return Make(b, MakeJob(1).Share(100, 20), {Part(0, "0", 0, 0, 100, 20)});
            },
            "overcommits GPU 0"},
        Row{"cpus_short",
            [] {
              return Make(Base(), MakeJob(1).Gpus(1).Cpus(129), {Part(0, "0", 129)});
            },
            "129 CPUs, 128 free"},
        Row{"memory_short",
            [] {
              return Make(Base(), MakeJob(1).Gpus(1).MemoryMib((1 << 20) + 1),
                          {Part(0, "0", 0, (1 << 20) + 1)});
            },
            "MiB of memory"},
        Row{"whole_node_job_beside_shared_job",
            [] {
              ClusterBuilder b = Base();
              b.Running(MakeJob(9).Share(100), 0, "0");  // n0 runs a shared job
              // An exclusive job whose GPUs are all free but for the shared one.
              Case c = Make(b, MakeJob(1).Gpus(8).Exclusive(), {Part(0, "0-7")});
              return c;
            },
            "a whole-node job on a node that runs shared jobs"},
        Row{"shared_job_beside_whole_node_job",
            [] {
              ClusterBuilder b = Base();
              b.Running(MakeJob(9).Gpus(8).Exclusive(), 1, "0-7");
              return Make(b, MakeJob(1).Gpus(0).Cpus(1), {Part(1, "", 1)});
            },
            "a shared job on a node that runs a whole-node job"},
        Row{"another_jobs_start",
            [] {
              Case c = Make(Base(), MakeJob(1).Gpus(1), {Part(0, "0")});
              c.start.job = 2;
              return c;
            },
            "plan starts job 2 with the request of job 1"}),
    [](const auto& row) { return std::string(row.param.name); });

// Starts booked one after another see each other: the second of two equal 5-GPU
// starts on an 8-GPU node is refused, and a gang's parts are all booked.
TEST(PlanApplier, StartsSeeEarlierStarts) {
  ClusterBuilder b = Base();
  const Job one = Resolved(b, MakeJob(1).Gpus(5));
  const Job two = Resolved(b, MakeJob(2).Gpus(5));
  ClusterState state = b.Build();
  PlanApplier applier(&state);
  ASSERT_TRUE(applier.Apply(one, Start{1, {Part(0, "0-4")}, false}).ok());
  const Status s = applier.Apply(two, Start{2, {Part(0, "3-7")}, false});
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(state.nodes[0].free_gpus, *GpuSet::Parse("5-7"));
  EXPECT_EQ(state.nodes[0].shared_jobs, 1);
}

// The server's snapshot books running jobs' allocations as recorded: a drained node
// or a start outside today's partitions does not undo them; a double booking does.
TEST(PlanApplier, TakeChecksOnlyCapacity) {
  ClusterBuilder b = Base().NodeState(0, NodeState::kDrained);
  const Job running = Resolved(b, MakeJob(1).Gpus(2).Cpus(4));
  ClusterState state = b.Build();
  PlanApplier applier(&state);
  ASSERT_TRUE(applier.Take(running, Part(0, "0,1", 4)).ok());
  ASSERT_TRUE(applier.Take(running, Part(3, "0,1", 4)).ok());  // partition "whole"
  EXPECT_EQ(state.nodes[0].free_gpus, *GpuSet::Parse("2-7"));
  EXPECT_EQ(state.nodes[0].free_cpus, 124);
  EXPECT_EQ(state.nodes[0].shared_jobs, 1);
  const ClusterState after = state;
  const Status twice = applier.Take(running, Part(0, "1,2"));
  EXPECT_EQ(twice.code(), StatusCode::kInternal);
  EXPECT_NE(twice.message().find("{1,2} are not free"), std::string::npos)
      << twice.message();
  const Status nowhere = applier.Take(running, Part(-1, "0"));
  EXPECT_NE(nowhere.message().find("node index -1"), std::string::npos);
  ExpectSameNodes(after, state);
}

// A running job keeps a GPU that left service until it ends (the server is stopping it):
// the snapshot books it, nothing else gets it, and its end does not make it free.
TEST(PlanApplier, TakeKeepsAGpuThatLeftServiceWithItsJob) {
  ClusterBuilder b = Base();
  const Job running = Resolved(b, MakeJob(1).Gpus(2));
  ClusterState state = b.Build();
  Node& n = state.nodes[0];
  n.unhealthy = *GpuSet::Parse("0");
  n.free_gpus = n.free_gpus - n.unhealthy;
  PlanApplier applier(&state);
  ASSERT_TRUE(applier.Take(running, Part(0, "0,1")).ok());
  EXPECT_EQ(n.free_gpus, *GpuSet::Parse("2-7"));
  // A start that wants the unhealthy GPU is still refused.
  const Job other = Resolved(b, MakeJob(2).Gpus(1));
  EXPECT_EQ(applier.Apply(other, Start{2, {Part(0, "0")}, false}).code(),
            StatusCode::kInternal);
  Job ended = running;
  ended.allocations = {Part(0, "0,1")};
  applier.Release(ended);
  EXPECT_EQ(n.free_gpus, *GpuSet::Parse("1-7")) << "GPU 0 stays out of service";
}

// GPU shares, one user per GPU (gpu_share.h): a start beside another user's share is
// refused, but the snapshot books running shares of two users as recorded (from before
// the rule) and the GPU then takes nobody's new share; Release of the last share of a
// user makes the GPU anyone's.
TEST(PlanApplier, SharesOfOneUserPerGpu) {
  ClusterBuilder b = Base();
  const Job alice = Resolved(b, MakeJob(1).Share(250).User("alice"));
  const Job bob = Resolved(b, MakeJob(2).Share(250).User("bob"));
  const Job alice2 = Resolved(b, MakeJob(3).Share(250).User("alice"));
  ClusterState state = b.Build();
  PlanApplier applier(&state);
  ASSERT_TRUE(applier.Apply(alice, Start{1, {Part(0, "0", 0, 0, 250)}, false}).ok());
  EXPECT_EQ(applier.Apply(bob, Start{2, {Part(0, "0", 0, 0, 250)}, false}).code(),
            StatusCode::kInternal);
  ASSERT_TRUE(applier.Take(bob, Part(0, "0", 0, 0, 250)).ok());  // a recorded fact
  EXPECT_TRUE(ShareUse(state.nodes[0], 0).mixed);
  EXPECT_FALSE(applier.Apply(alice2, Start{3, {Part(0, "0", 0, 0, 250)}, false}).ok());
  Job ended = alice;
  ended.allocations = {Part(0, "0", 0, 0, 250)};
  applier.Release(ended);
  ended = bob;
  ended.allocations = {Part(0, "0", 0, 0, 250)};
  applier.Release(ended);
  EXPECT_EQ(ShareUse(state.nodes[0], 0).user, "");
  EXPECT_TRUE(applier.Apply(bob, Start{2, {Part(0, "0", 0, 0, 250)}, false}).ok());
}

}  // namespace
}  // namespace hachi::sched
