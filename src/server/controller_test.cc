#include "server/controller.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "server/testing.h"
#include "topo/topology_testing.h"

namespace hachi::server {
namespace {

using api::ExitKind;
using sched::DependencyKind;
using state::JobState;
using testing::Harness;
using testing::kAlice;
using testing::kRoot;
using testing::MakeAgent;
using testing::MakeSubmit;

bool Has(const std::vector<state::JobId>& v, state::JobId id) {
  return std::find(v.begin(), v.end(), id) != v.end();
}

// ---- One job's life ----

TEST(Controller, SubmitCycleLaunchComplete) {
  Harness h;
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit().Gpus(4).Time(120));
  ASSERT_NE(id, 0);
  EXPECT_EQ(h.StateOf(id), JobState::kPending);
  h->RunCycle();
  const state::JobRecord job = h.Job(id);
  ASSERT_EQ(job.state, JobState::kRunning);
  ASSERT_EQ(job.allocations.size(), 1u);
  EXPECT_EQ(job.allocations[0].node, "n1");
  EXPECT_EQ(job.allocations[0].gpus.size(), 4);

  const AgentWork work = h.Work("n1");
  ASSERT_EQ(work.launch.size(), 1u);
  const api::LaunchSpec& l = work.launch[0];
  EXPECT_EQ(l.job, id);
  EXPECT_EQ(l.node, "n1");
  EXPECT_EQ(l.gpus, job.allocations[0].gpus);
  EXPECT_EQ(l.cpus, job.allocations[0].cpus);
  EXPECT_EQ(l.nodelist, std::vector<std::string>{"n1"});
  EXPECT_EQ(l.node_addresses, std::vector<std::string>{MakeAgent("n1").address});
  EXPECT_EQ(l.node_rank, 0);
  // The lowest port of n1's range: no other job runs there.
  EXPECT_EQ(l.master_port, 29500);
  EXPECT_EQ(job.master_port, 29500) << "kept with the start";
  EXPECT_EQ(l.gpus_per_node, 4);
  EXPECT_EQ(l.time_limit, 120);
  EXPECT_EQ(l.kill_grace, ControllerOptions{}.kill_grace);
  EXPECT_EQ(l.start_time, job.start_time);
  EXPECT_EQ(l.user, "alice");
  EXPECT_EQ(l.spec.uid, 1000u);
  EXPECT_EQ(l.spec.argv(), std::vector<std::string>{"/bin/true"});
  EXPECT_TRUE(h.Work("n1").launch.empty()) << "a launch is delivered once";

  h.Exit("n1", id, 0);
  const state::JobRecord done = h.Job(id);
  EXPECT_EQ(done.state, JobState::kCompleted);
  EXPECT_EQ(done.exit_code, 0);
  EXPECT_TRUE(done.reason.empty()) << done.reason;
}

struct EndCase {
  const char* name;
  ExitKind kind;
  int code;
  JobState state;
  const char* reason;
};

class JobEndTest : public ::testing::TestWithParam<EndCase> {};

TEST_P(JobEndTest, ExitReportEndsTheJob) {
  const EndCase& c = GetParam();
  Harness h;
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit().Gpus(2).Time(60));
  h->RunCycle();
  ASSERT_EQ(h.Work("n1").launch.size(), 1u);
  h.Exit("n1", id, c.code, c.kind);
  const state::JobRecord job = h.Job(id);
  EXPECT_EQ(job.state, c.state);
  EXPECT_NE(job.reason.find(c.reason), std::string::npos) << job.reason;
  // The GPUs are free again: an 8-GPU job starts.
  const state::JobId next = h.Submit(MakeSubmit().Gpus(8));
  h->RunCycle();
  EXPECT_EQ(h.StateOf(next), JobState::kRunning);
}

INSTANTIATE_TEST_SUITE_P(
    All, JobEndTest,
    ::testing::Values(
        EndCase{"ExitZero", ExitKind::kExited, 0, JobState::kCompleted, ""},
        EndCase{"ExitThree", ExitKind::kExited, 3, JobState::kFailed, "exit code 3"},
        EndCase{"TimeLimit", ExitKind::kTimeLimit, 0, JobState::kTimeout,
                "time limit 1m"},
        EndCase{"Signaled", ExitKind::kSignaled, 0, JobState::kFailed, "signal"},
        EndCase{"OutOfMemory", ExitKind::kOutOfMemory, 0, JobState::kOutOfMemory,
                "out of memory"},
        EndCase{"LaunchFailed", ExitKind::kLaunchFailed, 0, JobState::kFailed,
                "launch failed"}),
    [](const ::testing::TestParamInfo<EndCase>& p) { return p.param.name; });

TEST(Controller, CancelPendingEndsAtOnce) {
  Harness h;  // no node: the job stays pending
  Result<std::vector<state::JobId>> ids = h->jobs().Submit(MakeSubmit(), kAlice);
  ASSERT_FALSE(ids.ok()) << "no node at all: unsatisfiable";
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit().Hold());
  ASSERT_TRUE(h->jobs().Cancel(id, kAlice).ok());
  const state::JobRecord job = h.Job(id);
  EXPECT_EQ(job.state, JobState::kCancelled);
  EXPECT_NE(job.reason.find("alice"), std::string::npos) << job.reason;
  EXPECT_EQ(h->jobs().Cancel(id, kAlice).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(h->jobs().Cancel(999, kAlice).code(), StatusCode::kNotFound);
}

// sbatch --test-only takes exactly Submit's checks (one CheckSubmit / ValidateJobLocked
// for both): before they were shared, a singleton dependency was refused there as "job
// 0, which does not exist" and a user's negative --nice passed.
TEST(Controller, TestSubmitChecksWhatSubmitChecks) {
  Harness h;
  h.Register("n1");
  SubmitRequest singleton =
      MakeSubmit().Gpus(1).After(sched::DependencyKind::kSingleton, 0);
  Result<JobService::TestSubmitAnswer> t = h->jobs().TestSubmit(singleton, kAlice);
  EXPECT_TRUE(t.ok()) << t.status().message();
  EXPECT_TRUE(h->jobs().Submit(singleton, kAlice).ok());
  SubmitRequest nice = MakeSubmit().Gpus(1);
  nice.req.nice = -5;
  const Status submit = h->jobs().Submit(nice, kAlice).status();
  EXPECT_EQ(submit.code(), StatusCode::kPermissionDenied) << submit.message();
  t = h->jobs().TestSubmit(nice, kAlice);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), submit.code());
  EXPECT_EQ(t.status().message(), submit.message());
  EXPECT_TRUE(h->jobs().TestSubmit(nice, kRoot).ok());
}

