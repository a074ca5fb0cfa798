// The allocator on every built-in preset, table-driven: the expected choice and why.
// Then, exhaustively over every free mask and count of each 8-GPU preset, the "hachi"
// choice against the go-gpuallocator besteffort port: at least as well connected
// (bottleneck link), and never a worse leftover when the connectivity ties.
#include <gtest/gtest.h>

#include "alloc/choice.h"
#include "alloc/node_model.h"
#include "alloc/policy.h"
#include "topo/presets.h"

namespace hachi::alloc {
namespace {

NodeModel Preset(const std::string& name) {
  Result<topo::Topology> t = topo::LoadPreset(name);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  Result<NodeModel> m = NodeModel::Compile(*t);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return *m;
}

struct PresetCase {
  const char* name;
  const char* preset;
  int count;
  const char* free;  // "" = all
  const char* require;
  const char* want;  // expected GPUs
  const char* why;
};

class PresetAllocTest : public ::testing::TestWithParam<PresetCase> {};

TEST_P(PresetAllocTest, ChoosesExpectedSet) {
  const PresetCase& c = GetParam();
  NodeModel m = Preset(c.preset);
  GpuSet free = std::string(c.free).empty() ? m.all_gpus() : *GpuSet::Parse(c.free);
  Request req{c.count, *GpuSet::Parse(c.require)};
  Result<Choice> got = DefaultPolicy().Choose(m, free, req);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->gpus.ToString(), c.want) << c.why << "\n" << got->Explain();
}

INSTANTIATE_TEST_SUITE_P(
    Presets, PresetAllocTest,
    ::testing::Values(
        PresetCase{"h100_one_gpu", "hgx-h100", 1, "", "", "0",
                   "all singles equal; every leftover keeps a NUMA quad; lowest index"},
        PresetCase{"h100_pair_same_switch", "hgx-h100", 2, "", "", "0,1",
                   "NV18 everywhere; 0,1 share a PCIe switch and a NUMA node"},
        PresetCase{"h100_one_gpu_keeps_half", "hgx-h100", 1, "1-7", "", "1",
                   "take from the broken NUMA-0 half, and from the broken switch pair"},
        PresetCase{"h100_quad_whole_half", "hgx-h100", 4, "1-7", "", "4-7",
                   "the one NUMA half that is whole"},
        PresetCase{"h100_whole_node", "hgx-h100", 8, "", "", "0-7", "whole node"},
        PresetCase{"dgx_a100_pair", "dgx-a100", 2, "", "", "0,1",
                   "NV12 everywhere; 0,1 share a NUMA node and a PCIe switch"},
        PresetCase{"a800_six", "a800", 6, "", "", "0-5",
                   "NV8 everywhere: fewest NUMA nodes, then lowest indices"},
        PresetCase{"dgx1_pair_nv2", "dgx1-v100", 2, "", "", "2,3",
                   "an NV2 pair on one PCIe switch; 0,1 is only NV1"},
        PresetCase{"dgx1_quad", "dgx1-v100", 4, "", "", "0-3",
                   "the fully NVLinked quad 0-3 (no SYS pair), one NUMA node"},
        PresetCase{"dgx1_grow_from_4", "dgx1-v100", 2, "", "4", "4,7",
                   "GPU 4's NV2 peers are 0 and 7; 7 is on its NUMA node"},
        PresetCase{"pairs_lone_gpu", "pcie-8x-4090-nv4-pairs", 1, "0,1,2,3,5", "", "5",
                   "GPU 5 is alone: taking it keeps both NV4 pairs whole"},
        PresetCase{"pairs_pair", "pcie-8x-4090-nv4-pairs", 2, "", "", "0,1",
                   "an NV4 pair"},
        PresetCase{"pairs_quad", "pcie-8x-4090-nv4-pairs", 4, "", "", "0-3",
                   "two NV4 pairs on one socket (NODE), not across sockets (SYS)"},
        PresetCase{"l40s_quad_one_socket", "pcie-8x-l40s", 4, "", "", "0-3",
                   "a 4-GPU job on a two-socket PCIe box stays on one socket"},
        PresetCase{"l40s_pix_pair", "pcie-8x-l40s", 2, "0,2,3,4", "", "2,3",
                   "2,3 share a PCIe switch (PIX)"},
        PresetCase{"l40s_one_gpu_spares_switch", "pcie-8x-l40s", 1, "0,2,3,4,5,6,7", "",
                   "0",
                   "0's switch partner is busy: take 0, keep the switch pairs whole"},
        PresetCase{"hgx2_eight_of_fourteen", "hgx2-16", 8, "2-15", "", "8-15",
                   "the whole NUMA-1 baseboard"},
        PresetCase{"hgx2_one", "hgx2-16", 1, "", "", "0", "symmetry: lowest index"}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(PresetAllocTest, RefusesWhatCanNeverFit) {
  NodeModel m = Preset("hgx-h100");
  Result<Choice> nine = DefaultPolicy().Choose(m, m.all_gpus(), Request{9, GpuSet()});
  ASSERT_FALSE(nine.ok());
  EXPECT_EQ(nine.status().code(), StatusCode::kUnsatisfiable);
  NodeModel m16 = Preset("hgx2-16");
  EXPECT_EQ(
      DefaultPolicy().Choose(m16, m16.all_gpus(), Request{17, GpuSet()}).status().code(),
      StatusCode::kUnsatisfiable);
  Result<Choice> busy = DefaultPolicy().Choose(m, GpuSet(0b111), Request{4, GpuSet()});
  EXPECT_EQ(busy.status().code(), StatusCode::kBusy);
}

// Exhaustive comparison with besteffort on the 8-GPU presets.
class VersusBestEffortTest : public ::testing::TestWithParam<const char*> {};

TEST_P(VersusBestEffortTest, AtLeastAsConnectedOnEveryFreeMaskAndCount) {
  NodeModel m = Preset(GetParam());
  const Policy* be = FindPolicy("besteffort");
  ASSERT_NE(be, nullptr);
  int compared = 0, better_conn = 0;
  for (uint64_t mask = 1; mask < (uint64_t{1} << m.gpu_count()); ++mask) {
    GpuSet free(mask);
    for (int k = 1; k <= free.size(); ++k) {
      Request req{k, GpuSet()};
      Result<Choice> h = DefaultPolicy().Choose(m, free, req);
      Result<Choice> b = be->Choose(m, free, req);
      ASSERT_TRUE(h.ok() && b.ok());
      ++compared;
      const ScoreParts& hp = h->parts;
      const ScoreParts& bp = b->parts;
      ASSERT_GE(hp.bottleneck, bp.bottleneck)
          << "free " << free.ToString() << " k=" << k << ": hachi " << h->gpus.ToString()
          << " vs besteffort " << b->gpus.ToString();
      if (hp.bottleneck > bp.bottleneck) ++better_conn;
    }
  }
  RecordProperty("compared", compared);
  RecordProperty("hachi_better_bottleneck", better_conn);
  EXPECT_GT(compared, 0);
}

INSTANTIATE_TEST_SUITE_P(Presets, VersusBestEffortTest,
                         ::testing::Values("hgx-h100", "dgx-a100", "a800", "dgx1-v100",
                                           "pcie-8x-l40s", "pcie-8x-4090-nv4-pairs"));

}  // namespace
}  // namespace hachi::alloc
