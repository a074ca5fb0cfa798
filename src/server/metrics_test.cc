// The metrics registry: rendering in the text format (golden text), escaping, values,
// histogram buckets, concurrent updates; and the strict format checker the scrape tests
// rely on, against texts it must refuse.
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "server/prometheus_testing.h"

namespace hachi::server::metrics {
namespace {

using server::testing::ParseScrape;

TEST(Metrics, RendersTheTextFormat) {
  Registry r;
  Family<Counter>& starts = r.AddCounter("t_starts_total", "Starts.");
  Family<Gauge>& gpus =
      r.AddGauge("t_gpus", "GPUs per node\nand state \\ (escaped).", {"node", "state"});
  Family<Histogram>& wait =
      r.AddHistogram("t_wait_seconds", "Waits.", {1, 2.5, 10}, {"partition"});
  r.AddGauge("t_unused", "A labelled family nobody set.", {"x"});
  starts.Get().Inc();
  starts.Get().Inc(2);
  gpus.With({"n2", "total"}).Set(8);
  gpus.With({"n1", "total"}).Set(8);
  gpus.With({"n1", "allocated"}).Set(3.5);
  gpus.With({"we\"ird\\n\name", "total"}).Set(-1);
  Histogram& h = wait.With({"gpu8"});
  for (double v : {0.5, 1.0, 2.0, 3.0, 100.0}) h.Observe(v);
  r.AddCollector([](Writer& w) {
    w.Begin("t_scraped", "Computed at scrape time.", Type::kGauge);
    w.Sample({{"a", "1"}}, 0.25);
    w.Sample({}, 1e-9);
  });
  EXPECT_EQ(r.Render(),
            "# HELP t_starts_total Starts.\n"
            "# TYPE t_starts_total counter\n"
            "t_starts_total 3\n"
            "# HELP t_gpus GPUs per node\\nand state \\\\ (escaped).\n"
            "# TYPE t_gpus gauge\n"
            "t_gpus{node=\"n1\",state=\"allocated\"} 3.5\n"
            "t_gpus{node=\"n1\",state=\"total\"} 8\n"
            "t_gpus{node=\"n2\",state=\"total\"} 8\n"
            "t_gpus{node=\"we\\\"ird\\\\n\\name\",state=\"total\"} -1\n"
            "# HELP t_wait_seconds Waits.\n"
            "# TYPE t_wait_seconds histogram\n"
            "t_wait_seconds_bucket{partition=\"gpu8\",le=\"1\"} 2\n"
            "t_wait_seconds_bucket{partition=\"gpu8\",le=\"2.5\"} 3\n"
            "t_wait_seconds_bucket{partition=\"gpu8\",le=\"10\"} 4\n"
            "t_wait_seconds_bucket{partition=\"gpu8\",le=\"+Inf\"} 5\n"
            "t_wait_seconds_sum{partition=\"gpu8\"} 106.5\n"
            "t_wait_seconds_count{partition=\"gpu8\"} 5\n"
            "# HELP t_unused A labelled family nobody set.\n"
            "# TYPE t_unused gauge\n"
            "# HELP t_scraped Computed at scrape time.\n"
            "# TYPE t_scraped gauge\n"
            "t_scraped{a=\"1\"} 0.25\n"
            "t_scraped 1e-09\n");
  // The checker reads it back: the escaped label value round-trips.
  const server::testing::Scrape s = ParseScrape(r.Render());
  ASSERT_EQ(s.error, "");
  EXPECT_EQ(s.Value("t_gpus", {{"node", "we\"ird\\n\name"}, {"state", "total"}}), -1);
  EXPECT_EQ(s.Value("t_wait_seconds_count", {{"partition", "gpu8"}}), 5);
}

TEST(Metrics, FormatValue) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(42), "42");
  EXPECT_EQ(FormatValue(0.005), "0.005");
  EXPECT_EQ(FormatValue(0.1 + 0.2),
            "0.30000000000000004");  // shortest exact, not rounded
  EXPECT_EQ(FormatValue(1e21), "1e+21");
  EXPECT_EQ(FormatValue(INFINITY), "+Inf");
  EXPECT_EQ(FormatValue(-INFINITY), "-Inf");
  EXPECT_EQ(FormatValue(NAN), "NaN");
}