TEST(Controller, CancelRunningWaitsForTheAgent) {
  Harness h;
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit().Gpus(1));
  h->RunCycle();
  ASSERT_EQ(h.Work("n1").launch.size(), 1u);
  ASSERT_TRUE(h->jobs().Cancel(id, kAlice).ok());
  EXPECT_EQ(h.StateOf(id), JobState::kRunning);
  EXPECT_EQ(h.Work("n1").CancelledJobs(), std::vector<state::JobId>{id});
  EXPECT_TRUE(h->jobs().Cancel(id, kAlice).ok()) << "a second cancel is a no-op";
  h.Exit("n1", id, 0, ExitKind::kCancelled);
  const state::JobRecord job = h.Job(id);
  EXPECT_EQ(job.state, JobState::kCancelled);
  EXPECT_NE(job.reason.find("cancelled by alice"), std::string::npos) << job.reason;
}

// Without --mem a job had no memory limit. Now it is given the partition's
// default per GPU (here the built-in one: the node's 1 TiB over its 8 GPUs), kept in its
// record, and the launch carries it to the agent's cgroup.
TEST(Controller, JobWithoutMemoryGetsTheDefaultAndTheLaunchCarriesIt) {
  Harness h;
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit().Gpus(2));
  EXPECT_EQ(h.Job(id).req.memory_mib_per_gpu, (1 << 20) / 8);
  h->RunCycle();
  const AgentWork w = h.Work("n1");
  ASSERT_EQ(w.launch.size(), 1u);
  EXPECT_EQ(w.launch[0].memory_mib, 2 * (1 << 20) / 8);
}

TEST(Controller, CancelBeforeDeliveryDropsTheLaunch) {
  Harness h;
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit().Gpus(1));
  h->RunCycle();
  ASSERT_TRUE(h->jobs().Cancel(id, kAlice).ok());
  EXPECT_EQ(h.StateOf(id), JobState::kCancelled);
  const AgentWork w = h.Work("n1");
  EXPECT_TRUE(w.launch.empty());
  EXPECT_TRUE(w.cancel.empty());
}

TEST(Controller, HoldAndRelease) {
  Harness h;
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit().Hold());
  EXPECT_TRUE(h.Job(id).held);
  h->RunCycle();
  EXPECT_EQ(h.StateOf(id), JobState::kPending);
  EXPECT_TRUE(h.Work("n1").launch.empty());
  // Held jobs stay out of the scheduler's snapshot; their reason comes from the record.
  const std::optional<PendingInfo> why = h->job_views().Pending(id);
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(why->reason, sched::ReasonName(sched::Reason::kHeld));
  EXPECT_EQ(why->diagnosis, "held");
  ASSERT_TRUE(h->jobs().Hold(id, false, kAlice).ok());
  h->RunCycle();
  EXPECT_EQ(h.StateOf(id), JobState::kRunning);
  EXPECT_EQ(h->jobs().Hold(id, true, kAlice).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(h->jobs().Hold(77, true, kAlice).code(), StatusCode::kNotFound);

  const state::JobId other = h.Submit(MakeSubmit());
  ASSERT_TRUE(h->jobs().Hold(other, true, kAlice).ok());
  h->RunCycle();
  EXPECT_EQ(h.StateOf(other), JobState::kPending);
}

// As Slurm: an administrator's hold (JobHeldAdmin) is released only by an administrator;
// a user's own hold, sbatch -H or an administrator's uhold (JobHeldUser), by its user.
// An administrator's hold on a job its user held makes it theirs; the reverse does not.
TEST(Controller, AnAdministratorsHoldIsReleasedOnlyByAnAdministrator) {
  topo::TempDir dir;
  const std::string db = dir.path() + "/hachi.db";
  state::JobId id = 0;
  {
    Result<std::unique_ptr<state::Store>> store = state::OpenSqliteStore(db);
    ASSERT_TRUE(store.ok());
    Harness h({}, std::move(*store));
    h.Register("n1");
    id = h.Submit(MakeSubmit().Hold());  // alice's own hold
    EXPECT_FALSE(h.Job(id).held_by_admin);
    ASSERT_TRUE(h->jobs().Hold(id, true, kRoot).ok());
    EXPECT_TRUE(h.Job(id).held_by_admin);
    ASSERT_TRUE(h->jobs().Hold(id, true, kAlice).ok());  // it stays root's
    EXPECT_TRUE(h.Job(id).held_by_admin);
    Status s = h->jobs().Hold(id, false, kAlice);
    EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(s.message(), "job " + std::to_string(id) +
                               " was held by an administrator; only an administrator "
                               "can release it");
    EXPECT_TRUE(h.Job(id).held);
    ASSERT_TRUE(h->jobs().Hold(id, false, kRoot).ok());
    EXPECT_FALSE(h.Job(id).held);
    EXPECT_FALSE(h.Job(id).held_by_admin);
    // uhold: the administrator places a hold the user may lift.
    ASSERT_TRUE(h->jobs().Hold(id, true, kRoot, -1, /*user_hold=*/true).ok());
    EXPECT_TRUE(h.Job(id).held);
    EXPECT_FALSE(h.Job(id).held_by_admin);
    ASSERT_TRUE(h->jobs().Hold(id, false, kAlice).ok());
    EXPECT_FALSE(h.Job(id).held);
    // An administrator's uhold of their own hold hands it to the user.
    ASSERT_TRUE(h->jobs().Hold(id, true, kRoot).ok());
    ASSERT_TRUE(h->jobs().Hold(id, true, kRoot, -1, /*user_hold=*/true).ok());
    EXPECT_FALSE(h.Job(id).held_by_admin);
    ASSERT_TRUE(h->jobs().Hold(id, true, kRoot).ok());
  }
  // A restart (or a standby's takeover) reads the hold's kind from the record.
  Result<std::unique_ptr<state::Store>> store = state::OpenSqliteStore(db);
  ASSERT_TRUE(store.ok());
  Harness h({}, std::move(*store));
  EXPECT_TRUE(h.Job(id).held_by_admin);
  EXPECT_EQ(h->jobs().Hold(id, false, kAlice).code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(h->jobs().Hold(id, false, kRoot).ok());
}

// A burst pool's node that registered takes jobs, and the report by pool prices them.
TEST(Controller, WhatRanOnABurstPoolIsPricedByPool) {
  FakeClock clock;
  Harness h(testing::WithConfig(
      "[[pool]]\nname = \"burst-a\"\nnodes = \"n[1-2]\"\nkind = \"burst\"\n"
      "resume_program = \"/bin/true\"\nsuspend_program = \"/bin/true\"\n"
      "price_per_gpu_hour = 3.5\n",
      &clock));
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit().Gpus(1));
  h->RunCycle();
  EXPECT_EQ(h.StateOf(id), JobState::kRunning);
  const Time start = clock.Now();
  clock.Advance(std::chrono::hours(1));
  h.Work("n1");
  h.Exit("n1", id, 0);
  report::ReportQuery q;
  q.from = start - 10;
  q.to = clock.Now() + 10;
  q.by = report::ReportBy::kPool;
  const report::GpuReport r = h->cluster_views().GpuHours(q);
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.groups[0].name, "burst-a");
  EXPECT_DOUBLE_EQ(r.groups[0].gpu_hours, 1);
  EXPECT_DOUBLE_EQ(r.groups[0].cost, 3.5);
}

