// End-to-end tests of `hachi sim --placement openb` on the hand-made openb data in
// testdata/openb (HACHI_SHARED_DIR points there): JSON keys, and bad flags exit 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_testing.h"
#include "core/testing/paths.h"

namespace hachi::cli {
namespace {

using testing::CmdResult;
using testing::Hachi;

std::string Run(const std::string& args) { return "sim --placement openb " + args; }

CmdResult WithData(const std::string& args, bool with_stderr = true) {
  return Hachi(Run(args), with_stderr);
}

TEST(PlacementCli, JsonHasTheKeys) {
  setenv("HACHI_SHARED_DIR", (SourceDir() + "/testdata/openb").c_str(), 1);
  for (const char* policy : {"random", "bestfit", "fgd", "hachi"}) {
    CmdResult r =
        WithData(std::string("--pods tiny --json --curve --policy ") + policy, false);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    for (const char* key : {"alloc_ratio_at_100", "alloc_ratio_at_130",
                            "unallocated_gpus_at_130", "frag_ratio_at_80", "wall_s"}) {
      EXPECT_TRUE(j.contains(key)) << key;
    }
    EXPECT_EQ(j["policy"], policy);
    EXPECT_EQ(j["curve"]["alloc_pct"].size(), 131u);
    EXPECT_GE(j["alloc_ratio_at_130"].get<double>(), 0.0);
    EXPECT_LE(j["alloc_ratio_at_130"].get<double>(), 1.0);
  }
}

struct BadRow {
  std::string name;
  std::string args;
  std::string reason;
};

class PlacementCliBad : public ::testing::TestWithParam<BadRow> {};

TEST_P(PlacementCliBad, ExitsTwoWithTheReason) {
  setenv("HACHI_SHARED_DIR", (SourceDir() + "/testdata/openb").c_str(), 1);
  CmdResult r = Hachi(GetParam().args);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find(GetParam().reason), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Rows, PlacementCliBad,
    ::testing::Values(
        BadRow{"UnknownTrace", "sim --placement philly", "'philly' is not openb"},
        BadRow{"UnknownPolicy", Run("--pods tiny --policy lottery"), "lottery"},
        BadRow{"MissingPods", Run("--pods nope"), "openb_pod_list_nope.csv"},
        BadRow{"PathInPods", Run("--pods ../x"), "--pods"},
        BadRow{"BadRow", Run("--pods badrow"), "openb_pod_list_badrow.csv:3: num_gpu"},
        BadRow{"BadSeed", Run("--pods tiny --seed x"), "--seed"},
        BadRow{"NoTraceNoPlacement", "sim", "--trace is required"}),
    [](const auto& row) { return row.param.name; });

}  // namespace
}  // namespace hachi::cli
