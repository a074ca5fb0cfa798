// End-to-end tests of `hachi sim`: the real binary on the checked-in traces. Checks the
// JSON contract (keys, by-GPU maps), the text table, exit codes and errors.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_testing.h"
#include "core/testing/paths.h"

namespace {

using hachi::cli::testing::CmdResult;

// stdout only unless `with_stderr`: the JSON must parse even when progress is printed.
CmdResult Hachi(const std::string& args, bool with_stderr = false) {
  return hachi::cli::testing::Hachi(args, with_stderr);
}

std::string Trace(const std::string& name) {
  return hachi::SourceDir() + "/testdata/traces/" + name;
}

std::string Example(const std::string& name) {
  return hachi::SourceDir() + "/examples/" + name;
}

// Writes `text` to a file under the test's temporary directory; returns its path.
std::string WriteConfig(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(SimCmdTest, JsonHasTheContract) {
  CmdResult r = Hachi("sim --trace " + Trace("philly_first2000.csv") +
                      " --policy easy --cluster 32x8:hgx-h100 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  for (const char* key :
       {"jobs", "wait_mean_s", "wait_p50_s", "wait_p95_s", "wait_p99_s", "jct_mean_s",
        "makespan_s", "gpu_utilization", "wait_p50_s_by_gpus", "wait_p95_s_by_gpus",
        "cycle_ms_p50", "cycle_ms_p99", "cycles", "wall_s", "policy", "cluster",
        "time_limits"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["jobs"], 2000);
  EXPECT_EQ(j["policy"], "easy");
  EXPECT_EQ(j["cluster"], "32x8:hgx-h100");
  EXPECT_EQ(j["time_limits"], "rounded");
  for (const char* bucket : {"1", "2", "4", "8", ">8"}) {
    EXPECT_TRUE(j["wait_p95_s_by_gpus"].contains(bucket)) << bucket;
  }
  EXPECT_GT(j["gpu_utilization"].get<double>(), 0);
  EXPECT_LE(j["gpu_utilization"].get<double>(), 1);
}

TEST(SimCmdTest, GenericCsvWithHandWorkedWaits) {
  // testdata/traces/README.md: waits 0, 99, 198, 197 (fifo); easy + exact backfills
  // job 3.
  struct Case {
    const char* name;
    std::string flags;
    double wait_mean;
  };
  const Case cases[] = {
      {"fifo", "--policy fifo", (0 + 99 + 198 + 197) / 4.0},
      {"easy exact", "--policy easy --time-limits exact", (0 + 99 + 0 + 197) / 4.0},
      {"easy rounded", "--policy easy", (0 + 99 + 198 + 197) / 4.0},
  };
  for (const Case& c : cases) {
    CmdResult r = Hachi("sim --trace " + Trace("tiny.csv") + " --cluster 1x8:hgx-h100 " +
                        c.flags + " --json");
    ASSERT_EQ(r.exit_code, 0) << c.name << ": " << r.out;
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_DOUBLE_EQ(j["wait_mean_s"].get<double>(), c.wait_mean) << c.name;
    EXPECT_TRUE(j["wait_p95_s_by_gpus"]["1"].is_null()) << c.name;  // no 1-GPU job
    EXPECT_EQ(j["jobs_by_gpus"]["1"], 0) << c.name;
    EXPECT_EQ(j["jobs_by_gpus"]["2"], 2) << c.name;
    EXPECT_EQ(j["jobs"], 4) << c.name;
  }
}

TEST(SimCmdTest, TextTableAndMaxJobs) {
  CmdResult r = Hachi("sim --trace " + Trace("philly_first2000.csv") +
                      " --policy fifo --max-jobs 300 --format philly");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* want :
       {"policy fifo on 96x8:hgx-h100 (768 GPUs)", "300 of 300 jobs", "wait",
        "job completion time", "5-8 GPUs", "GPU utilisation", "cycles", "wall"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
}

TEST(SimCmdTest, BadInputIsExitTwoWithTheReason) {
  struct Case {
    const char* name;
    std::string args;
    const char* want;
  };
  const std::string tiny = Trace("tiny.csv");
  const Case cases[] = {
      {"missing trace", "sim --trace /nonexistent.csv", "/nonexistent.csv"},
      {"bad cluster", "sim --trace " + tiny + " --cluster 4x4:hgx-h100",
       "preset hgx-h100 has 8 GPUs, not 4"},
      {"unknown preset", "sim --trace " + tiny + " --cluster 4x8:nope", "nope"},
      {"unknown policy", "sim --trace " + tiny + " --policy lottery", "lottery"},
      {"bad limits", "sim --trace " + tiny + " --time-limits guess", "--time-limits"},
      {"bad format", "sim --trace " + tiny + " --format xml", "--format"},
      {"wrong format", "sim --trace " + tiny + " --format philly", "tiny.csv:1: header"},
      {"missing config", "sim --trace " + tiny + " --config /nonexistent.toml",
       "/nonexistent.toml"},
      {"bad config",
       "sim --trace " + tiny + " --config " +
           WriteConfig(
               "bad.toml",
               "[[partition]]\nname = \"p\"\nnodes = \"all\"\nmax_time = \"9x\"\n"),
       "bad.toml:4: partition[0].max_time: '9x' is not a duration (use 30m, 4h, 7d)"},
      {"config names unknown nodes",
       "sim --trace " + tiny + " --cluster 2x8:hgx-h100 --config " +
           Example("day-night.toml"),
       "day-night.toml:10: partition[0].nodes: no node 'n0003'"},
      {"bad start time", "sim --trace " + tiny + " --start-time yesterday",
       "--start-time: 'yesterday'"},
  };
  for (const Case& c : cases) {
    CmdResult r = Hachi(c.args, true);
    EXPECT_EQ(r.exit_code, 2) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(c.want), std::string::npos) << c.name << ": " << r.out;
  }
}

// Partitions (config): the day/night example on the Philly sample, with the
// clock at the trace's first timestamp (2017-09-04 10:30:41 UTC).
TEST(SimCmdTest, DayNightConfigOnPhilly) {
  CmdResult r = Hachi("sim --trace " + Trace("philly_first2000.csv") + " --config " +
                      Example("day-night.toml") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["jobs"], 2000);
  EXPECT_EQ(j["rejected"], 0);
  EXPECT_EQ(j["config"], Example("day-night.toml"));
  EXPECT_EQ(j["start_time"], 1504521041);

  CmdResult text = Hachi("sim --trace " + Trace("philly_first2000.csv") + " --config " +
                         Example("day-night.toml") + " --max-jobs 200");
  ASSERT_EQ(text.exit_code, 0) << text.out;
  EXPECT_NE(text.out.find("trace time 0 is 2017-09-04 10:30:41 UTC"), std::string::npos)
      << text.out;
}

TEST(SimCmdTest, StartTimeAndAccountRouting) {
  // Account "speech" is routed to a 1-GPU partition: its 8- and 2-GPU jobs are refused.
  const std::string config = WriteConfig("route.toml", R"(
[[partition]]
name = "main"
nodes = "all"
[[partition]]
name = "tiny"
nodes = "all"
max_gpus = 1
[sim]
account_partitions = { speech = "tiny" }
)");
  struct Case {
    const char* name;
    std::string start;
    int64_t want;
  };
  const Case cases[] = {
      {"ISO 8601 UTC", "2017-10-03T00:00:00Z", 1506988800},
      {"seconds", "86400", 86400},
      {"csv default", "", 0},
  };
  for (const Case& c : cases) {
    CmdResult r = Hachi("sim --trace " + Trace("tiny.csv") + " --cluster 1x8:hgx-h100 " +
                        "--config " + config + " --json" +
                        (c.start.empty() ? "" : " --start-time " + c.start));
    ASSERT_EQ(r.exit_code, 0) << c.name << ": " << r.out;
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["start_time"], c.want) << c.name;
    EXPECT_EQ(j["rejected"], 2) << c.name;
    EXPECT_EQ(j["jobs"], 2) << c.name;
    EXPECT_NE(j["rejections"].dump().find("partition tiny"), std::string::npos)
        << c.name << ": " << j["rejections"].dump();
  }
}

// One node owned by an inference partition 08:00-20:00 (tier 2, preempts lower tiers);
// a 10-hour-limit training job, then an 8-GPU inference job a minute later.
TEST(SimCmdTest, ConfigDrivesPreemptionAndWindows) {
  const std::string trace =
      WriteConfig("pre.csv", R"(submit_s,duration_s,gpus,user,account,time_limit_s
0,3600,8,bob,research,36000
60,100,8,svc,inference,600
)");
  const std::string config = WriteConfig("dn1.toml", R"(
[[partition]]
name = "inference"
nodes = "n0001"
tier = 2
allowed_accounts = ["inference"]
preempt_lower_tiers = true
window = { start = "08:00", end = "20:00" }
[[partition]]
name = "training"
nodes = "all"
tier = 1
max_time = "90d"
)");
  struct Case {
    const char* name;
    const char* start;
    double wait_mean;
    int preemptions;
  };
  const Case cases[] = {
      // 21:00: training starts; inference preempts it (grace 5m) and starts at 360 s;
      // training is requeued and starts again at 460 s. Waits 300 and 460.
      {"night: preempted", "2017-10-03T21:00:00Z", (300 + 460) / 2.0, 1},
      // 07:00: the training job's limit runs into the window, so it waits for 20:00
      // (13 h); inference starts at once on its own node.
      {"morning: waits for the window to close", "2017-10-03T07:00:00Z", 46800 / 2.0, 0},
  };
  for (const Case& c : cases) {
    CmdResult r = Hachi("sim --trace " + trace + " --cluster 1x8:hgx-h100 --config " +
                        config + " --start-time " + c.start + " --json");
    ASSERT_EQ(r.exit_code, 0) << c.name << ": " << r.out;
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["jobs"], 2) << c.name;
    EXPECT_DOUBLE_EQ(j["wait_mean_s"].get<double>(), c.wait_mean) << c.name;
    EXPECT_EQ(j.value("preemptions", 0), c.preemptions) << c.name;
  }
}

}  // namespace

namespace {

TEST(SimCmdTest, WarnsAboutAPartitionMixingClasses) {
  CmdResult r = Hachi("sim --trace " + hachi::SourceDir() +
                          "/testdata/traces/philly_first2000.csv --max-jobs 50 "
                          "--cluster 8x8:hgx-h100,4x8:pcie-8x-l40s --json",
                      /*with_stderr=*/true);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("warning: partition default mixes interconnect classes "
                       "(8 nvswitch, 4 pcie-only nodes)"),
            std::string::npos)
      << r.out;
}

}  // namespace