// Placement by price: with both registered, a job goes to the fixed pool's node, not to
// the burst pool's (node order alone would pick the burst one).
TEST(Controller, JobsGoToTheFixedPoolsNodesFirst) {
  Harness h(testing::WithConfig(
      "[[pool]]\nname = \"burst\"\nnodes = [\"a1\", \"a9\"]\nkind = \"burst\"\n"
      "resume_program = \"/bin/true\"\nsuspend_program = \"/bin/true\"\n"
      "[[pool]]\nname = \"owned\"\nnodes = \"b1\"\n"));
  h.Register("a1");
  h.Register("b1");
  const state::JobId id = h.Submit(MakeSubmit().Gpus(1));
  h->RunCycle();
  ASSERT_EQ(h.StateOf(id), JobState::kRunning);
  EXPECT_EQ(h.Job(id).allocations[0].node, "b1");
  const std::vector<std::string> w = h->cluster_views().Warnings();
  EXPECT_TRUE(std::none_of(w.begin(), w.end(), [](const std::string& s) {
    return s.find("a9") != std::string::npos;  // off, not missing
  }));
}

// Only the owner or an admin cancels, holds or releases a job, by the uid the kernel or a
// token vouched for; an anonymous caller changes nothing.
TEST(Controller, OnlyTheOwnerOrAnAdminChangesAJob) {
  Harness h;
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit().Gpus(1).Hold());  // alice, uid 1000
  const Caller anonymous{"alice", 1000, 1000, false, false};
  EXPECT_EQ(h->jobs().Cancel(id, anonymous).code(), StatusCode::kUnauthenticated);
  const Caller bob{"bob", 1001, 1001, true, false};
  Status s = h->jobs().Cancel(id, bob);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(),
            "job " + std::to_string(id) + " belongs to alice; bob may not cancel it");
  EXPECT_EQ(h->jobs().Hold(id, false, bob).code(), StatusCode::kPermissionDenied);
  // A caller the kernel vouched for is its uid, whatever name it gives.
  const Caller alice_by_uid{"whoever", 1000, 1000, true, false};
  const Caller bob_claiming_alice{"alice", 1001, 1001, true, false};
  EXPECT_EQ(h->jobs().Hold(id, false, bob_claiming_alice).code(),
            StatusCode::kPermissionDenied);
  EXPECT_TRUE(h->jobs().Hold(id, false, alice_by_uid).ok());
  const Caller root{"root", 0, 0, true, true};
  EXPECT_TRUE(h->jobs().Cancel(id, root).ok());
  EXPECT_EQ(h.StateOf(id), JobState::kCancelled);
  EXPECT_EQ(h.Job(id).reason, "cancelled by root");
}

// ---- GPU health ----

state::NodeRecord NodeOf(Harness& h, const std::string& name) {
  for (const state::NodeStatus& n : h->cluster_views().Nodes()) {
    if (n.record.name == name) return n.record;
  }
  ADD_FAILURE() << "no node " << name;
  return {};
}

api::AgentHealth Event(int gpu, const std::string& fault, int xid,
                       const std::string& msg) {
  api::AgentHealth h;
  h.events.push_back(api::GpuHealthEvent{gpu, "xid", xid, fault, msg, 1700000000});
  return h;
}

TEST(Controller, FatalGpuEventTakesThatGpuOutAndRequeuesItsJob) {
  Harness h;
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit().Gpus(4).Time(600));
  h->RunCycle();
  const state::JobRecord job = h.Job(id);
  ASSERT_EQ(job.state, JobState::kRunning);
  const int bad = job.allocations[0].gpus.First();
  h.Work("n1");  // the launch

  // The application's own fault changes nothing.
  ASSERT_TRUE(
      h->nodes()
          .ReportHealth("n1", Event(bad, "job", 13, "Xid 13: graphics engine exception"))
          .ok());
  EXPECT_EQ(h.StateOf(id), JobState::kRunning);
  EXPECT_TRUE(NodeOf(h, "n1").unhealthy.empty());

  ASSERT_TRUE(h->nodes()
                  .ReportHealth(
                      "n1", Event(bad, "fatal", 79, "Xid 79: GPU has fallen off the bus"))
                  .ok());
  const state::NodeRecord node = NodeOf(h, "n1");
  EXPECT_EQ(node.unhealthy, GpuSet::FromIndices({bad}));
  ASSERT_EQ(node.unhealthy_reasons.count(bad), 1u);
  EXPECT_NE(node.unhealthy_reasons.at(bad).find("Xid 79"), std::string::npos);
  EXPECT_EQ(node.state, state::NodeState::kUp) << "one GPU, not the node";
  const AgentWork work = h.Work("n1");
  EXPECT_EQ(work.CancelledJobs(), std::vector<state::JobId>{id})
      << "its processes are stopped";
  // Until they are, the job keeps its GPUs: nothing else is given them, and it is not
  // started again (it would run twice).
  const state::JobId other = h.Submit(MakeSubmit().Gpus(7).Time(600));
  h->RunCycle();
  EXPECT_EQ(h.StateOf(id), JobState::kRunning);
  EXPECT_EQ(h.Job(id).allocations[0].gpus, job.allocations[0].gpus);
  EXPECT_EQ(h.StateOf(other), JobState::kPending) << "7 of 8 GPUs: the job's are held";
  ASSERT_TRUE(h->jobs().Cancel(other, kRoot).ok());
  // A repeated event while it stops changes nothing.
  ASSERT_TRUE(h->nodes()
                  .ReportHealth(
                      "n1", Event(bad, "fatal", 79, "Xid 79: GPU has fallen off the bus"))
                  .ok());
  EXPECT_TRUE(h.Work("n1").cancel.empty());
  h.Exit("n1", id, 143);  // stopped: now it is requeued
  const state::JobRecord requeued = h.Job(id);
  EXPECT_EQ(requeued.state, JobState::kPending);
  EXPECT_EQ(requeued.requeues, 1);
  EXPECT_EQ(requeued.reason, "GPU " + std::to_string(bad) +
                                 " of node n1: Xid 79: GPU has fallen off the bus");

  // The same event again changes nothing more; the job runs again, never on that GPU.
  ASSERT_TRUE(h->nodes()
                  .ReportHealth(
                      "n1", Event(bad, "fatal", 79, "Xid 79: GPU has fallen off the bus"))
                  .ok());
  EXPECT_EQ(h.Job(id).requeues, 1);
  h->RunCycle();
  const state::JobRecord again = h.Job(id);
  ASSERT_EQ(again.state, JobState::kRunning);
  EXPECT_FALSE(again.allocations[0].gpus.contains(bad));

  // An admin puts it back; then it is allocatable again.
  EXPECT_EQ(h->nodes().Resume("n1", bad == 0 ? 1 : 0, kRoot).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(h->nodes().Resume("n1", bad, kRoot).ok());
  EXPECT_TRUE(NodeOf(h, "n1").unhealthy.empty());
  EXPECT_TRUE(NodeOf(h, "n1").unhealthy_reasons.empty());
}

