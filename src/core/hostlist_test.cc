// Host lists moved here from config/ (issue 17): the scheduler's -w/-x use them too.
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
        HostListCase{"WidthsApart", {"a01", "a2"}, "a[01,2]"},
        HostListCase{
            "Prefixes", {"gpu02", "cpu1", "gpu01", "login"}, "cpu1,gpu[01-02],login"},
        HostListCase{"Duplicates", {"n1", "n1", "n2"}, "n[1-2]"},
        HostListCase{"NoDigits", {"alpha", "beta"}, "alpha,beta"},
        HostListCase{"DashedNames", {"node-1", "node-2"}, "node-[1-2]"}),
    [](const testing::TestParamInfo<HostListCase>& row) { return row.param.name; });

}  // namespace compress
}  // namespace hachi
