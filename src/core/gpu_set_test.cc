#include "core/gpu_set.h"

#include <gtest/gtest.h>

namespace hachi {
namespace {

struct ParseCase {
  const char* name;
  const char* text;
  bool ok;
  uint64_t mask;
};

class GpuSetParseTest : public ::testing::TestWithParam<ParseCase> {};

TEST_P(GpuSetParseTest, Parses) {
  const ParseCase& c = GetParam();
  Result<GpuSet> r = GpuSet::Parse(c.text);
  ASSERT_EQ(r.ok(), c.ok) << r.status().ToString();
  if (c.ok) {
    EXPECT_EQ(r->mask(), c.mask);
  } else {
    EXPECT_FALSE(r.status().message().empty());
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuSetParseTest,
                         ::testing::Values(ParseCase{"empty", "", true, 0},
                                           ParseCase{"single", "3", true, 0b1000},
                                           ParseCase{"list", "0,2,5", true, 0b100101},
                                           ParseCase{"range", "0-3,6", true, 0b1001111},
                                           ParseCase{"spaces", " 1 , 2 ", true, 0b110},
                                           ParseCase{"negative", "-1", false, 0},
                                           ParseCase{"too_big", "64", false, 0},
                                           ParseCase{"letters", "a", false, 0},
                                           ParseCase{"descending", "5-3", false, 0},
                                           ParseCase{"empty_item", "1,,2", false, 0}),
                         [](const auto& p) { return std::string(p.param.name); });

TEST(GpuSetTest, FormatsRanges) {
  EXPECT_EQ(GpuSet(0b11110011).ToString(), "0,1,4-7");
  EXPECT_EQ(GpuSet(0b11110011).ToList(), "0,1,4,5,6,7");
  EXPECT_EQ(GpuSet().ToString(), "");
  EXPECT_EQ(GpuSet::FirstN(8).size(), 8);
  EXPECT_EQ(GpuSet::FirstN(64).size(), 64);
}

TEST(GpuSetTest, SetAlgebra) {
  GpuSet a(0b1100), b(0b0110);
  EXPECT_EQ((a | b).mask(), 0b1110u);
  EXPECT_EQ((a & b).mask(), 0b0100u);
  EXPECT_EQ((a - b).mask(), 0b1000u);
  EXPECT_TRUE(GpuSet(0b0100).IsSubsetOf(a));
  EXPECT_FALSE(b.IsSubsetOf(a));
  EXPECT_EQ(a.First(), 2);
  EXPECT_EQ(GpuSet().First(), -1);
}

}  // namespace
}  // namespace hachi