// A finished job's environment stays in the store, not in the server's memory; the
// running job's launch still carries it.
TEST(Controller, FinishedJobsKeepTheirEnvironmentOnDiskOnly) {
  Harness h;
  h.Register("n1");
  SubmitRequest r = MakeSubmit().Gpus(1).Time(600);
  r.spec.set_env({{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/alice"}});
  const state::JobId id = h.Submit(r);
  EXPECT_EQ(h.Job(id).spec.env().size(), 2u);
  h->RunCycle();
  const AgentWork work = h.Work("n1");
  ASSERT_EQ(work.launch.size(), 1u);
  EXPECT_EQ(work.launch[0].spec.env().size(), 2u);
  h.Exit("n1", id, 0);
  ASSERT_EQ(h.StateOf(id), JobState::kCompleted);
  EXPECT_TRUE(h.Job(id).spec.env().empty());
  EXPECT_EQ(h.Job(id).spec.argv(), std::vector<std::string>{"/bin/true"});
}

// The agent reports every compute process on its GPUs; the node lists those on a GPU no
// running job of theirs was given, each with when it was first seen.
TEST(Controller, ProcessesOutsideTheirJobsGpusAreStray) {
  Harness h;
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit().Gpus(2).Time(600));
  h->RunCycle();
  const state::JobRecord job = h.Job(id);
  ASSERT_EQ(job.state, JobState::kRunning);
  const int own = job.allocations[0].gpus.First();
  int other = 0;
  while (job.allocations[0].gpus.contains(other)) ++other;
  api::AgentHealth report;
  report.has_processes = true;
  report.processes = {{own, 100, 4000, "root", "train", id},        // its own: fine
                      {other, 101, 500, "root", "train", id},       // outside its GPUs
                      {7, 200, 20000, "alice", "python nb.py", 0},  // not Hachi's
                      {6, 300, 10, "bob", "old", 9999}};            // a job not running
  ASSERT_TRUE(h->nodes().ReportHealth("n1", report).ok());
  auto strays = [&] {
    for (const state::NodeStatus& n : h->cluster_views().Nodes()) {
      if (n.record.name == "n1") return n.stray_processes;
    }
    return std::vector<state::StrayGpuProcess>{};
  };
  std::vector<state::StrayGpuProcess> s = strays();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].pid, 101u);
  EXPECT_EQ(s[0].job, id);
  EXPECT_EQ(s[1].pid, 200u);
  EXPECT_EQ(s[1].user, "alice");
  EXPECT_EQ(s[2].job, 9999);
  const Time first_seen = s[1].since;
  EXPECT_GT(first_seen, 0);
  // The list replaces the last; a report without one changes nothing.
  report.processes = {{7, 200, 21000, "alice", "python nb.py", 0}};
  ASSERT_TRUE(h->nodes().ReportHealth("n1", report).ok());
  ASSERT_TRUE(h->nodes().ReportHealth("n1", api::AgentHealth{}).ok());
  s = strays();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].used_mib, 21000);
  EXPECT_EQ(s[0].since, first_seen) << "the same process keeps its first sighting";
  report.processes = {{own, 100, 4000, "root", "train", id}};
  ASSERT_TRUE(h->nodes().ReportHealth("n1", report).ok());
  EXPECT_TRUE(strays().empty());
  // A GPU the node does not have is refused.
  report.processes = {{42, 1, 1, "x", "y", 0}};
  EXPECT_EQ(h->nodes().ReportHealth("n1", report).code(), StatusCode::kInvalidArgument);
}

TEST(Controller, NodeWideFaultDrainsTheNodeAndBadEventsAreRefused) {
  Harness h;
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit().Gpus(2).Time(600));
  h->RunCycle();
  ASSERT_EQ(h.StateOf(id), JobState::kRunning);
  EXPECT_EQ(h->nodes().ReportHealth("n1", Event(42, "fatal", 79, "x")).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(h->nodes().ReportHealth("n9", Event(0, "fatal", 79, "x")).code(),
            StatusCode::kNotFound);
  ASSERT_TRUE(
      h->nodes().ReportHealth("n1", Event(-1, "node", 145, "NVSwitch fatal error")).ok());
  const state::NodeRecord node = NodeOf(h, "n1");
  EXPECT_EQ(node.state, state::NodeState::kDrained);
  EXPECT_EQ(node.state_reason, "health: NVSwitch fatal error");
  // Stopped first; requeued once its agent reports it gone.
  EXPECT_EQ(h.StateOf(id), JobState::kRunning);
  EXPECT_EQ(h.Work("n1").CancelledJobs(), std::vector<state::JobId>{id});
  h.Exit("n1", id, 143);
  EXPECT_EQ(h.StateOf(id), JobState::kPending);
  EXPECT_EQ(h.Job(id).reason, "node n1: NVSwitch fatal error");
  ASSERT_TRUE(h->nodes().Resume("n1", -1, kRoot).ok());
  EXPECT_EQ(NodeOf(h, "n1").state, state::NodeState::kUp);
  EXPECT_EQ(h->nodes().Resume("n1", -1, kRoot).code(), StatusCode::kInvalidArgument);
}

// ---- Gangs ----