TEST(Metrics, HistogramBucketsAreLessOrEqual) {
  Histogram h({1, 2});
  h.Observe(1);    // le=1
  h.Observe(1.5);  // le=2
  h.Observe(2);    // le=2
  h.Observe(-3);   // le=1
  h.Observe(9);    // +Inf only
  h.Observe(NAN);  // ignored
  EXPECT_EQ(h.Cumulative(), (std::vector<uint64_t>{2, 4, 5}));
  EXPECT_DOUBLE_EQ(h.sum(), 10.5);
  EXPECT_EQ(ExponentialBuckets(0.5, 2, 4), (std::vector<double>{0.5, 1, 2, 4}));
}

TEST(Metrics, ConcurrentUpdatesAreAllCounted) {
  Registry r;
  Counter& c = r.AddCounter("t_total", "x").Get();
  Family<Histogram>& f = r.AddHistogram("t_h", "x", {1}, {"k"});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Histogram& h = f.With({t % 2 ? "odd" : "even"});
      for (int i = 0; i < 10000; ++i) {
        c.Inc();
        h.Observe(i % 2);
      }
    });
  }
  std::string mid = r.Render();  // while they run: still valid text
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ParseScrape(mid).error, "");
  const server::testing::Scrape s = ParseScrape(r.Render());
  ASSERT_EQ(s.error, "");
  EXPECT_EQ(s.Value("t_total"), 40000);
  EXPECT_EQ(s.Value("t_h_count", {{"k", "odd"}}), 20000);
  EXPECT_EQ(s.Value("t_h_bucket", {{"k", "even"}, {"le", "1"}}), 20000);
  EXPECT_EQ(s.Value("t_h_sum", {{"k", "even"}}), 10000);
}

TEST(Metrics, NameRules) {
  EXPECT_TRUE(ValidMetricName("hachi_gpus"));
  EXPECT_TRUE(ValidMetricName("a:b_c9"));
  EXPECT_FALSE(ValidMetricName("9a"));
  EXPECT_FALSE(ValidMetricName("a-b"));
  EXPECT_FALSE(ValidMetricName(""));
  EXPECT_TRUE(ValidLabelName("_x1"));
  EXPECT_FALSE(ValidLabelName("a:b"));
}

struct BadText {
  const char* name;
  const char* text;
};

TEST(ScrapeChecker, RefusesInvalidText) {
  const BadText rows[] = {
      {"bad name", "9x 1\n"},
      {"bad label name", "x{a-b=\"1\"} 1\n"},
      {"unquoted label", "x{a=1} 1\n"},
      {"bad escape", "x{a=\"\\t\"} 1\n"},
      {"bad value", "x 1.2.3\n"},
      {"no newline at the end", "x 1"},
      {"TYPE twice", "# TYPE x gauge\n# TYPE x gauge\nx 1\n"},
      {"TYPE after samples", "x 1\n# TYPE x gauge\n"},
      {"family split", "# TYPE x gauge\nx{a=\"1\"} 1\ny 1\nx{a=\"2\"} 1\n"},
      {"duplicate series", "x{a=\"1\"} 1\nx{a=\"1\"} 2\n"},
      {"negative counter", "# TYPE x counter\nx -1\n"},
      {"no +Inf bucket",
       "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n"},
      {"count is not +Inf",
       "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n"},
      {"buckets decrease",
       "# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\n"
       "h_count 2\n"},
  };
  for (const BadText& r : rows) {
    EXPECT_NE(ParseScrape(r.text).error, "") << r.name;
  }
  EXPECT_EQ(ParseScrape("# HELP x a\n# TYPE x gauge\nx{a=\"\\\"\"} 1 1700000000\n").error,
            "");
}

}  // namespace
}  // namespace hachi::server::metrics
