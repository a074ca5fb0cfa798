// End-to-end tests of `hachi sim`: the real binary on the checked-in traces. Checks the
// JSON contract of issue 3 (keys, by-GPU maps), the text table, exit codes and errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_testing.h"

namespace {

using hachi::cli::testing::CmdResult;

// stdout only unless `with_stderr`: the JSON must parse even when progress is printed.
CmdResult Hachi(const std::string& args, bool with_stderr = false) {
  return hachi::cli::testing::Hachi(args, with_stderr);
}

std::string Trace(const std::string& name) {
  return std::string(HACHI_SOURCE_DIR) + "/testdata/traces/" + name;
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
  };
  for (const Case& c : cases) {
    CmdResult r = Hachi(c.args, true);
    EXPECT_EQ(r.exit_code, 2) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(c.want), std::string::npos) << c.name << ": " << r.out;
  }
}

}  // namespace