TEST(Controller, GangGetsOneLaunchPerNode) {
  Harness h;
  h.Register("n1");
  h.Register("n2");
  const state::JobId id = h.Submit(MakeSubmit().Gang(2, 8));
  h->RunCycle();
  ASSERT_EQ(h.StateOf(id), JobState::kRunning);
  const AgentWork w1 = h.Work("n1");
  const AgentWork w2 = h.Work("n2");
  ASSERT_EQ(w1.launch.size(), 1u);
  ASSERT_EQ(w2.launch.size(), 1u);
  const api::LaunchSpec& a = w1.launch[0];
  const api::LaunchSpec& b = w2.launch[0];
  EXPECT_EQ(a.nodelist, b.nodelist);
  EXPECT_EQ(a.node_addresses, b.node_addresses);
  EXPECT_EQ(a.master_port, b.master_port);
  EXPECT_EQ(a.master_port, 29500);  // the lowest of the rank-0 node's range
  EXPECT_EQ(a.nodelist.size(), 2u);
  EXPECT_EQ(std::set<int>({a.node_rank, b.node_rank}), std::set<int>({0, 1}));
  EXPECT_EQ(a.nodelist[a.node_rank], "n1");
  EXPECT_EQ(b.nodelist[b.node_rank], "n2");
  EXPECT_EQ(a.gpus, GpuSet::FirstN(8));
  EXPECT_EQ(a.gpus_per_node, 8);

  h.Exit("n1", id, 0);
  EXPECT_EQ(h.StateOf(id), JobState::kRunning) << "one part still runs";
  h.Exit("n1", id, 0);  // the same part reported twice (a lost acknowledgement)
  EXPECT_EQ(h.StateOf(id), JobState::kRunning) << "a repeated report counts once";
  h.Exit("n2", id, 0);
  EXPECT_EQ(h.StateOf(id), JobState::kCompleted);
}

TEST(Controller, FailingGangPartCancelsTheOthers) {
  Harness h;
  h.Register("n1");
  h.Register("n2");
  const state::JobId id = h.Submit(MakeSubmit().Gang(2, 8));
  h->RunCycle();
  ASSERT_EQ(h.Work("n1").launch.size(), 1u);
  ASSERT_EQ(h.Work("n2").launch.size(), 1u);
  h.Exit("n2", id, 2);
  EXPECT_EQ(h.StateOf(id), JobState::kRunning);
  EXPECT_EQ(h.Work("n1").CancelledJobs(), std::vector<state::JobId>{id});
  EXPECT_TRUE(h.Work("n2").cancel.empty());
  h.Exit("n1", id, 0, ExitKind::kCancelled);
  const state::JobRecord job = h.Job(id);
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.reason, "exit code 2");
}

// ---- Submit checks, dependencies, arrays ----

TEST(Controller, UnsatisfiableSubmitIsRefusedAndNotStored) {
  Harness h;
  h.Register("n1");
  Result<std::vector<state::JobId>> r = h->jobs().Submit(MakeSubmit().Gpus(9), kAlice);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsatisfiable);
  EXPECT_NE(r.status().message().find("9"), std::string::npos) << r.status().message();
  EXPECT_TRUE(h->job_views().Jobs(true).empty());
  Result<std::vector<state::JobId>> dep =
      h->jobs().Submit(MakeSubmit().After(DependencyKind::kAfterOk, 42), kAlice);
  EXPECT_EQ(dep.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(h->job_views().Jobs(true).empty());
}

TEST(Controller, Dependencies) {
  Harness h;
  h.Register("n1");
  const state::JobId a = h.Submit(MakeSubmit().Gpus(8));
  h->RunCycle();
  ASSERT_EQ(h.Work("n1").launch.size(), 1u);
  const state::JobId ok = h.Submit(MakeSubmit().After(DependencyKind::kAfterOk, a));
  const state::JobId any = h.Submit(MakeSubmit().After(DependencyKind::kAfterAny, a));
  h->RunCycle();
  EXPECT_EQ(h.StateOf(ok), JobState::kPending);
  EXPECT_EQ(h.StateOf(any), JobState::kPending);
  h.Exit("n1", a, 1);
  ASSERT_EQ(h.StateOf(a), JobState::kFailed);
  for (int i = 0; i < 3; ++i) h->RunCycle();
  EXPECT_EQ(h.StateOf(ok), JobState::kPending) << "afterok on a failed job never runs";
  EXPECT_EQ(h.StateOf(any), JobState::kRunning);
  ASSERT_TRUE(h->job_views().Pending(ok).has_value());
  EXPECT_FALSE(h->job_views().Pending(ok)->reason.empty());
}

