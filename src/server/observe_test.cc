// What the controller tells about itself, end to end: jobs run, then /metrics is
// scraped (parsed strictly, values checked), GET /jobs/ID carries the explanation and
// GET /stats the likely cause of a slow partition.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "server/controller_metrics.h"
#include "server/http_api.h"
#include "server/prometheus_testing.h"
#include "server/testing.h"

namespace hachi::server {
namespace {

using nlohmann::json;
using testing::Harness;
using testing::MakeSubmit;
using testing::ParseScrape;
using testing::Scrape;

// Two 8-GPU nodes. A (5 GPUs) and B (6) run, one free GPU of A's node is taken out of
// service, then C, E, F (4 GPUs each) and D (8) wait: 2 + 2 GPUs are free, on no node 4.
ControllerOptions OnClock(const Clock* clock) {
  ControllerOptions o;
  o.clock = clock;
  return o;
}

struct Fragmented {
  FakeClock clock;  // before h, which reads it
  Harness h{OnClock(&clock)};
  state::JobId a = 0, b = 0, c = 0, d = 0, e = 0, f = 0;
  std::string a_node;
  int bad_gpu = -1;

  Fragmented() {
    h.Register("n1");
    h.Register("n2");
    a = h.Submit(MakeSubmit().Gpus(5).Time(3600));
    b = h.Submit(MakeSubmit().Gpus(6).Time(7200));
    h->RunCycle();
    const state::JobRecord ja = h.Job(a);
    EXPECT_EQ(ja.state, state::JobState::kRunning);
    EXPECT_EQ(h.StateOf(b), state::JobState::kRunning);
    a_node = ja.allocations.at(0).node;
    for (int g = 0; g < 8 && bad_gpu < 0; ++g) {
      if (!ja.allocations[0].gpus.contains(g)) bad_gpu = g;
    }
    api::AgentHealth health;
    api::GpuHealthEvent ev;
    ev.gpu = bad_gpu;
    ev.kind = "xid";
    ev.xid = 79;
    ev.fault = "fatal";
    ev.message = "Xid 79: GPU has fallen off the bus";
    health.events.push_back(ev);
    EXPECT_TRUE(h->nodes().ReportHealth(a_node, health).ok());
    c = h.Submit(MakeSubmit().Gpus(4).Time(600));
    d = h.Submit(MakeSubmit().Gpus(8).Time(600));
    e = h.Submit(MakeSubmit().Gpus(4).Time(600));
    f = h.Submit(MakeSubmit().Gpus(4).Time(600));
    h->RunCycle();
  }
  std::string other_node() const { return a_node == "n1" ? "n2" : "n1"; }
};

TEST(Metrics, ScrapeReportsTheClusterAndTheLoop) {
  Fragmented x;
  const Scrape s = ParseScrape(x.h->cluster_views().MetricsText());
  ASSERT_EQ(s.error, "") << x.h->cluster_views().MetricsText();
  const std::string n = x.a_node;
  EXPECT_EQ(s.Value("hachi_node_gpus", {{"node", n}, {"state", "total"}}), 8);
  EXPECT_EQ(s.Value("hachi_node_gpus", {{"node", n}, {"state", "allocated"}}), 5);
  EXPECT_EQ(s.Value("hachi_node_gpus", {{"node", n}, {"state", "unhealthy"}}), 1);
  EXPECT_EQ(
      s.Value("hachi_node_gpus", {{"node", x.other_node()}, {"state", "allocated"}}), 6);
  EXPECT_EQ(
      s.Value("hachi_partition_gpus", {{"partition", "default"}, {"state", "total"}}),
      16);
  EXPECT_EQ(
      s.Value("hachi_partition_gpus", {{"partition", "default"}, {"state", "allocated"}}),
      11);
  EXPECT_EQ(
      s.Value("hachi_partition_gpus", {{"partition", "default"}, {"state", "unhealthy"}}),
      1);
  // C, E, F need 4 on one node: the 2 free on each node serve none of them.
  EXPECT_EQ(s.Value("hachi_fragmented_gpus", {{"partition", "default"}}), 4);
  EXPECT_EQ(s.Value("hachi_jobs", {{"state", "RUNNING"}}), 2);
  EXPECT_EQ(s.Value("hachi_jobs", {{"state", "PENDING"}}), 4);
  EXPECT_EQ(s.Value("hachi_jobs", {{"state", "COMPLETED"}}), 0);
  EXPECT_EQ(s.Value("hachi_jobs_held"), 0);
  EXPECT_EQ(s.Value("hachi_node_state", {{"node", n}, {"state", "up"}}), 1);
  EXPECT_EQ(s.Value("hachi_node_state", {{"node", n}, {"state", "down"}}), 0);
  EXPECT_EQ(s.Value("hachi_submits_total"), 6);
  EXPECT_EQ(s.Value("hachi_starts_total"), 2);
  EXPECT_EQ(s.Value("hachi_cycles_total"), 2);
  EXPECT_EQ(s.Value("hachi_cycle_duration_seconds_count"), 2);
  EXPECT_EQ(s.Value("hachi_plan_apply_seconds_count"), 2);
  EXPECT_GT(s.Value("hachi_cycle_duration_seconds_sum"), 0);
  // One commit per submit, the cycle's starts, the health edit; registrations too.
  EXPECT_GE(s.Value("hachi_store_commit_seconds_count"), 6 + 1 + 1);
  // A and B waited less than a second (submitted and started at once).
  for (const char* gpus : {"5", "6"}) {
    EXPECT_EQ(s.Value("hachi_queue_wait_seconds_count",
                      {{"partition", "default"}, {"gpus", gpus}}),
              1)
        << gpus;
    EXPECT_EQ(s.Value("hachi_queue_wait_seconds_bucket",
                      {{"partition", "default"}, {"gpus", gpus}, {"le", "1"}}),
              1);
  }
  EXPECT_TRUE(std::isnan(s.Value("hachi_queue_wait_seconds_count",
                                 {{"partition", "default"}, {"gpus", "4"}})));
  const double age = s.Value("hachi_agent_heartbeat_age_seconds", {{"node", n}});
  EXPECT_GE(age, 0);
  EXPECT_LT(age, 60);
  EXPECT_EQ(s.Value("hachi_build_info", {{"version", HACHI_TEST_VERSION}}), 1);
  EXPECT_EQ(s.types.at("hachi_queue_wait_seconds"), "histogram");
  EXPECT_EQ(s.types.at("hachi_starts_total"), "counter");

  // The run ends: counted as completed, its GPUs free again.
  x.h.Exit(x.a_node, x.a, 0);
  const Scrape after = ParseScrape(x.h->cluster_views().MetricsText());
  ASSERT_EQ(after.error, "");
  EXPECT_EQ(after.Value("hachi_jobs", {{"state", "COMPLETED"}}), 1);
  EXPECT_EQ(after.Value("hachi_node_gpus", {{"node", n}, {"state", "allocated"}}), 0);
  // 7 healthy GPUs free on A's node now: C, E and F fit there, nothing is stranded... but
  // the other node's 2 still cannot serve a 4-GPU job.
  EXPECT_EQ(after.Value("hachi_fragmented_gpus", {{"partition", "default"}}), 2);
}

TEST(Metrics, ReleasedJobWaitsFromItsRelease) {
  FakeClock clock;
  Harness h(OnClock(&clock));
  h.Register("n1");
  const state::JobId id = h.Submit(MakeSubmit().Gpus(1).Hold());
  clock.Advance(std::chrono::seconds(2));  // a wait if from submit
  ASSERT_TRUE(h->jobs().Hold(id, false, testing::kAlice).ok());
  h->RunCycle();
  ASSERT_EQ(h.StateOf(id), state::JobState::kRunning);
  EXPECT_EQ(h.Job(id).start_time - h.Job(id).submit_time, 2) << "the controller's clock";
  const Scrape s = ParseScrape(h->cluster_views().MetricsText());
  ASSERT_EQ(s.error, "");
  EXPECT_EQ(s.Value("hachi_queue_wait_seconds_bucket",
                    {{"partition", "default"}, {"gpus", "1"}, {"le", "1"}}),
            1)
      << "the wait runs from the release, not from the submit 2 s earlier";
}

TEST(Explain, PendingJobWithNumbers) {
  Fragmented x;
  Result<report::JobExplain> r = x.h->job_views().Explain(x.c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const report::JobExplain& e = *r;
  EXPECT_EQ(e.state, "PENDING");
  EXPECT_EQ(e.reason, "Fragmented");
  EXPECT_NE(e.diagnosis.find("needs 4 GPUs on one node"), std::string::npos)
      << e.diagnosis;
  EXPECT_EQ(e.partition, "default");
  EXPECT_EQ(e.needed_gpus, 4);
  EXPECT_EQ(e.queue_length, 4);
  EXPECT_EQ(e.partition_length, 4);
  EXPECT_GE(e.queue_position, 1);
  EXPECT_LE(e.queue_position, 4);
  EXPECT_EQ(e.partition_position, e.queue_position);
  EXPECT_EQ(e.largest_free, 2);
  EXPECT_EQ(e.free_gpus, 4);
  EXPECT_EQ(e.fitting_nodes, 0);
  ASSERT_EQ(e.nodes.size(), 1u);
  EXPECT_EQ(e.nodes[0].reason, "busy");
  EXPECT_EQ(e.nodes[0].count, 2);
  EXPECT_EQ(e.nodes[0].text, "2 nodes: busy (largest free set 2 GPUs < 4)");
  // Backfill reserved for it: when A (1 h) or B (2 h) reaches its limit.
  EXPECT_GT(e.earliest_start, e.as_of);
  EXPECT_FALSE(e.earliest_node.empty());
  EXPECT_TRUE(e.blocking_job == x.a || e.blocking_job == x.b) << e.blocking_job;
  ASSERT_EQ(e.history.size(), 1u);
  EXPECT_EQ(e.history[0].event, "submitted");

  // Every pending job has its own position: 1..4, once each.
  std::set<int> positions;
  for (state::JobId id : {x.c, x.d, x.e, x.f})
    positions.insert(x.h->job_views().Explain(id)->queue_position);
  EXPECT_EQ(positions, (std::set<int>{1, 2, 3, 4}));
}

TEST(Explain, RunningAndFinishedJobsHaveAHistory) {
  Fragmented x;
  Result<report::JobExplain> running = x.h->job_views().Explain(x.a);
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(running->reason, "");
  EXPECT_TRUE(running->nodes.empty());
  ASSERT_EQ(running->history.size(), 3u);
  EXPECT_EQ(running->history[1].event, "started");
  EXPECT_NE(running->history[1].text.find("started on " + x.a_node + " (GPUs "),
            std::string::npos)
      << running->history[1].text;
  EXPECT_EQ(running->history[2].event, "time_limit");
  x.h.Exit(x.a_node, x.a, 3);
  Result<report::JobExplain> done = x.h->job_views().Explain(x.a);
  ASSERT_TRUE(done.ok());
  ASSERT_EQ(done->history.size(), 3u);
  EXPECT_EQ(done->history[2].event, "ended");
  EXPECT_EQ(done->history[2].text.rfind("ended FAILED (exit code 3): exit code 3", 0), 0u)
      << done->history[2].text;
  EXPECT_EQ(x.h->job_views().Explain(999).status().code(), StatusCode::kNotFound);
}

// The same through HTTP: /metrics as Prometheus reads it, the explain object, the cause.
TEST(ObserveHttp, MetricsExplainAndStatsCause) {
  Fragmented x;
  HttpOptions o;
  o.listen = "127.0.0.1:0";
  o.threads = 4;
  HttpServer http(&x.h.c(), o);
  ASSERT_TRUE(http.Start().ok());
  httplib::Client cl("127.0.0.1", http.port());
  {
    httplib::Result r = cl.Get("/metrics");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type"),
              "text/plain; version=0.0.4; charset=utf-8");
    const Scrape s = ParseScrape(r->body);
    ASSERT_EQ(s.error, "");
    EXPECT_EQ(s.Value("hachi_fragmented_gpus", {{"partition", "default"}}), 4);
    EXPECT_EQ(s.Value("hachi_jobs", {{"state", "PENDING"}}), 4);
  }
  {
    httplib::Result r = cl.Get("/api/v1/jobs/" + std::to_string(x.c));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json j = json::parse(r->body);
    ASSERT_TRUE(j.contains("explain")) << r->body;
    EXPECT_EQ(j["explain"]["reason"], "Fragmented");
    EXPECT_EQ(j["explain"]["largest_free"], 2);
    EXPECT_EQ(j["explain"]["nodes"][0]["text"],
              "2 nodes: busy (largest free set 2 GPUs < 4)");
    EXPECT_TRUE(j.contains("diagnosis"));
    // A long poll (`hachi run` waiting) is answered without the explanation.
    r = cl.Get("/api/v1/jobs/" + std::to_string(x.c) + "?wait_from=RUNNING&wait_ms=0");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_FALSE(json::parse(r->body).contains("explain")) << r->body;
  }
  // The pending jobs' waits pass one second: with ?alert=1 the partition is flagged.
  x.clock.Advance(std::chrono::seconds(2));
  {
    httplib::Result r = cl.Get("/api/v1/stats?alert=1");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json j = json::parse(r->body);
    const json& p = j["partitions"][0];
    EXPECT_EQ(p["all"]["partition"], "default");
    ASSERT_TRUE(p["alert"].get<bool>()) << p.dump();
    EXPECT_EQ(p["load"]["pending_jobs"], 4);
    EXPECT_EQ(p["load"]["fragmented_jobs"], 3);
    EXPECT_EQ(p["load"]["free_gpus"], 4);
    EXPECT_EQ(p["load"]["largest_free"], 2);
    ASSERT_GE(p["causes"].size(), 1u);
    EXPECT_EQ(p["causes"][0]["kind"], "fragmentation");
    EXPECT_EQ(
        p["causes"][0]["text"],
        "3 of 4 pending jobs fit the partition's 4 free GPUs in all but no node has "
        "enough of them together (largest free set 2 on " +
            p["load"]["largest_free_node"].get<std::string>() + " < 4 needed)");
  }
  http.Stop();
}

// promtool (Debian's prometheus package) agrees the scrape is valid and lint-clean:
// run when HACHI_PROMTOOL names it or it is on PATH.
TEST(ObserveHttp, PromtoolChecksTheScrape) {
  std::string tool;
  if (const char* t = std::getenv("HACHI_PROMTOOL"); t != nullptr && *t != '\0') {
    tool = t;
  } else if (std::system("command -v promtool >/dev/null 2>&1") == 0) {
    tool = "promtool";
  } else {
    GTEST_SKIP() << "no promtool (apt-get install prometheus, or set HACHI_PROMTOOL)";
  }
  Fragmented x;
  x.h.Exit(x.a_node, x.a, 0);  // a finished job too
  const std::string path = ::testing::TempDir() + "/hachi-scrape.txt";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    const std::string text = x.h->cluster_views().MetricsText();
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  const std::string out = path + ".out";
  const int rc =
      std::system((tool + " check metrics < " + path + " > " + out + " 2>&1").c_str());
  std::string said;
  if (std::FILE* f = std::fopen(out.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) said.append(buf, n);
    std::fclose(f);
  }
  EXPECT_EQ(rc, 0) << said;
  EXPECT_EQ(said, "");
}

}  // namespace
}  // namespace hachi::server
