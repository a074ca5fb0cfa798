// Host lists live in core/: the config reader and the scheduler's -w/-x use them too.
#include "core/hostlist.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hachi {
namespace {

using ::testing::ElementsAre;

TEST(HostListTest, SlurmForms) {
  EXPECT_THAT(*ExpandHostList("gpu[01-04],gpu07"),
              ElementsAre("gpu01", "gpu02", "gpu03", "gpu04", "gpu07"));
  EXPECT_THAT(*ExpandHostList("n[1-3,7]"), ElementsAre("n1", "n2", "n3", "n7"));
  EXPECT_THAT(*ExpandHostList("gpu9"), ElementsAre("gpu9"));
  EXPECT_THAT(*ExpandHostList("a[8-10]-ib"), ElementsAre("a8-ib", "a9-ib", "a10-ib"));
}

// `scontrol show hostnames`: each number or range keeps the width its lower bound is
// written in (Slurm's _parse_single_range).
struct ExpandCase {
  std::string name;
  std::string text;
  std::vector<std::string> want;
};

class ExpandHostListTest : public testing::TestWithParam<ExpandCase> {};

TEST_P(ExpandHostListTest, AsScontrolShowHostnames) {
  Result<std::vector<std::string>> got = ExpandHostList(GetParam().text);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ExpandHostListTest,
    testing::Values(
        ExpandCase{"PaddedAndUnpaddedParts", "a[01,2]", {"a01", "a2"}},
        ExpandCase{"RangeTakesLowerBoundsWidth", "a[01-2]", {"a01", "a02"}},
        ExpandCase{"UnpaddedLowerBound", "a[1-02]", {"a1", "a2"}},
        ExpandCase{"PaddedRangeGrows", "n[098-100]", {"n098", "n099", "n100"}},
        ExpandCase{"Zero", "n[0-1]", {"n0", "n1"}},
        ExpandCase{"Mixed",
                   "gpu[01-03,10],cpu7,n[8-9]x",
                   {"gpu01", "gpu02", "gpu03", "gpu10", "cpu7", "n8x", "n9x"}}),
    [](const testing::TestParamInfo<ExpandCase>& row) { return row.param.name; });

TEST(HostListTest, Errors) {
  for (const char* bad : {"n[5-1]", "n[1-", "n[x]", "", "a b", "n[1][2]"}) {
    Result<std::vector<std::string>> r = ExpandHostList(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("is not a node list"), std::string::npos)
        << r.status().message();
  }
}

}  // namespace
}  // namespace hachi

namespace hachi {
namespace compress {

struct HostListCase {
  std::string name;
  std::vector<std::string> hosts;
  std::string want;
};

class CompressHostListTest : public testing::TestWithParam<HostListCase> {};

TEST_P(CompressHostListTest, AsSlurmPrintsIt) {
  EXPECT_EQ(CompressHostList(GetParam().hosts), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CompressHostListTest,
    testing::Values(
        HostListCase{"None", {}, ""}, HostListCase{"One", {"gpu01"}, "gpu01"},
        HostListCase{"Run", {"gpu01", "gpu02", "gpu03", "gpu04"}, "gpu[01-04]"},
        HostListCase{"Unsorted", {"gpu04", "gpu02", "gpu03", "gpu01"}, "gpu[01-04]"},
        HostListCase{"Gap", {"gpu01", "gpu02", "gpu07"}, "gpu[01-02,07]"},
        HostListCase{"Unpadded", {"n9", "n10", "n11"}, "n[9-11]"},
        // Widths that cannot share a zero padding stay apart, narrower first, in one
        // bracket (Slurm's hostlist_sort + ranged string: hostrange_cmp orders them by
        // width).
        HostListCase{"WidthsApart", {"a01", "a2"}, "a[2,01]"},
        HostListCase{"WidthsApartThree", {"a10", "a01", "a2"}, "a[2,01,10]"},
        HostListCase{
            "PaddedRunsIntoWiderNumber", {"gpu10", "gpu08", "gpu09"}, "gpu[08-10]"},
        HostListCase{"PaddedRunThenHundred",
                     {"gpu10", "gpu09", "gpu08", "gpu100"},
                     "gpu[08-10,100]"},
        HostListCase{"PaddedThreeDigits", {"n100", "n098", "n099"}, "n[098-100]"},
        HostListCase{"UnpaddedGrows", {"n100", "n98", "n99"}, "n[98-100]"},
        HostListCase{"SameNumberTwoWidths", {"n2", "n2", "n02"}, "n[2,02]"},
        HostListCase{"Zeros", {"n00", "n01", "n0", "n1"}, "n[0-1,00-01]"},
        HostListCase{"PlainAndNumberedOfOnePrefix", {"n2", "n", "n1"}, "n,n[1-2]"},
        HostListCase{"SingleAmongPrefixes", {"gpu-a", "gpu01"}, "gpu01,gpu-a"},
        HostListCase{
            "Prefixes", {"gpu02", "cpu1", "gpu01", "login"}, "cpu1,gpu[01-02],login"},
        HostListCase{"Duplicates", {"n1", "n1", "n2"}, "n[1-2]"},
        HostListCase{"NoDigits", {"alpha", "beta"}, "alpha,beta"},
        HostListCase{"DashedNames", {"node-1", "node-2"}, "node-[1-2]"}),
    [](const testing::TestParamInfo<HostListCase>& row) { return row.param.name; });

}  // namespace compress
}  // namespace hachi