// As Slurm's scancel, the array's id cancels the whole array (it
// cancelled the first task only) and A_T (task >= 0) one task; hold and release alike.
TEST(Controller, AnArraysIdCancelsEveryTaskAndATOneTask) {
  Harness h;
  h.Register("n1");
  Result<std::vector<state::JobId>> ids =
      h->jobs().Submit(MakeSubmit().Gpus(1).Array({0, 1, 2, 3}, 1), kAlice);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  const state::JobId a = (*ids)[0];
  h->RunCycle();
  ASSERT_EQ(h.Work("n1").launch.size(), 1u);
  ASSERT_EQ(h.StateOf(a), JobState::kRunning);
  const state::JobId other = h.Submit(MakeSubmit().Gpus(1).Array({5, 6, 7}, 0).Hold());
  ASSERT_TRUE(h->jobs().Cancel(other, kAlice, 6).ok());  // "B_6": that task alone
  EXPECT_EQ(h.StateOf(other), JobState::kPending);
  EXPECT_EQ(h.StateOf(other + 1), JobState::kCancelled);
  EXPECT_EQ(h.StateOf(other + 2), JobState::kPending);
  EXPECT_EQ(h->jobs().Cancel(other, kAlice, 9).code(), StatusCode::kNotFound);
  EXPECT_EQ(h->jobs().Cancel(a + 1, kAlice, 0).code(), StatusCode::kNotFound)
      << "a task's own id is not an array";

  const Caller bob{"bob", 1001, 1001, true, false};
  EXPECT_EQ(h->jobs().Cancel(a, bob).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(h.StateOf(a + 3), JobState::kPending) << "refused: nothing changed";
  ASSERT_TRUE(h->jobs().Cancel(a, kAlice).ok());  // "A": every task
  for (int i = 1; i < 4; ++i) EXPECT_EQ(h.StateOf(a + i), JobState::kCancelled) << i;
  EXPECT_EQ(h.StateOf(a), JobState::kRunning) << "running: its agent stops it";
  EXPECT_EQ(h.Work("n1").CancelledJobs(), std::vector<state::JobId>{a});
  h.Exit("n1", a, 0, ExitKind::kCancelled);
  EXPECT_EQ(h.StateOf(a), JobState::kCancelled);
  EXPECT_EQ(h->jobs().Cancel(a, kAlice).code(), StatusCode::kInvalidArgument)
      << "all ended";

  // Hold and release of the array's id: its pending tasks.
  ASSERT_TRUE(h->jobs().Hold(other, false, kAlice).ok());
  EXPECT_FALSE(h.Job(other).held);
  EXPECT_FALSE(h.Job(other + 2).held);
  ASSERT_TRUE(h->jobs().Hold(other, true, kAlice, 7).ok());
  EXPECT_FALSE(h.Job(other).held);
  EXPECT_TRUE(h.Job(other + 2).held);
}

TEST(Controller, ArrayNeverExceedsItsRunningLimit) {
  Harness h;
  h.Register("n1");
  Result<std::vector<state::JobId>> ids =
      h->jobs().Submit(MakeSubmit().Gpus(1).Array({0, 1, 2, 3, 4, 5, 6}, 2), kAlice);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  ASSERT_EQ(ids->size(), 7u);
  int completed = 0;
  for (int round = 0; round < 10 && completed < 7; ++round) {
    h->RunCycle();
    std::vector<state::JobId> running;
    for (state::JobId id : *ids) {
      if (h.StateOf(id) == JobState::kRunning) running.push_back(id);
    }
    ASSERT_LE(running.size(), 2u) << "round " << round;
    ASSERT_FALSE(running.empty()) << "round " << round;
    h.Work("n1");
    h.Exit("n1", running[0], 0);
    ++completed;
  }
  EXPECT_EQ(completed, 7);
  const state::JobRecord first = h.Job((*ids)[0]);
  EXPECT_EQ(first.spec.array_job_id, (*ids)[0]);
  EXPECT_EQ(h.Job((*ids)[3]).spec.array_task_id, 3);
}

// A store that cannot commit (disk full, SQLite busy past its timeout): the submit fails
// with kUnavailable and is not acknowledged, a planned start is not dispatched, and the
// controller keeps serving.
TEST(Controller, FailedCommitsAreNeitherAcknowledgedNorApplied) {
  Harness h(ControllerOptions{}, state::NewMemoryStore(/*fail_after=*/2));
  h.Register("n1");                                        // commit 1
  const state::JobId ok = h.Submit(MakeSubmit().Gpus(1));  // commit 2
  ASSERT_NE(ok, 0);
  Result<std::vector<state::JobId>> refused =
      h->jobs().Submit(MakeSubmit().Gpus(1), kAlice);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(h->job_views().Jobs(true).size(), 1u)
      << "nothing of the refused submit is kept";
  h->RunCycle();  // the start cannot be committed either
  EXPECT_EQ(h.StateOf(ok), JobState::kPending);
  EXPECT_TRUE(h.Work("n1").launch.empty()) << "a start that is not on disk is not run";
  EXPECT_EQ(h->nodes().Drain("n1", "x", kRoot).code(), StatusCode::kUnavailable);
  EXPECT_EQ(h->cluster_views().Nodes().size(), 1u);
  EXPECT_EQ(h->cluster_views().Nodes()[0].record.state, state::NodeState::kUp);
}

// ---- Nodes ----

TEST(Controller, DrainedNodeTakesNoNewJobs) {
  Harness h;
  h.Register("n1");
  const state::JobId before = h.Submit(MakeSubmit().Gpus(2));
  h->RunCycle();
  ASSERT_EQ(h.StateOf(before), JobState::kRunning);
  ASSERT_TRUE(h->nodes().Drain("n1", "maintenance", kRoot).ok());
  const state::JobId after = h.Submit(MakeSubmit().Gpus(2));
  h->RunCycle();
  EXPECT_EQ(h.StateOf(after), JobState::kPending);
  EXPECT_EQ(h.StateOf(before), JobState::kRunning) << "running jobs finish";
  h.Register("n1");  // a drain outlives an agent restart
  h->RunCycle();
  EXPECT_EQ(h.StateOf(after), JobState::kPending);
  EXPECT_EQ(h->cluster_views().Nodes()[0].record.state, state::NodeState::kDrained);
  ASSERT_TRUE(h->nodes().Resume("n1", -1, kRoot).ok());
  h->RunCycle();
  EXPECT_EQ(h.StateOf(after), JobState::kRunning);
  EXPECT_EQ(h->nodes().Drain("nx", "", kRoot).code(), StatusCode::kNotFound);
  EXPECT_EQ(h->nodes().Resume("n1", -1, kRoot).code(), StatusCode::kInvalidArgument);
}

TEST(Controller, SilentAgentTakesItsNodeDown) {
  FakeClock clock;
  ControllerOptions o;
  o.agent_timeout = 1;  // and the lease: its jobs are counted dead 1 + 1 + 1 s after
  o.kill_grace = 1;
  o.fence_margin = 1;
  o.clock = &clock;
  Harness h(o);
  h.Register("n1");
  h.Register("n2");
  ASSERT_TRUE(h->nodes().Drain("n2", "keep jobs off", kRoot).ok());
  const state::JobId plain = h.Submit(MakeSubmit().Gpus(4));
  const state::JobId requeue = h.Submit(MakeSubmit().Gpus(4).Requeue());
  h->RunCycle();
  ASSERT_EQ(h.StateOf(plain), JobState::kRunning);
  ASSERT_EQ(h.StateOf(requeue), JobState::kRunning);
  ASSERT_EQ(h.Work("n1").launch.size(), 2u);
  // n2 keeps polling, n1 is silent.
  for (int i = 0; i < 4; ++i) {
    clock.Advance(std::chrono::milliseconds(220));
    h.Work("n2");
  }
  h->RunCycle();  // n1 silent for 880 ms: not yet past the timeout
  for (const state::NodeStatus& n : h->cluster_views().Nodes())
    EXPECT_NE(n.record.state, state::NodeState::kDown);
  for (int i = 0; i < 2; ++i) {
    clock.Advance(std::chrono::milliseconds(220));
    h.Work("n2");
  }
  h->RunCycle();
  for (const state::NodeStatus& n : h->cluster_views().Nodes()) {
    EXPECT_EQ(n.record.state, n.record.name == "n1" ? state::NodeState::kDown
                                                    : state::NodeState::kDrained)
        << n.record.name;
  }
  // Down, but its jobs keep running (fencing_test.cc) until the lease, the kill grace
  // and the margin have passed since n1 was last heard from.
  EXPECT_EQ(h.StateOf(plain), JobState::kRunning);
  EXPECT_EQ(h.StateOf(requeue), JobState::kRunning);
  for (int i = 0; i < 9; ++i) {
    clock.Advance(std::chrono::milliseconds(220));
    h.Work("n2");
  }
  h->RunCycle();  // silent for 3.3 s
  const state::JobRecord p = h.Job(plain);
  EXPECT_EQ(p.state, JobState::kNodeFail);
  EXPECT_NE(p.reason.find("node n1 down"), std::string::npos) << p.reason;
  const state::JobRecord r = h.Job(requeue);
  EXPECT_EQ(r.state, JobState::kPending);
  EXPECT_EQ(r.requeues, 1);
  EXPECT_TRUE(h.Work("n1").reregister);
  EXPECT_EQ(h->nodes().ReportExits("n1", {}).code(), StatusCode::kNotFound);

  // The agent comes back still running both jobs: the server tells it to stop them,
  // since their GPUs are no longer theirs.
  AgentRegistration back = MakeAgent("n1");
  back.running = {plain, requeue};
  ASSERT_TRUE(h->nodes().Register(back).ok());
  const AgentWork w = h.Work("n1");
  EXPECT_TRUE(Has(w.CancelledJobs(), plain));
  EXPECT_TRUE(Has(w.CancelledJobs(), requeue));
}

TEST(Controller, RegistrationRequeuesCancelsLostWithTheSession) {
  Harness h;
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit());
  h->RunCycle();
  ASSERT_EQ(h.Work("n1").launch.size(), 1u);
  ASSERT_TRUE(h->jobs().Cancel(id, kAlice).ok());
  // The agent re-registers before it polled the cancel (it had lost its session).
  AgentRegistration again = MakeAgent("n1");
  again.running = {id};
  ASSERT_TRUE(h->nodes().Register(again).ok());
  EXPECT_EQ(h.Work("n1").CancelledJobs(), std::vector<state::JobId>{id});
}

