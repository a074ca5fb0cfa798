// Table-driven cases for the "hachi" policy on hand-built layouts (testing.h). Each row
// says why the expected set is the right one.
#include "alloc/hachi_policy.h"

#include <gtest/gtest.h>

#include "alloc/cache.h"
#include "alloc/testing.h"

namespace hachi::alloc {
namespace {

using testing::NamedModel;

struct Case {
  const char* name;
  const char* layout;  // testing::NamedModel
  const char* free;    // GpuSet::Parse syntax; "all" for every GPU
  int count;
  const char* required;  // "" for none
  const char* want;      // expected GPUs, or "" when an error is expected
  StatusCode code;       // kOk, or the expected error
  const char* why;
};

GpuSet ParseOrDie(const NodeModel& m, const char* text) {
  if (std::string_view(text) == "all") return m.all_gpus();
  Result<GpuSet> s = GpuSet::Parse(text);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : GpuSet();
}

const Case kCases[] = {
    // --- single GPUs: take a lone GPU, keep pairs and whole groups free.
    {"pairs_one_gpu_takes_lone", "pairs8", "0,1,2,3,5", 1, "", "5", StatusCode::kOk,
     "5's partner 4 is busy; taking 5 keeps the NV4 pairs (0,1) and (2,3)"},
    {"nvswitch_one_gpu_keeps_numa_quad", "nvswitch8", "1-7", 1, "", "1", StatusCode::kOk,
     "all links equal; taking a NUMA0 GPU keeps NUMA1 (4-7) a whole quad; 1 is lowest"},
    {"nvswitch_one_gpu_all_free", "nvswitch8", "all", 1, "", "0", StatusCode::kOk,
     "every choice leaves the same shapes; lowest index wins"},
    {"pcie_one_gpu_keeps_pix_pairs", "pcie8", "0,2-7", 1, "", "0", StatusCode::kOk,
     "0 lost its switch mate 1; taking 0 keeps three PIX pairs"},
    {"dgx1_one_gpu_after_pair", "dgx1", "1,2,4-7", 1, "", "1", StatusCode::kOk,
     "with 0,3 gone, 4-7 stays a whole quad; 1 or 2 lose the same, 1 is lowest"},
    // --- pairs.
    {"pcie_two_gpus_pix", "pcie8", "all", 2, "", "0,1", StatusCode::kOk,
     "PIX (same switch) is the best PCIe link"},
    {"pairs_two_gpus_nvlink", "pairs8", "all", 2, "", "0,1", StatusCode::kOk,
     "an NV4 bridge beats any PCIe link"},
    {"pairs_two_gpus_skip_broken_pair", "pairs8", "1-7", 2, "", "2,3", StatusCode::kOk,
     "2,3 is an intact NV4 pair; 1 alone is not worth breaking another"},
    {"dgx1_two_gpus_nv2", "dgx1", "all", 2, "", "0,3", StatusCode::kOk,
     "NV2 within a NUMA node; 0,3 leaves quad 4-7 and NV2 pairs 1,2 / 4,7 / 5,6"},
    {"dgx1_two_gpus_keep_whole_quad", "dgx1", "1-7", 2, "", "1,2", StatusCode::kOk,
     "1,2 is NV2 in the broken NUMA0 half; 4,7 (also NV2) would break quad 4-7"},
    // --- quads and halves.
    {"pcie_four_gpus_one_socket", "pcie8", "all", 4, "", "0-3", StatusCode::kOk,
     "one socket: NODE bottleneck instead of SYS"},
    {"pcie_four_gpus_free_socket", "pcie8", "0,1,3-7", 4, "", "4-7", StatusCode::kOk,
     "only socket 1 is whole"},
    {"dgx1_four_gpus_quad", "dgx1", "all", 4, "", "0-3", StatusCode::kOk,
     "0-3 is all-NVLink (bottleneck NV1); mixed quads cross SYS"},
    {"dgx1_three_gpus", "dgx1", "all", 3, "", "0,2,3", StatusCode::kOk,
     "all-NVLink triangles with two NV2 links: 0,2,3 / 1,2,3 / 4,6,7 / 5,6,7; lowest"},
    {"nvswitch_four_gpus_numa", "nvswitch8", "all", 4, "", "0-3", StatusCode::kOk,
     "one NUMA node"},
    {"nvswitch_four_gpus_fill_hole", "nvswitch8", "0,2-7", 4, "", "4-7", StatusCode::kOk,
     "NUMA1 is whole; NUMA0 has 3 left"},
    {"nvswitch16_eight_gpus", "nvswitch16", "all", 8, "", "0-7", StatusCode::kOk,
     "one NUMA half of a 16-GPU NVSwitch node"},
    {"nvswitch16_one_gpu", "nvswitch16", "1-15", 1, "", "1", StatusCode::kOk,
     "keeps NUMA1 (8-15) whole"},
    {"whole_node", "dgx1", "all", 8, "", "0-7", StatusCode::kOk, "only one choice"},
    // --- --require.
    {"require_nvswitch_partner", "nvswitch8", "all", 2, "5", "4,5", StatusCode::kOk,
     "5's NUMA mates tie; 4,5 leaves 6,7 a pair and 0-3 a quad; lowest"},
    {"require_dgx1_nv2_partner", "dgx1", "all", 2, "0", "0,3", StatusCode::kOk,
     "0-3 and 0-4 are NV2; 0-3 stays within NUMA 0"},
    {"require_pcie_two_sockets", "pcie8", "all", 4, "0,4", "0,1,4,5", StatusCode::kOk,
     "SYS is forced; the switch mates add two PIX links"},
    {"require_whole", "pcie8", "all", 2, "2,6", "2,6", StatusCode::kOk,
     "required fills the request"},
    // --- errors.
    {"too_many", "nvswitch8", "all", 9, "", "", StatusCode::kUnsatisfiable,
     "job asks for 9 GPUs; node has 8"},
    {"zero", "nvswitch8", "all", 0, "", "", StatusCode::kUnsatisfiable, "count < 1"},
    {"busy", "nvswitch8", "1,5,6", 4, "", "", StatusCode::kBusy, "3 free, 4 wanted"},
    {"required_not_free", "nvswitch8", "0-3", 2, "4", "", StatusCode::kInvalidArgument,
     "4 is not free"},
    {"required_off_node", "nvswitch8", "all", 2, "9", "", StatusCode::kInvalidArgument,
     "there is no GPU 9"},
    {"required_too_many", "nvswitch8", "all", 1, "0,1", "", StatusCode::kInvalidArgument,
     "2 required, 1 asked"},
    {"free_off_node", "nvswitch8", "0,12", 1, "", "", StatusCode::kInvalidArgument,
     "free names a GPU the node lacks"},
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class HachiPolicyTest : public ::testing::TestWithParam<Case> {};

TEST_P(HachiPolicyTest, Chooses) {
  const Case& c = GetParam();
  const NodeModel m = NamedModel(c.layout);
  const GpuSet free = ParseOrDie(m, c.free);
  const Request req{c.count, ParseOrDie(m, c.required)};
  Result<Choice> got = HachiPolicy().Choose(m, free, req);
  if (c.code != StatusCode::kOk) {
    ASSERT_FALSE(got.ok()) << c.why << "; got " << got->gpus.ToString();
    EXPECT_EQ(got.status().code(), c.code) << got.status().ToString();
    EXPECT_FALSE(got.status().message().empty());
    return;
  }
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->gpus.ToString(), ParseOrDie(m, c.want).ToString())
      << c.why << "\n  " << got->Explain();
  // The cache gives the same answer, lazily and from a full table.
  AllocCache cache;
  Result<GpuSet> lazy = cache.Pick(m, free, req);
  ASSERT_TRUE(lazy.ok());
  EXPECT_EQ(*lazy, got->gpus);
  cache.BuildTable(m);
  Result<GpuSet> table = cache.Pick(m, free, req);
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(*table, got->gpus);
}

INSTANTIATE_TEST_SUITE_P(Cases, HachiPolicyTest, ::testing::ValuesIn(kCases),
                         [](const auto& p) { return std::string(p.param.name); });

TEST(HachiPolicyErrors, MessagesNameTheNumbers) {
  const NodeModel m = NamedModel("nvswitch8");
  HachiPolicy p;
  EXPECT_EQ(p.Choose(m, m.all_gpus(), {9, {}}).status().message(),
            "job asks for 9 GPUs; node has 8");
  EXPECT_EQ(p.Choose(m, GpuSet::FromIndices({1, 5, 6}), {4, {}}).status().message(),
            "needs 4 GPUs, 3 free: 1,5,6");
  EXPECT_EQ(p.Choose(m, GpuSet::FromIndices({0, 1}), {2, GpuSet::FromIndices({4, 5})})
                .status()
                .message(),
            "required GPUs 4,5 are not free (free: 0,1)");
}

TEST(HachiPolicyExplain, SaysWhy) {
  const NodeModel m = NamedModel("dgx1");
  Result<Choice> c = HachiPolicy().Choose(m, m.all_gpus(), {2, {}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->parts.bottleneck_label, "NV2");
  EXPECT_EQ(c->parts.bottleneck, 30);
  EXPECT_EQ(c->parts.numa_nodes, 1);
  EXPECT_EQ(c->Explain(),
            "GPUs 0,3: bottleneck NV2 (score 30), total 30, 1 NUMA node, 1 PCIe group; "
            "leaves 4: 4-7 NV1 | 2: 1,2 NV2; 4,7 NV2; 5,6 NV2");
}

}  // namespace
}  // namespace hachi::alloc
