// End-to-end tests of `hachi commtest`: the real binary on the fake libcuda.so.1 and
// libnvidia-ml.so.1 (src/diag/testdata/fake_cuda/, src/topo/testdata/fake_nvml/).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_testing.h"

namespace {

using hachi::cli::testing::CmdResult;
using hachi::cli::testing::Hachi;
using hachi::cli::testing::Shell;

// `hachi commtest ARGS` on the fake node of `preset`, with extra environment `env`.
CmdResult Commtest(const std::string& preset, const std::string& env,
                   const std::string& args) {
  // A preset file is a topology file, which both fakes read.
  return Shell("HACHI_FAKE_NVML_TOPOLOGY=" + std::string(HACHI_SOURCE_DIR) +
               "/src/topo/presets/" + preset +
               ".json HACHI_NVML_LIBRARY=" HACHI_FAKE_NVML
               " HACHI_CUDA_LIBRARY=" HACHI_FAKE_CUDA " " +
               env + " " + HACHI_BINARY_DIR +
               "/hachi commtest --size 67108864 --repeats 2 " + args + " 2>&1");
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

TEST(CommtestCmdTest, DegradedPairFailsWithExit2) {
  CmdResult r = Commtest("hgx-h100", "HACHI_FAKE_CUDA_DEGRADE=2-5:0.40", "");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("2-5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("40 %"), std::string::npos) << r.out;
}

TEST(CommtestCmdTest, NoDriverIsAClearError) {
  CmdResult r = Hachi("commtest --cuda-library /nonexistent/libcuda.so.1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("no CUDA driver"), std::string::npos) << r.out;
}

}  // namespace