// ---- Restart: a new Controller on the same SQLite file ----

class RestartTest : public ::testing::Test {
 protected:
  std::unique_ptr<Harness> Open() {
    Result<std::unique_ptr<state::Store>> store =
        state::OpenSqliteStore(dir_.path() + "/hachi.db");
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return std::make_unique<Harness>(ControllerOptions{}, std::move(*store));
  }
  topo::TempDir dir_;
};

TEST_F(RestartTest, KeepsEveryJobAndNeverReusesAnId) {
  state::JobId done, running, pending, last;
  {
    auto h = Open();
    h->Register("n1");
    done = h->Submit(MakeSubmit().Gpus(8));
    h->c().RunCycle();
    h->Exit("n1", done, 0);
    running = h->Submit(MakeSubmit().Gpus(8));
    h->c().RunCycle();
    pending = h->Submit(MakeSubmit().Gpus(8));
    Result<std::vector<state::JobId>> arr =
        h->c().jobs().Submit(MakeSubmit().Array({1, 2, 3}, 0).Hold(), kAlice);
    ASSERT_TRUE(arr.ok());
    last = arr->back();
    ASSERT_TRUE(h->c().jobs().Cancel(last, kAlice).ok());
  }
  auto h = Open();
  EXPECT_EQ(h->StateOf(done), JobState::kCompleted);
  EXPECT_EQ(h->StateOf(running), JobState::kRunning);
  EXPECT_EQ(h->StateOf(pending), JobState::kPending);
  EXPECT_EQ(h->StateOf(last), JobState::kCancelled);
  EXPECT_EQ(h->c().job_views().Jobs(true).size(), 6u);
  EXPECT_TRUE(h->Work("n1").reregister) << "the agent must register again";
  h->Register("n1");
  const state::JobId next = h->Submit(MakeSubmit().Gpus(1));
  EXPECT_GT(next, last);
}

TEST_F(RestartTest, UndeliveredLaunchIsDispatchedAgain) {
  state::JobId id;
  const Time agent_started = RealClock()->Now() - 100;
  {
    auto h = Open();
    h->Register("n1", agent_started);
    id = h->Submit(MakeSubmit().Gpus(2));
    h->c().RunCycle();
    ASSERT_EQ(h->StateOf(id), JobState::kRunning);
    // The server stops before the agent polled.
  }
  auto h = Open();
  h->Register("n1", agent_started);  // the same agent process, knows nothing of it
  const AgentWork w = h->Work("n1");
  ASSERT_EQ(w.launch.size(), 1u);
  EXPECT_EQ(w.launch[0].job, id);
  EXPECT_EQ(w.launch[0].gpus, h->Job(id).allocations[0].gpus);
  h->Exit("n1", id, 0);
  EXPECT_EQ(h->StateOf(id), JobState::kCompleted);
}

TEST_F(RestartTest, FinishedJobIsSentAgainForItsExit) {
  state::JobId id;
  {
    auto h = Open();
    h->Register("n1");
    id = h->Submit(MakeSubmit().Gpus(2));
    h->c().RunCycle();
    ASSERT_EQ(h->Work("n1").launch.size(), 1u);
    // The agent reports the exit while the server is down: the report is lost.
  }
  auto h = Open();
  AgentRegistration reg = MakeAgent("n1", RealClock()->Now() - 100);
  reg.finished = {id};
  ASSERT_TRUE(h->c().nodes().Register(reg).ok());
  const AgentWork w = h->Work("n1");
  ASSERT_EQ(w.launch.size(), 1u);
  EXPECT_EQ(w.launch[0].job, id);
  h->Exit("n1", id, 4);
  EXPECT_EQ(h->StateOf(id), JobState::kFailed);
}

TEST_F(RestartTest, AgentRestartedAfterTheJobStartedEndsItNodeFail) {
  state::JobId id, requeue;
  {
    auto h = Open();
    h->Register("n1");
    id = h->Submit(MakeSubmit().Gpus(2));
    requeue = h->Submit(MakeSubmit().Gpus(2).Requeue());
    h->c().RunCycle();
    ASSERT_EQ(h->Work("n1").launch.size(), 2u);
  }
  auto h = Open();
  h->Register("n1", RealClock()->Now() + 10);  // a new agent process: knows neither
  const state::JobRecord job = h->Job(id);
  EXPECT_EQ(job.state, JobState::kNodeFail);
  EXPECT_NE(job.reason.find("restarted"), std::string::npos) << job.reason;
  EXPECT_EQ(h->StateOf(requeue), JobState::kPending);
  EXPECT_TRUE(h->Work("n1").launch.empty());
}

