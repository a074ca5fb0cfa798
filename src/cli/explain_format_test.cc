// `hachi explain` / the "Explain:" block of `hachi show job`: fixed explanations, TZ=UTC,
// compared with src/cli/testdata/explain.txt (HACHI_UPDATE_GOLDEN=1 rewrites it); and
// the explain object's JSON read back as the server wrote it.
#include "cli/explain_format.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "cli/golden_testing.h"
#include "core/strings.h"

namespace hachi::cli {
namespace {

constexpr Time kCycle = 1764594000;  // 2025-12-01T13:00:00Z

report::JobExplain Pending() {
  report::JobExplain e;
  e.job = 3150;
  e.state = "PENDING";
  e.as_of = kCycle + 5;
  e.reason = "Fragmented";
  e.diagnosis =
      "needs 4 GPUs on one node; largest free set is 3 (node gpu04), 9 free in all; "
      "earliest "
      "start 14:20 on gpu02 when job 3137 hits its time limit";
  e.diagnosed_at = kCycle;
  e.partition = "gpu-shared";
  e.queue_position = 5;
  e.queue_length = 41;
  e.partition_position = 2;
  e.partition_length = 12;
  e.needed_gpus = 4;
  e.largest_free = 3;
  e.largest_free_node = "gpu04";
  e.free_gpus = 9;
  e.nodes = {{"busy", 6, 3, "6 nodes: busy (largest free set 3 GPUs < 4)"},
             {"drained", 2, -1, "2 nodes: drained"},
             {"not_in_partition", 8, -1, "8 nodes: not in partition gpu-shared"}};
  e.earliest_start = kCycle + 80 * 60;
  e.earliest_node = "gpu02";
  e.blocking_job = 3137;
  e.history = {{kCycle - 600, "submitted", "submitted to partition gpu-shared (4 GPUs)"},
               {0, "requeued",
                "requeued 1 time (last: node gpu07 down: agent silent for more "
                "than 30s)"}};
  return e;
}

report::JobExplain Gang() {
  report::JobExplain e;
  e.job = 3160;
  e.state = "PENDING";
  e.as_of = kCycle + 5;
  e.reason = "Resources";
  e.diagnosis = "needs 2 nodes with 8 GPUs each; no GPU is free";
  e.partition = "gpu8";
  e.needed_gpus = 8;
  e.needed_nodes = 2;
  e.nodes = {{"busy", 4, 0, "4 nodes: busy (largest free set 0 GPUs < 8)"}};
  e.history = {
      {kCycle - 60, "submitted", "submitted to partition gpu8 (16 GPUs on 2 nodes)"}};
  return e;  // no cycle has seen it, no reservation
}

// A GPU share of bob's: every shared GPU with room holds alice's shares (an MPS server
// serves one user per GPU), the other node has no free GPU.
report::JobExplain OtherUsersShares() {
  report::JobExplain e;
  e.job = 3170;
  e.state = "PENDING";
  e.as_of = kCycle + 5;
  e.reason = "MpsOtherUser";
  e.diagnosis =
      "needs a 0.25 share of one GPU; 3 shared GPUs with room hold other users' shares "
      "(MPS serves one user per GPU)";
  e.diagnosed_at = kCycle;
  e.partition = "gpu-shared";
  e.queue_position = 1;
  e.queue_length = 1;
  e.partition_position = 1;
  e.partition_length = 1;
  e.needed_gpus = 1;
  e.gpu_share_milli = 250;
  e.nodes = {{"busy", 1, 0, "1 node: busy (largest free set 0 GPUs < 1)"},
             {"other_user", 2, -1,
              "2 nodes: 3 shared GPUs with room hold other users' shares (MPS serves "
              "one user per GPU)"}};
  e.history = {
      {kCycle - 120, "submitted", "submitted to partition gpu-shared (a GPU share)"}};
  return e;
}

report::JobExplain Finished() {
  report::JobExplain e;
  e.job = 3099;
  e.state = "FAILED";
  e.as_of = kCycle;
  e.partition = "gpu8";
  e.needed_gpus = 4;
  e.history = {
      {kCycle - 7200, "submitted", "submitted to partition gpu8 (4 GPUs)"},
      {kCycle - 7080, "started", "started on gpu03 (GPUs 0-3) after waiting 2m00s"},
      {kCycle - 7030, "ended",
       "ended FAILED (exit code 1): exit code 1 after running 50s"}};
  return e;
}

TEST(FormatExplain, Golden) {
  setenv("TZ", "UTC", 1);
  tzset();
  std::string out;
  out += "$ hachi explain 3150\n" + FormatExplain(Pending(), "", true) + "\n";
  out += "$ hachi explain 3160\n" + FormatExplain(Gang(), "", true) + "\n";
  out += "$ hachi explain 3170\n" + FormatExplain(OtherUsersShares(), "", true) + "\n";
  out += "$ hachi explain 3099\n" + FormatExplain(Finished(), "", true) + "\n";
  out += "$ hachi show job 3150 (after the Diagnosis)\n   Explain:\n" +
         FormatExplain(Pending(), "     ", false);
  testing::ExpectGolden("explain.txt", out);
}

TEST(JobExplainJson, RoundTripAndErrors) {
  const report::JobExplain e = Pending();
  const std::string text = report::JobExplainToJson(e);
  Result<report::JobExplain> back = report::JobExplainFromJson(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(report::JobExplainToJson(*back), text);
  EXPECT_EQ(FormatExplain(*back, "", true), FormatExplain(e, "", true));
  Result<report::JobExplain> bad =
      report::JobExplainFromJson(R"({"queue_position": "x"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "explain.queue_position: expected an integer");
  bad = report::JobExplainFromJson(R"({"nodes": [{"count": 1.5}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "explain.nodes[0].count: expected an integer");
  EXPECT_TRUE(report::JobExplainFromJson(R"({"job": 1, "a_newer_field": true})").ok());
}

}  // namespace
}  // namespace hachi::cli
