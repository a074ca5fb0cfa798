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