// ---- The plan applier never double-books ----

// Checks the records: on every node, no GPU held by two running whole-GPU jobs, and
// the shares on a GPU never above 1000 milli (and never with a whole-GPU job).
void CheckNoDoubleBooking(Controller& c) {
  std::map<std::pair<std::string, int>, int> whole;
  std::map<std::pair<std::string, int>, int> milli;
  for (const state::JobRecord& j : c.job_views().Jobs(false)) {
    if (j.state != JobState::kRunning) continue;
    RC_ASSERT(static_cast<int>(j.allocations.size()) == j.req.nodes);
    for (const state::NodeAllocation& a : j.allocations) {
      if (a.share_milli == 0) RC_ASSERT(a.gpus.size() == j.req.GpusPerNode());
      for (int g : a.gpus.Indices()) {
        if (a.share_milli > 0) {
          milli[{a.node, g}] += a.share_milli;
        } else {
          ++whole[{a.node, g}];
        }
      }
    }
  }
  for (const auto& [gpu, n] : whole) {
    RC_ASSERT(n == 1);
    RC_ASSERT(milli.count(gpu) == 0u);
  }
  for (const auto& [gpu, m] : milli) RC_ASSERT(m <= 1000);
  for (const state::NodeStatus& n : c.cluster_views().Nodes()) {
    for (int m : n.gpu_share_milli) RC_ASSERT(m <= 1000);
  }
}

ControllerOptions SharingOptions() {
  ControllerOptions o;
  config::ClusterConfig cfg;
  config::PartitionConfig p;
  p.partition.name = "any";
  p.partition.allow_gpu_sharing = true;
  p.partition.default_time = kHour;
  p.partition.max_time = kDay;
  p.nodes.all = true;
  cfg.partitions.push_back(p);
  o.config = cfg;
  return o;
}

RC_GTEST_PROP(ControllerProperty, PlanApplierNeverDoubleBooks, ()) {
  Harness h(SharingOptions());
  const std::vector<std::string> nodes = {"n1", "n2", "n3"};
  for (const std::string& n : nodes) h.Register(n);
  std::vector<state::JobId> ids;
  const int steps = *rc::gen::inRange(10, 60);
  for (int step = 0; step < steps; ++step) {
    const int op = *rc::gen::inRange(0, 10);
    if (op < 4) {  // submit
      const int kind = *rc::gen::inRange(0, 4);
      testing::SubmitBuilder b = MakeSubmit();
      if (kind == 0) b.Share(*rc::gen::element(250, 300, 500, 750));
      if (kind == 1) b.Gpus(*rc::gen::inRange(1, 9));
      if (kind == 2) b.Gang(2, *rc::gen::element(4, 8));
      if (kind == 3) b.Gpus(*rc::gen::element(1, 2, 4));
      Result<std::vector<state::JobId>> r = h->jobs().Submit(b, kAlice);
      RC_ASSERT(r.ok());
      ids.insert(ids.end(), r->begin(), r->end());
    } else if (op < 6) {
      h->RunCycle();
    } else if (!ids.empty()) {  // an exit or a cancel of some job
      const state::JobId id = *rc::gen::elementOf(ids);
      const state::JobRecord j = h.Job(id);
      if (op < 9 && j.state == JobState::kRunning) {
        for (const state::NodeAllocation& a : j.allocations) {
          h.Work(a.node);
          h.Exit(a.node, id, *rc::gen::element(0, 1));
        }
      } else if (!state::IsFinal(j.state)) {
        RC_ASSERT(h->jobs().Cancel(id, kAlice).ok());
        for (const std::string& n : nodes) {
          for (state::JobId c : h.Work(n).CancelledJobs()) {
            if (c == id) h.Exit(n, id, 0, ExitKind::kCancelled);
          }
        }
      }
    }
    CheckNoDoubleBooking(h.c());
  }
}

}  // namespace
}  // namespace hachi::server

// ---- The store's commit runs without the Controller's lock ----

namespace hachi::server {
namespace {

// A store whose commits wait at a gate while it is closed: a commit that takes as long
// as a slow disk's fsync, for as long as the test wants.
class GatedStore : public state::Store {
 public:
  explicit GatedStore(std::unique_ptr<state::Store> inner) : inner_(std::move(inner)) {}
  Result<state::StateImage> Load() override { return inner_->Load(); }
  Status Commit(const std::vector<state::Edit>& edits) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    cv_.notify_all();
    // Bounded, so that a test that fails while the gate is closed still ends.
    cv_.wait_for(lock, std::chrono::seconds(20), [&] { return open_; });
    --waiting_;
    return inner_->Commit(edits);
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // Waits (bounded) until a commit waits at the gate.
  bool AwaitWaiter() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return waiting_ > 0; });
  }

 private:
  std::unique_ptr<state::Store> inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int waiting_ = 0;
};

TEST(Controller, ReadsAndPollsGoOnWhileAWritersCommitWaitsForTheDisk) {
  auto gated = std::make_unique<GatedStore>(state::NewMemoryStore());
  GatedStore* store = gated.get();
  Harness h(ControllerOptions{}, std::move(gated));
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit().Gpus(1));
  ASSERT_NE(id, 0);

  store->Close();
  auto drain =
      std::async(std::launch::async, [&] { return h->nodes().Drain("n1", "x", kRoot); });
  ASSERT_TRUE(store->AwaitWaiter()) << "the drain never reached the store";
  // Each of these needs the Controller's lock; with the lock held across the commit they
  // would wait for the gate, and the futures would not be ready.
  auto job = std::async(std::launch::async, [&] { return h->job_views().Job(id); });
  auto nodes = std::async(std::launch::async, [&] { return h->cluster_views().Nodes(); });
  auto poll = std::async(std::launch::async, [&] { return h->nodes().Poll("n1", 0); });
  ASSERT_EQ(job.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  ASSERT_EQ(nodes.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  ASSERT_EQ(poll.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(job.get()->state, JobState::kPending);
  const std::vector<state::NodeStatus> during = nodes.get();
  ASSERT_EQ(during.size(), 1u);
  EXPECT_EQ(during[0].record.state, state::NodeState::kUp)
      << "an edit applies only once it is durable";
  EXPECT_EQ(drain.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);

  store->Open();
  ASSERT_EQ(drain.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(drain.get().ok());
  EXPECT_EQ(h->cluster_views().Nodes()[0].record.state, state::NodeState::kDrained);
}

}  // namespace
}  // namespace hachi::server
