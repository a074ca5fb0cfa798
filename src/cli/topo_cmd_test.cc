// End-to-end tests of `hachi topo`: the real binary, run as a user would, on presets and
// the shared nvidia-smi fixtures. Checks exit codes, the JSON contract the issue names
// (gpus[].index, links, class, findings; alloc's sorted gpus) and clear errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_testing.h"
#include "cli/golden_testing.h"
#include "core/testing/paths.h"
#include "topo/topology_testing.h"

namespace {

using hachi::cli::testing::CmdResult;
using hachi::cli::testing::ExpectGolden;
using hachi::cli::testing::Hachi;
using hachi::cli::testing::Shell;

std::string Fixture(const std::string& name) {
  return hachi::SourceDir() + "/testdata/nvidia-smi/" + name;
}

TEST(TopoShowTest, PresetJsonHasTheContract) {
  CmdResult r = Hachi("topo show --preset hgx-h100 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["gpus"].size(), 8u);
  EXPECT_EQ(j["gpus"][7]["index"], 7);
  EXPECT_EQ(j["links"][0][7], "NV18");
  EXPECT_EQ(j["links"][3][3], "X");
  EXPECT_EQ(j["class"], "nvswitch");
  EXPECT_TRUE(j["findings"].is_array());
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["numa_groups"].size(), 2u);
}

TEST(TopoShowTest, TextShowsMatrixClassGroupsAndFindings) {
  CmdResult r = Hachi("topo show --file " + Fixture("topo-dgx1-v100-microway.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* want : {"nvlink-mesh", "GPU7", "NV2", "NUMA groups", "Findings: none",
                           "mlx5_0 (near GPU 0,1)"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
}

TEST(TopoShowTest, MergesListWithMatrix) {
  CmdResult r =
      Hachi("topo show --json --file " + Fixture("topo-hgx-h100-12nics-580.txt") +
            " --file " + Fixture("list-gpus-8x-h100-rhelai-vm.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gpus"][0]["model"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(j["gpus"][0]["uuid"], "GPU-c7a0294c-c2c2-5476-438c-fb468eaa223b");
}

// `text` with every `from` replaced by `to`: goldens name paths of this checkout and
// build by placeholders.
std::string Replaced(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size()) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// `nvidia-smi -L` of an A100 split into 4 MIG devices: their profiles and UUIDs.
TEST(TopoShowTest, MigDevicesFromTheGpuList) {
  const std::string list = Fixture("list-gpus-a100-pcie-mig.txt");
  CmdResult r = Hachi("topo show --file " + list);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  ExpectGolden("topo/a100-pcie-mig-list.txt",
               Replaced(r.out, hachi::SourceDir(), "$HACHI_SOURCE_DIR"));
  CmdResult j = Hachi("topo show --json --file " + list);
  ASSERT_EQ(j.exit_code, 0) << j.out;
  nlohmann::json gpu = nlohmann::json::parse(j.out)["gpus"][0];
  EXPECT_EQ(gpu["mig_enabled"], true);
  ASSERT_EQ(gpu["mig_devices"].size(), 4u);
  EXPECT_EQ(gpu["mig_devices"][0]["profile"], "3g.40gb");
  EXPECT_EQ(gpu["mig_devices"][0]["slices"], 3);
  EXPECT_EQ(gpu["mig_devices"][3]["uuid"], "MIG-a5b1e9ac-1c96-4ca0-b57c-53878e7531dc");
}

// Discovered through NVML (the fake): GPU 0 in 7 slices, GPU 1 mixed, GPU 2 in MIG mode
// without instances (a warning: it cannot run jobs).
TEST(TopoShowTest, MigDevicesFromNvml) {
  hachi::topo::TempDir dir;
  const std::string events =
      dir.Write("events",
                "migdev 0 1g.10gb 1g.10gb 1g.10gb 1g.10gb 1g.10gb 1g.10gb 1g.10gb\n"
                "migdev 1 3g.40gb 2g.20gb - 1g.10gb/13/0\n"
                "migdev 2\n");
  const std::string env =
      "HACHI_NVML_LIBRARY=" + hachi::FakeNvmlLibrary() +
      " HACHI_FAKE_NVML_TOPOLOGY=" + hachi::SourceDir() +
      "/src/topo/presets/hgx-h100.json HACHI_FAKE_NVML_EVENTS=" + events + " ";
  CmdResult r = Shell(env + hachi::BinaryDir() + "/hachi topo show 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  ExpectGolden("topo/hgx-h100-mig-nvml.txt",
               Replaced(r.out, hachi::FakeNvmlLibrary(), "$HACHI_FAKE_NVML"));
}

TEST(TopoShowTest, BadInputsGiveClearErrors) {
  CmdResult missing = Hachi("topo show --file /nonexistent/topo.txt");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.out.find("/nonexistent/topo.txt"), std::string::npos) << missing.out;
  CmdResult preset = Hachi("topo show --preset dgx-z900");
  EXPECT_EQ(preset.exit_code, 2);
  EXPECT_NE(preset.out.find("hgx-h100"), std::string::npos) << preset.out;
  CmdResult both = Hachi("topo show --preset hgx-h100 --file x");
  EXPECT_EQ(both.exit_code, 2);
}

struct CheckCase {
  const char* name;
  std::string args;
  int exit_code;
  const char* mention;
};

class TopoCheckTest : public ::testing::TestWithParam<CheckCase> {};

TEST_P(TopoCheckTest, ExitCodeAndMessage) {
  const CheckCase& c = GetParam();
  CmdResult r = Hachi("topo check " + c.args);
  EXPECT_EQ(r.exit_code, c.exit_code) << r.out;
  EXPECT_NE(r.out.find(c.mention), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TopoCheckTest,
    ::testing::Values(
        CheckCase{"healthy_preset", "--preset dgx-a100", 0, "healthy"},
        CheckCase{"healthy_fixture", "--file " + Fixture("topo-dgx-a100-mlx5-names.txt"),
                  0, "healthy"},
        CheckCase{"malformed",
                  "--file " + Fixture("topo-8x-a100-vm-malformed-ph0-cells.txt"), 2,
                  "column NIC7: 'PH0-115'"},
        CheckCase{
            "missing_gpu",
            "--expect-gpus 8 --file " + Fixture("topo-4x-l40s-nics-missalignment106.txt"),
            2, "found 4 GPUs, expected 8"},
        CheckCase{"unreadable", "--file " + Fixture("SOURCES.md"), 2,
                  "no `nvidia-smi topo -m`"}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(TopoAllocTest, JsonGpusSorted) {
  CmdResult r = Hachi("topo alloc --preset hgx-h100 --count 4 --free 1-7 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gpus"], nlohmann::json({4, 5, 6, 7}));
  EXPECT_EQ(j["cuda_visible_devices"], "4,5,6,7");
}

TEST(TopoAllocTest, KeepsPairsWhole) {
  CmdResult r = Hachi(
      "topo alloc --preset pcie-8x-4090-nv4-pairs --count 1 --free 0,1,2,3,5 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["gpus"], nlohmann::json({5}));
}

TEST(TopoAllocTest, TextNamesTheScoreParts) {
  CmdResult r = Hachi("topo alloc --preset dgx1-v100 --count 2");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("weakest link in the set:  NV2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("what stays free"), std::string::npos) << r.out;
}

struct AllocErrorCase {
  const char* name;
  const char* args;
  int exit_code;
  const char* mention;
};

class TopoAllocErrorTest : public ::testing::TestWithParam<AllocErrorCase> {};

TEST_P(TopoAllocErrorTest, Refused) {
  const AllocErrorCase& c = GetParam();
  CmdResult r = Hachi(std::string("topo alloc ") + c.args);
  EXPECT_EQ(r.exit_code, c.exit_code) << r.out;
  EXPECT_NE(r.out.find(c.mention), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TopoAllocErrorTest,
    ::testing::Values(
        AllocErrorCase{"nine_gpus", "--preset hgx-h100 --count 9", 1, "9"},
        AllocErrorCase{"busy", "--preset hgx-h100 --count 4 --free 1,5,6", 1, "1,5,6"},
        AllocErrorCase{"bad_free", "--preset hgx-h100 --count 1 --free 1,x", 2, "--free"},
        // An explicitly empty free list is "none free", not "all free".
        AllocErrorCase{"empty_free_is_none_free", "--preset hgx-h100 --count 1 --free ''",
                       1, "no GPU is free"},
        // CLI11 itself refuses "--free=" (no value after '='): bad input, not all free.
        AllocErrorCase{"empty_free_with_equals", "--preset hgx-h100 --count 2 --free=", 2,
                       "--free"},
        AllocErrorCase{"required_not_free",
                       "--preset hgx-h100 --count 2 --free 0,1 --require 3", 2, "3"},
        AllocErrorCase{"unknown_policy", "--preset hgx-h100 --count 1 --policy fastest",
                       2, "besteffort"},
        AllocErrorCase{"no_count", "--preset hgx-h100", 2, "count"}),
    [](const auto& p) { return std::string(p.param.name); });

}  // namespace
