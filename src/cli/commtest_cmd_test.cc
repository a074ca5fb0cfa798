// End-to-end tests of `hachi commtest`: the real binary on the fake libcuda.so.1 and
// libnvidia-ml.so.1 (src/diag/testdata/fake_cuda/, src/topo/testdata/fake_nvml/). The
// fake driver runs in virtual time, so its figures are the same on every run: the
// reports are golden files (src/cli/testdata/commtest/; HACHI_UPDATE_GOLDEN=1 rewrites
// them).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_testing.h"
#include "cli/golden_testing.h"
#include "core/testing/paths.h"

namespace {

using hachi::cli::testing::CmdResult;
using hachi::cli::testing::ExpectGolden;
using hachi::cli::testing::Hachi;
using hachi::cli::testing::Shell;

// `hachi commtest ARGS` on the fake node of `preset`, with extra environment `env`;
// stdout and stderr, or stdout alone.
CmdResult Commtest(const std::string& preset, const std::string& env,
                   const std::string& args, bool with_stderr = true) {
  // A preset file is a topology file, which both fakes read.
  return Shell("HACHI_FAKE_NVML_TOPOLOGY=" + hachi::SourceDir() + "/src/topo/presets/" +
               preset + ".json HACHI_NVML_LIBRARY=" + hachi::FakeNvmlLibrary() +
               " HACHI_CUDA_LIBRARY=" + hachi::FakeCudaLibrary() + " " + env + " " +
               hachi::BinaryDir() + "/hachi commtest --size 67108864 --repeats 2 " +
               args + (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

TEST(CommtestCmdTest, HealthyNodesPass) {
  for (const char* preset : {"hgx-h100", "dgx1-v100", "pcie-8x-l40s"}) {
    SCOPED_TRACE(preset);
    CmdResult r = Commtest(preset, "", "--json");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["checks"].is_array());
    for (const auto& c : j["checks"]) EXPECT_NE(c["status"], "FAIL") << c.dump();
  }
}

TEST(CommtestCmdTest, WithoutADriverTheJsonSaysWhy) {
  // A node without libcuda: a monitor reading --json gets a FAIL report naming it, not
  // an empty stdout.
  CmdResult r = Shell(hachi::BinaryDir() +
                      "/hachi commtest --json --cuda-library /nonexistent/libcuda.so.1 "
                      "2>/dev/null");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["status"], "FAIL") << r.out;
  ASSERT_EQ(j["checks"].size(), 1u) << r.out;
  EXPECT_EQ(j["checks"][0]["check"], "commtest-cuda") << r.out;
  EXPECT_NE(j["checks"][0].dump().find("/nonexistent/libcuda.so.1"), std::string::npos)
      << r.out;
}

TEST(CommtestCmdTest, DegradedPairFailsWithExit2) {
  CmdResult r = Commtest("hgx-h100", "HACHI_FAKE_CUDA_DEGRADE=2-5:0.40", "");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("2-5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("40 %"), std::string::npos) << r.out;
}

TEST(CommtestCmdTest, Goldens) {
  struct Row {
    const char* golden;  // under testdata/commtest/
    const char* preset;
    const char* env;
    const char* args;
    int exit_code;
  };
  const Row rows[] = {
      {"hgx-h100.txt", "hgx-h100", "", "", 0},
      {"dgx1-v100.txt", "dgx1-v100", "", "", 0},
      {"pcie-8x-l40s.txt", "pcie-8x-l40s", "", "", 0},
      {"hgx-h100-degraded.txt", "hgx-h100", "HACHI_FAKE_CUDA_DEGRADE=2-5:0.40", "", 2},
      {"hgx-h100-gpu0.json", "hgx-h100", "", "--json --gpu 0", 0},
      {"hgx-h100-degraded-gpu2.json", "hgx-h100", "HACHI_FAKE_CUDA_DEGRADE=2-5:0.40",
       "--json --gpu 2", 2},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.golden);
    CmdResult r = Commtest(row.preset, row.env, row.args, /*with_stderr=*/false);
    EXPECT_EQ(r.exit_code, row.exit_code) << r.out;
    // The same figures on a second run, or the golden would be luck.
    EXPECT_EQ(Commtest(row.preset, row.env, row.args, false).out, r.out);
    ExpectGolden(std::string("commtest/") + row.golden, r.out);
  }
}

TEST(CommtestCmdTest, NoDriverIsAClearError) {
  CmdResult r = Hachi("commtest --cuda-library /nonexistent/libcuda.so.1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("no CUDA driver"), std::string::npos) << r.out;
}

}  // namespace
