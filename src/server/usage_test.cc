// Job usage on the server (server/usage.cc): the agents' samples summed into
// the run, its summary on the record at the end, the run stored and resumed after a
// restart; the idle-GPU policy (FakeClock): warned after its period, then requeued or
// cancelled per the partition; /metrics' per-job GPU gauges, checked by promtool.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "server/testing.h"
#include "state/store.h"
#include "topo/topology_testing.h"

namespace hachi::server {
namespace {

using state::JobState;
using testing::Harness;
using testing::MakeSubmit;

class UsageTest : public ::testing::Test {
 protected:
  // A controller with partition "gpu" whose idle policy is `action` after 30 minutes
  // below 5 %.
  std::unique_ptr<Harness> Open(config::IdleAction action,
                                std::unique_ptr<state::Store> store = nullptr) {
    ControllerOptions o;
    o.clock = &clock_;
    config::ClusterConfig cfg;
    config::PartitionConfig p;
    p.partition.name = "gpu";
    p.nodes.all = true;
    p.idle.after = 30 * kMinute;
    p.idle.below_pct = 5;
    p.idle.action = action;
    cfg.partitions.push_back(p);
    o.config = cfg;
    auto h =
        std::make_unique<Harness>(o, store ? std::move(store) : state::NewMemoryStore());
    h->Register("n1");
    return h;
  }
  // A running 2-GPU job on n1.
  state::JobId Start(Harness& h) {
    const state::JobId id =
        h.Submit(MakeSubmit().Gpus(2).Partition("gpu").Time(10 * kHour));
    h.c().RunCycle();
    EXPECT_EQ(h.StateOf(id), JobState::kRunning);
    h.Work("n1");  // delivered
    return id;
  }
  // The agent's sample of `id` now: its GPUs at `util` %.
  void Sample(Harness& h, state::JobId id, int util0, int util1) {
    const state::JobRecord j = h.Job(id);
    api::AgentHealth health;
    health.instance = "agent-1";
    state::JobUsageSample s;
    s.job = id;
    s.start_time = j.start_time;
    s.at = clock_.Now();
    s.cpu_usec = (clock_.Now() - j.start_time) * 1'000'000;
    s.mem_mib = 1000;
    const std::vector<int> gpus = j.allocations[0].gpus.Indices();
    s.gpus.push_back({gpus[0], util0, 0, 2048, 300, 1980, -1, -1});
    s.gpus.push_back({gpus[1], util1, 0, 4096, 310, 1980, -1, -1});
    health.usage.push_back(s);
    Status st = h.c().nodes().ReportHealth("n1", health);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  void Pass(Duration d, Harness& h, state::JobId id, int util0, int util1) {
    for (Duration t = 0; t < d; t += 60) {
      clock_.Advance(std::chrono::seconds(60));
      Sample(h, id, util0, util1);
      h.c().RunCycle();
    }
  }
  static std::unique_ptr<state::Store> Sqlite(const std::string& path) {
    Result<std::unique_ptr<state::Store>> s = state::OpenSqliteStore(path);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : state::NewMemoryStore();
  }
  FakeClock clock_;
  topo::TempDir dir_;
};

TEST_F(UsageTest, SamplesAreSummedAndTheSummaryLandsOnTheRecord) {
  auto h = Open(config::IdleAction::kWarn);
  const state::JobId id = Start(*h);
  Pass(10 * kMinute, *h, id, 90, 10);
  Result<std::vector<state::JobUsage>> live = h->c().job_views().Usage(id);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ(live->front().gpus[0].samples, 10);
  EXPECT_DOUBLE_EQ(live->front().gpus[0].UtilMean(), 90);
  EXPECT_DOUBLE_EQ(h->Job(id).usage.gpu_util, 50);  // live, while it runs
  h->Exit("n1", id, 0);
  const state::JobRecord done = h->Job(id);
  EXPECT_EQ(done.state, JobState::kCompleted);
  EXPECT_EQ(done.usage.samples, 20);
  EXPECT_DOUBLE_EQ(done.usage.gpu_util, 50);
  EXPECT_DOUBLE_EQ(done.usage.cpu_seconds, 600);
  Result<std::vector<state::JobUsage>> stored = h->c().job_views().Usage(id);
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ(stored->front().gpus[0].series, live->front().gpus[0].series);
  EXPECT_EQ(stored->front().gpus[1].samples, 10);
  EXPECT_DOUBLE_EQ(stored->front().gpus[1].UtilMean(), 10);
}

TEST_F(UsageTest, ARestartedServerResumesTheRunFromTheStore) {
  const std::string db = dir_.path() + "/hachi.db";
  state::JobId id = 0;
  {
    auto h = Open(config::IdleAction::kWarn, Sqlite(db));
    id = Start(*h);
    Pass(5 * kMinute, *h, id, 80, 80);
    h->c().Stop();  // writes the running jobs' usage so far, as a server stopping does
  }
  auto h = Open(config::IdleAction::kWarn, Sqlite(db));
  Pass(5 * kMinute, *h, id, 40, 40);
  Result<std::vector<state::JobUsage>> u = h->c().job_views().Usage(id);
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  ASSERT_EQ(u->size(), 1u);
  EXPECT_EQ(u->front().gpus[0].samples, 10);
  EXPECT_DOUBLE_EQ(u->front().gpus[0].UtilMean(), 60);
}

TEST_F(UsageTest, IdleGpusAreWarnedAfterThePeriodAndNotBefore) {
  auto h = Open(config::IdleAction::kWarn);
  const state::JobId id = Start(*h);
  Pass(20 * kMinute, *h, id, 2, 1);
  Pass(2 * kMinute, *h, id, 2, 60);  // one GPU woke up: the spell starts again
  Pass(29 * kMinute, *h, id, 0, 4);
  EXPECT_EQ(h->Job(id).reason, "");
  Pass(2 * kMinute, *h, id, 0, 4);
  const state::JobRecord j = h->Job(id);
  EXPECT_EQ(j.state, JobState::kRunning);  // warn only
  EXPECT_NE(j.reason.find("idle GPUs: every GPU below 5 % since "), std::string::npos)
      << j.reason;
  EXPECT_NE(j.reason.find("(over 30m00s, partition gpu's idle policy)"),
            std::string::npos)
      << j.reason;
  Result<report::JobExplain> e = h->c().job_views().Explain(id);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->history.back().event, "idle");
  const std::string metrics = h->c().cluster_views().MetricsText();
  EXPECT_NE(metrics.find("hachi_jobs_idle_gpus 1"), std::string::npos) << metrics;
  EXPECT_NE(
      metrics.find("hachi_idle_gpu_actions_total{partition=\"gpu\",action=\"warn\"} 1"),
      std::string::npos)
      << metrics;
  // Busy again: the warning is gone.
  Pass(1 * kMinute, *h, id, 50, 50);
  EXPECT_EQ(h->Job(id).reason, "");
}

TEST_F(UsageTest, TheRequeuePolicyRequeuesWithItsReason) {
  auto h = Open(config::IdleAction::kRequeue);
  const state::JobId id = Start(*h);
  Pass(31 * kMinute, *h, id, 0, 0);
  const AgentWork w = h->Work("n1");
  ASSERT_EQ(w.cancel.size(), 1u);  // told to stop
  EXPECT_EQ(w.cancel[0].job, id);
  h->Exit("n1", id, 0, api::ExitKind::kCancelled);
  const state::JobRecord j = h->Job(id);
  EXPECT_EQ(j.state, JobState::kPending);
  EXPECT_EQ(j.requeues, 1);
  EXPECT_EQ(j.reason.rfind("requeued: idle GPUs: every GPU below 5 %", 0), 0u)
      << j.reason;
}

TEST_F(UsageTest, TheCancelPolicyCancelsWithItsReason) {
  auto h = Open(config::IdleAction::kCancel);
  const state::JobId id = Start(*h);
  Pass(31 * kMinute, *h, id, 1, 0);
  h->Exit("n1", id, 0, api::ExitKind::kCancelled);
  const state::JobRecord j = h->Job(id);
  EXPECT_EQ(j.state, JobState::kCancelled);
  EXPECT_EQ(j.reason.rfind("cancelled: idle GPUs: every GPU below 5 %", 0), 0u)
      << j.reason;
}

// The per-job gauges, and promtool's verdict on the scrape that holds them.
TEST_F(UsageTest, MetricsCarryEachRunningJobsGpusAndPassPromtool) {
  auto h = Open(config::IdleAction::kWarn);
  const state::JobId id = Start(*h);
  Pass(2 * kMinute, *h, id, 77, 33);
  const std::string text = h->c().cluster_views().MetricsText();
  const std::string gpu0 = std::to_string(h->Job(id).allocations[0].gpus.First());
  EXPECT_NE(text.find("hachi_job_gpu_utilization_percent{job=\"" + std::to_string(id) +
                      "\",user=\"alice\",account=\"alice\",node=\"n1\",gpu=\"" + gpu0 +
                      "\"} 77"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("hachi_job_gpu_memory_used_bytes{job=\"" + std::to_string(id) +
                      "\",user=\"alice\",account=\"alice\",node=\"n1\",gpu=\"" + gpu0 +
                      "\"} 2147483648"),
            std::string::npos)
      << text;
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no promtool (apt-get install prometheus)";
  }
  const std::string path = dir_.path() + "/scrape.txt";
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  const int rc = std::system(
      ("promtool check metrics < " + path + " > " + path + ".out 2>&1").c_str());
  std::string said;
  if (std::FILE* o = std::fopen((path + ".out").c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, o)) > 0) said.append(buf, n);
    std::fclose(o);
  }
  EXPECT_EQ(rc, 0) << said;
  EXPECT_EQ(said, "");
  // A job's series leave with it.
  h->Exit("n1", id, 0);
  EXPECT_EQ(
      h->c().cluster_views().MetricsText().find("hachi_job_gpu_utilization_percent{"),
      std::string::npos);
}

}  // namespace
}  // namespace hachi::server
