// Trace readers: Philly rows, sorting, time zero, gangs, the generic CSV and errors
// that name the file, line and field.
#include "sim/trace.h"

#include <gtest/gtest.h>

#include <string>

#include "core/testing/paths.h"

namespace hachi::sim {
namespace {

constexpr char kPhillyHeader[] = "timestamp,duration,num_gpus,gpu_time,cluster\n";

TEST(PhillyTraceTest, ReadsSampleRowsSortedWithTimeZeroAtFirstSubmit) {
  // Out of order, as in the real file; two rows share a time and keep file order.
  std::string text = std::string(kPhillyHeader) +
                     "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
                     "2017-10-09 06:13:03,2951.0,1,2951.0,6214e9\n"
                     "2017-10-09 07:01:55,10.5,16,168.0,6c71a0\n"
                     "2017-10-08 06:13:03,1.0,8,8.0,b436b2\n\n";
  Result<std::vector<TraceJob>> jobs = ParsePhillyTrace(text, "p.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 4u);
  const std::vector<TraceJob>& j = *jobs;
  EXPECT_EQ(j[0].submit, 0);
  EXPECT_EQ(j[0].gpus, 8);
  EXPECT_EQ(j[0].account, "b436b2");
  EXPECT_EQ(j[0].row, 5);
  EXPECT_EQ(j[1].submit, kDay);
  EXPECT_EQ(j[1].duration, 2951);
  EXPECT_EQ(j[2].submit, kDay + 48 * kMinute + 52);
  EXPECT_EQ(j[2].account, "11cb48");
  EXPECT_EQ(j[2].user, "11cb48");
  EXPECT_EQ(j[3].submit, j[2].submit);
  EXPECT_EQ(j[3].gpus, 16);
  EXPECT_EQ(j[3].duration, 11);  // 10.5 s rounds up
  for (size_t i = 0; i < j.size(); ++i) EXPECT_EQ(j[i].id, static_cast<int64_t>(i) + 1);
}

TEST(PhillyTraceTest, CheckedInSliceIsSortedAndComplete) {
  TraceFormat f = TraceFormat::kPhilly;
  Result<std::vector<TraceJob>> jobs =
      ReadTrace(SourceDir() + "/testdata/traces/philly_first2000.csv", &f);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 2000u);
  EXPECT_EQ(jobs->front().submit, 0);
  for (size_t i = 1; i < jobs->size(); ++i) {
    ASSERT_LE((*jobs)[i - 1].submit, (*jobs)[i].submit) << i;
  }
}

TEST(TraceFormatTest, DetectedFromHeader) {
  struct Case {
    const char* name;
    const char* text;
    bool ok;
    TraceFormat want;
  };
  const Case cases[] = {
      {"philly", "timestamp,duration,num_gpus,gpu_time,cluster\n", true,
       TraceFormat::kPhilly},
      {"csv", "submit_s,duration_s,gpus\n1,2,3\n", true, TraceFormat::kCsv},
      {"csv any order", "gpus,user,duration_s,submit_time\n", true, TraceFormat::kCsv},
      {"unknown", "a,b,c\n", false, TraceFormat::kCsv},
      {"empty", "", false, TraceFormat::kCsv},
  };
  for (const Case& c : cases) {
    Result<TraceFormat> f = DetectTraceFormat(c.text, "t.csv");
    EXPECT_EQ(f.ok(), c.ok) << c.name;
    if (c.ok && f.ok()) {
      EXPECT_EQ(*f, c.want) << c.name;
    }
  }
}

TEST(GangShapeTest, BigJobsBecomeEvenGangs) {
  struct Case {
    const char* name;
    int gpus;
    bool ok;
    int nodes, per_node;
  };
  const Case cases[] = {
      {"one gpu", 1, true, 1, 1},         {"whole server", 8, true, 1, 8},
      {"twelve", 12, true, 2, 6},         {"sixteen", 16, true, 2, 8},
      {"twenty-four", 24, true, 3, 8},    {"one-two-eight", 128, true, 16, 8},
      {"nine is uneven", 9, false, 0, 0}, {"zero", 0, false, 0, 0},
  };
  for (const Case& c : cases) {
    Result<GangShape> s = ShapeOf(c.gpus);
    ASSERT_EQ(s.ok(), c.ok) << c.name;
    if (!c.ok) continue;
    EXPECT_EQ(s->nodes, c.nodes) << c.name;
    EXPECT_EQ(s->gpus_per_node, c.per_node) << c.name;
  }
}

TEST(CsvTraceTest, ReadsColumnsByNameWithOptionalOnes) {
  const char* text =
      "user,gpus,submit_s,duration_s,time_limit_s,partition,extra\n"
      "alice,4,100,60,3600,gpu,x\n"
      "bob,1,40.7,1.2,,,y\n";
  Result<std::vector<TraceJob>> jobs = ParseCsvTrace(text, "g.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].user, "bob");
  EXPECT_EQ((*jobs)[0].account, "bob");  // no account column: the user pays
  EXPECT_EQ((*jobs)[0].submit, 0);
  EXPECT_EQ((*jobs)[0].duration, 2);
  EXPECT_EQ((*jobs)[0].time_limit, 0);
  EXPECT_EQ((*jobs)[1].submit, 60);  // 100 - floor(40.7)
  EXPECT_EQ((*jobs)[1].gpus, 4);
  EXPECT_EQ((*jobs)[1].partition, "gpu");
  EXPECT_EQ((*jobs)[1].time_limit, 3600);
}

TEST(CsvTraceTest, SubmitTimeMayBeADate) {
  Result<std::vector<TraceJob>> jobs = ParseCsvTrace(
      "submit_time,duration_s,gpus,account\n2020-03-01 00:00:10,5,1,a\n"
      "2020-02-29 23:59:50,5,2,b\n",
      "d.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  EXPECT_EQ((*jobs)[0].account, "b");
  EXPECT_EQ((*jobs)[1].submit, 20);  // across a leap day
}

TEST(TraceErrorTest, NameFileLineAndField) {
  struct Case {
    const char* name;
    TraceFormat format;
    std::string text;
    std::string want;  // substring of the message
  };
  const std::string ph = kPhillyHeader;
  const Case cases[] = {
      {"philly bad header", TraceFormat::kPhilly, "time,duration\n", "t.csv:1: header"},
      {"philly bad time", TraceFormat::kPhilly, ph + "2017-13-01 00:00:00,1,1,1,a\n",
       "t.csv:2: timestamp"},
      {"philly bad duration", TraceFormat::kPhilly,
       ph + "2017-10-01 00:00:00,1,1,1,a\n2017-10-01 00:00:00,abc,1,1,a\n",
       "t.csv:3: duration: 'abc'"},
      {"philly zero gpus", TraceFormat::kPhilly, ph + "2017-10-01 00:00:00,1,0,0,a\n",
       "t.csv:2: num_gpus"},
      {"philly uneven gang", TraceFormat::kPhilly, ph + "2017-10-01 00:00:00,1,9,9,a\n",
       "t.csv:2: num_gpus: 9 GPUs do not split evenly over 2 nodes"},
      {"philly short row", TraceFormat::kPhilly, ph + "2017-10-01 00:00:00,1,1\n",
       "t.csv:2: expected 5 fields"},
      {"philly no tenant", TraceFormat::kPhilly, ph + "2017-10-01 00:00:00,1,1,1,\n",
       "t.csv:2: cluster"},
      {"csv missing gpus", TraceFormat::kCsv, "submit_s,duration_s\n",
       "missing column gpus"},
      {"csv bad submit", TraceFormat::kCsv, "submit_s,duration_s,gpus\nsoon,1,1\n",
       "t.csv:2: submit_s: 'soon'"},
      {"csv negative duration", TraceFormat::kCsv, "submit_s,duration_s,gpus\n0,-5,1\n",
       "t.csv:2: duration_s"},
      {"csv limit below run time", TraceFormat::kCsv,
       "submit_s,duration_s,gpus,time_limit_s\n0,100,1,50\n", "t.csv:2: time_limit_s"},
      {"csv duplicate column", TraceFormat::kCsv, "gpus,gpus,submit_s,duration_s\n",
       "appears twice"},
  };
  for (const Case& c : cases) {
    Result<std::vector<TraceJob>> jobs = ParseTrace(c.text, "t.csv", c.format);
    ASSERT_FALSE(jobs.ok()) << c.name;
    EXPECT_NE(jobs.status().message().find(c.want), std::string::npos)
        << c.name << ": " << jobs.status().message();
  }
}

TEST(TraceErrorTest, MissingFileIsNotFound) {
  Result<std::vector<TraceJob>> jobs = ReadTrace("/nonexistent/trace.csv");
  ASSERT_FALSE(jobs.ok());
  EXPECT_EQ(jobs.status().code(), StatusCode::kNotFound);
  EXPECT_NE(jobs.status().message().find("/nonexistent/trace.csv"), std::string::npos);
}

}  // namespace
}  // namespace hachi::sim
