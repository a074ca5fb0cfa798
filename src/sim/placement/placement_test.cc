// Unit tests of the openb placement benchmark: Go's generator, the CSV readers, FGD's
// fragmentation measure on hand-worked nodes, and the protocol's event list.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/testing/paths.h"
#include "sim/placement/bench.h"
#include "sim/placement/frag.h"
#include "sim/placement/go_rand.h"
#include "sim/placement/openb.h"

namespace hachi::placement {
namespace {

const std::string kDir = SourceDir() + "/testdata/openb/traces/alibaba-openb-gpu-v2023";

// Go's documented outputs for rand.Seed(1): the first Int63, and Intn(100) ...
TEST(GoRand, MatchesGoForSeedOne) {
  EXPECT_EQ(GoRand(1).Int63(), 5577006791947779410);
  GoRand r(1);
  std::vector<int> got;
  for (int i = 0; i < 5; ++i) got.push_back(r.Intn(100));
  EXPECT_EQ(got, (std::vector<int>{81, 87, 47, 59, 81}));
}

TEST(GoRand, PermIsAPermutationAndSeeded) {
  GoRand a(42), b(42), c(43);
  const auto pa = a.Perm(50);
  EXPECT_EQ(pa, b.Perm(50));
  EXPECT_NE(pa, c.Perm(50));
  auto sorted = pa;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sorted[i], i);
}

struct FragRow {
  std::string name;
  std::vector<TypicalTask> tasks;
  NodeView node;
  double want;
};

NodeView Node(int64_t cpu, std::vector<int> free, int model = 0) {
  NodeView v;
  v.model = model;
  v.cpu_left = cpu;
  v.gpus = static_cast<int>(free.size());
  for (size_t g = 0; g < free.size(); ++g) v.free[g] = free[g];
  return v;
}

// Tasks: cpu, gpu_milli, num_gpu, spec mask, frequency.
const TypicalTask kHalf{1000, 500, 1, 0, 0.5};
const TypicalTask kWhole{1000, 1000, 1, 0, 0.5};

class FragTable : public ::testing::TestWithParam<FragRow> {};

TEST_P(FragTable, MatchesHandWorkedValue) {
  const FragRow& r = GetParam();
  EXPECT_DOUBLE_EQ(NodeFrag(r.node, r.tasks), r.want);
  FragCache cache(r.tasks);
  EXPECT_DOUBLE_EQ(cache.Frag(r.node), r.want);
  EXPECT_DOUBLE_EQ(cache.Frag(r.node), r.want);  // the memoised value
}

INSTANTIATE_TEST_SUITE_P(
    Rows, FragTable,
    ::testing::Values(
        // Both tasks fit on GPU 0; the 300 left on GPU 1 fits neither: 0.5·300 + 0.5·300.
        FragRow{"TasksFitOnlyTheFullGpu", {kHalf, kWhole}, Node(8000, {1000, 300}), 300},
        // Nothing fits: all 700 idle milli are fragments for both tasks.
        FragRow{"NoGpuFits", {kHalf, kWhole}, Node(8000, {400, 300}), 700},
        // 600 fits the half task (the 300 GPU is its fragment); the whole task
        // fits nowhere (900 idle): 0.5·300 + 0.5·900.
        FragRow{"MixedFit", {kHalf, kWhole}, Node(8000, {600, 300}), 600},
        // CPU-short: the GPUs would fit, but the node cannot host the task: all idle.
        FragRow{"CpuShortCountsAllIdle", {kHalf, kWhole}, Node(500, {1000, 300}), 1300},
        // A CPU-only task sees every idle GPU milli as a fragment.
        FragRow{"CpuOnlyTask", {{1000, 0, 0, 0, 1.0}}, Node(8000, {1000, 250}), 1250},
        // A task for model 1 on a model-0 node: all idle.
        FragRow{"OtherModel", {{1000, 500, 1, 0b10, 1.0}}, Node(8000, {1000, 300}), 1300},
        FragRow{
            "SameModel", {{1000, 500, 1, 0b10, 1.0}}, Node(8000, {1000, 300}, 1), 300},
        // Two whole GPUs: fits on 3 GPUs (the 600 one is the fragment), not on 2.
        FragRow{"TwoGpuTaskFits",
                {{1000, 1000, 2, 0, 1.0}},
                Node(8000, {1000, 1000, 600}),
                600},
        FragRow{"TwoGpuTaskDoesNot",
                {{1000, 1000, 2, 0, 1.0}},
                Node(8000, {1000, 600}),
                1600},
        FragRow{"FullNodeHasNone", {kHalf, kWhole}, Node(8000, {0, 0}), 0}),
    [](const auto& row) { return row.param.name; });

TEST(TypicalTasks, CoverNinetyFivePercentMostCommonFirst) {
  std::vector<OpenbPod> pods;
  auto add = [&](int n, int64_t cpu, int milli) {
    for (int i = 0; i < n; ++i) {
      OpenbPod p;
      p.cpu_milli = cpu;
      p.num_gpu = milli > 0;
      p.gpu_milli = milli;
      pods.push_back(p);
    }
  };
  add(60, 1000, 500);
  add(30, 2000, 1000);
  add(6, 4000, 0);
  add(4, 8000, 250);  // 60 + 30 + 6 = 96 % already: left out
  const auto tasks = TypicalTasks(pods);
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(tasks[0].gpu_milli, 500);
  EXPECT_DOUBLE_EQ(tasks[0].freq, 60.0 / 96);
  EXPECT_EQ(tasks[2].gpu_milli, 0);
  EXPECT_DOUBLE_EQ(tasks[2].freq, 6.0 / 96);
}

struct ParseRow {
  std::string name;
  std::string file;
  std::string want_error;  // empty: parses
};

class ParsePodsTable : public ::testing::TestWithParam<ParseRow> {};

TEST_P(ParsePodsTable, ReadsOrNamesFileLineField) {
  auto cluster = LoadNodes(kDir + "/openb_node_list_gpu_node.csv");
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  auto pods = LoadPods(kDir + "/" + GetParam().file, *cluster);
  if (GetParam().want_error.empty()) {
    EXPECT_TRUE(pods.ok()) << pods.status().ToString();
  } else {
    ASSERT_FALSE(pods.ok());
    EXPECT_NE(pods.status().message().find(GetParam().want_error), std::string::npos)
        << pods.status().message();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Rows, ParsePodsTable,
    ::testing::Values(ParseRow{"SixColumns", "openb_pod_list_tiny.csv", ""},
                      ParseRow{"FiveColumns", "openb_pod_list_fivecol.csv", ""},
                      ParseRow{"BadNumGpu", "openb_pod_list_badrow.csv",
                               "openb_pod_list_badrow.csv:3: num_gpu: 'one'"},
                      ParseRow{"Missing", "openb_pod_list_nope.csv", "nope"}),
    [](const auto& row) { return row.param.name; });

TEST(ParsePods, RejectsMultiGpuShares) {
  auto cluster = LoadNodes(kDir + "/openb_node_list_gpu_node.csv");
  ASSERT_TRUE(cluster.ok());
  auto pods = ParsePods("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,2,500\n",
                        "x.csv", *cluster);
  ASSERT_FALSE(pods.ok());
  EXPECT_NE(pods.status().message().find("x.csv:2: gpu_milli"), std::string::npos);
}

TEST(ParseNodes, NamesTheField) {
  auto c = ParseNodes("sn,cpu_milli,memory_mib,gpu,model\nn,64000,1024,9,T4\n", "n.csv");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("n.csv:2: gpu: '9'"), std::string::npos);
}

// fuzz_trace: a row shorter than the header's name column read past the row's fields
// (fuzz/corpus/fuzz_trace/crash-openb-pod-short-row.csv).
TEST(ParsePods, ShortRowWithoutTheNameColumnIsAnError) {
  auto cluster = LoadNodes(kDir + "/openb_node_list_gpu_node.csv");
  ASSERT_TRUE(cluster.ok());
  auto pods =
      ParsePods("cpu_milli,memory_mib,num_gpu,gpu_milli,name\n1\n", "x.csv", *cluster);
  ASSERT_FALSE(pods.ok());
  EXPECT_NE(pods.status().message().find("x.csv:2: name: missing"), std::string::npos)
      << pods.status().message();
}

// The serial number comes from the `sn` column, wherever the header puts it.
TEST(ParseNodes, ReadsSnByItsColumn) {
  auto c = ParseNodes("cpu_milli,memory_mib,gpu,model,sn\n1,2,8,G2,node-a\n", "n.csv");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->nodes[0].sn, "node-a");
  auto bad = ParseNodes("cpu_milli,memory_mib,gpu,model,sn\n1,2,8,G2\n", "n.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("n.csv:2: sn: missing"), std::string::npos);
}

std::vector<OpenbPod> SortedTiny(const Cluster& c) {
  auto pods = LoadPods(kDir + "/openb_pod_list_tiny.csv", c);
  EXPECT_TRUE(pods.ok());
  return *pods;  // already sorted by name
}

TEST(BuildEvents, ShuffleThenTopUpTo130Percent) {
  auto c = LoadNodes(kDir + "/openb_node_list_gpu_node.csv");
  ASSERT_TRUE(c.ok());
  const auto pods = SortedTiny(*c);
  GoRand rng(42);
  const auto events = BuildEvents(pods, c->total_gpu_milli(), rng);
  // The first |pods| events are a permutation of the whole list.
  std::vector<int> head(events.begin(), events.begin() + static_cast<long>(pods.size()));
  std::sort(head.begin(), head.end());
  for (size_t i = 0; i < pods.size(); ++i) EXPECT_EQ(head[i], static_cast<int>(i));
  int64_t total = 0;
  for (int e : events) total += pods[e].demand();
  EXPECT_LE(static_cast<double>(total),
            1.3 * static_cast<double>(c->total_gpu_milli()) + 8000);
  EXPECT_GT(static_cast<double>(total),
            1.3 * static_cast<double>(c->total_gpu_milli()) - 8000);
}

TEST(BuildEvents, DeterministicPerSeedDifferentAcrossSeeds) {
  auto c = LoadNodes(kDir + "/openb_node_list_gpu_node.csv");
  ASSERT_TRUE(c.ok());
  const auto pods = SortedTiny(*c);
  auto events = [&](int64_t seed) {
    GoRand rng(seed);
    return BuildEvents(pods, c->total_gpu_milli(), rng);
  };
  EXPECT_EQ(events(42), events(42));
  EXPECT_NE(events(42), events(43));
}

}  // namespace
}  // namespace hachi::placement
