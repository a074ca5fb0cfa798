#include "topo/presets.h"

#include <gtest/gtest.h>

#include <string>

#include "topo/topology_file.h"
#include "topo/topology_testing.h"

namespace hachi::topo {
namespace {

TEST(PresetsTest, ListIsSortedAndComplete) {
  std::vector<PresetInfo> list = ListPresets();
  std::vector<std::string> names;
  for (const PresetInfo& p : list) {
    names.push_back(p.name);
    EXPECT_FALSE(p.description.empty()) << p.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"a800", "dgx-a100", "dgx1-v100", "hgx-h100",
                                             "hgx2-16", "pcie-8x-4090-nv4-pairs",
                                             "pcie-8x-l40s"}));
}

// The names --help lists come without parsing the presets, and are the same list.
TEST(PresetsTest, NamesAreTheListsNames) {
  std::vector<std::string> listed;
  for (const PresetInfo& p : ListPresets()) listed.push_back(p.name);
  EXPECT_EQ(PresetNames(), listed);
  EXPECT_EQ(PresetNameList(),
            "a800, dgx-a100, dgx1-v100, hgx-h100, hgx2-16, pcie-8x-4090-nv4-pairs, "
            "pcie-8x-l40s");
}

TEST(PresetsTest, EveryPresetLoadsAndRoundTrips) {
  for (const PresetInfo& p : ListPresets()) {
    SCOPED_TRACE(p.name);
    Result<TopologyFile> f = LoadPresetFile(p.name);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->name, p.name);
    EXPECT_FALSE(f->notes.empty());
    const Topology& t = f->topology;
    EXPECT_EQ(t.source(), "preset " + p.name);
    for (int i = 0; i < t.gpu_count(); ++i) {
      const Gpu& g = t.gpu(i);
      EXPECT_FALSE(g.model.empty());
      EXPECT_GT(g.memory_mib, 0);
      EXPECT_EQ(g.uuid.size(), 40u) << g.uuid;              // "GPU-" + 8-4-4-4-12
      EXPECT_EQ(g.pci_bus_id.size(), 16u) << g.pci_bus_id;  // "00000000:18:00.0"
      EXPECT_GE(g.numa_node, 0);
      EXPECT_FALSE(g.cpu_affinity.empty());
      for (int j = 0; j < t.gpu_count(); ++j) {
        if (i == j) continue;
        EXPECT_NE(t.link(i, j).pcie, PciePath::kUnknown) << i << "-" << j;
        EXPECT_EQ(t.link(i, j), t.link(j, i)) << i << "-" << j;
      }
    }
    Result<TopologyFile> back = ParseTopologyFile(TopologyFileToJson(*f), "roundtrip");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_TRUE(SameTopology(t, back->topology));
    EXPECT_EQ(back->notes, f->notes);
    EXPECT_EQ(back->description, f->description);
    Result<Topology> plain = ParseTopologyJson(TopologyToJson(t), "roundtrip");
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    EXPECT_TRUE(SameTopology(t, *plain));
  }
}

TEST(PresetsTest, Shapes) {
  struct Case {
    std::string preset;
    int gpus;
    std::string model;
    int64_t memory_mib;
    int a, b;  // a pair to look at
    Link want;
    int numa_of_last;
  };
  const Case cases[] = {
      {"hgx-h100", 8, "NVIDIA H100 80GB HBM3", 81559, 0, 1, {18, PciePath::kPxb}, 1},
      {"hgx-h100/node", 8, "", 0, 0, 2, {18, PciePath::kNode}, 1},
      {"hgx-h100/sys", 8, "", 0, 3, 4, {18, PciePath::kSys}, 1},
      {"dgx-a100", 8, "NVIDIA A100-SXM4-80GB", 81920, 6, 7, {12, PciePath::kPxb}, 5},
      {"dgx-a100/sys", 8, "", 0, 1, 2, {12, PciePath::kSys}, 5},
      {"a800", 8, "NVIDIA A800-SXM4-80GB", 81920, 0, 7, {8, PciePath::kSys}, 1},
      {"dgx1-v100", 8, "Tesla V100-SXM2-32GB", 32768, 0, 3, {2, PciePath::kPhb}, 1},
      {"dgx1-v100/nv1", 8, "", 0, 0, 1, {1, PciePath::kPix}, 1},
      {"dgx1-v100/no-nvlink", 8, "", 0, 0, 5, {0, PciePath::kSys}, 1},
      {"dgx1-v100/cross", 8, "", 0, 3, 7, {1, PciePath::kSys}, 1},
      {"pcie-8x-l40s", 8, "NVIDIA L40S", 46068, 0, 1, {0, PciePath::kPix}, 1},
      {"pcie-8x-l40s/node", 8, "", 0, 1, 2, {0, PciePath::kNode}, 1},
      {"pcie-8x-4090-nv4-pairs",
       8,
       "NVIDIA GeForce RTX 4090",
       24564,
       6,
       7,
       {4, PciePath::kPix},
       1},
      {"pcie-8x-4090-nv4-pairs/sys", 8, "", 0, 0, 4, {0, PciePath::kSys}, 1},
      {"hgx2-16", 16, "Tesla V100-SXM3-32GB", 32768, 0, 15, {6, PciePath::kSys}, 1},
      {"hgx2-16/pxb", 16, "", 0, 8, 11, {6, PciePath::kPxb}, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.preset);
    std::string name = c.preset.substr(0, c.preset.find('/'));
    Result<Topology> t = LoadPreset(name);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->gpu_count(), c.gpus);
    if (!c.model.empty()) {
      EXPECT_EQ(t->gpu(0).model, c.model);
    }
    if (c.memory_mib) {
      EXPECT_EQ(t->gpu(0).memory_mib, c.memory_mib);
    }
    EXPECT_EQ(t->link(c.a, c.b), c.want);
    EXPECT_EQ(t->gpu(c.gpus - 1).numa_node, c.numa_of_last);
  }
}

TEST(PresetsTest, DgxA100NumaAndAffinityFollowTheMachine) {
  Result<Topology> t = LoadPreset("dgx-a100");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->gpu(0).numa_node, 3);
  EXPECT_EQ(t->gpu(0).cpu_affinity, "48-63,176-191");
  EXPECT_EQ(t->gpu(2).numa_node, 1);
  EXPECT_EQ(t->nics().size(), 12u);
}

TEST(PresetsTest, UnknownPresetListsKnownOnes) {
  Result<Topology> t = LoadPreset("dgx-h200");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("unknown preset 'dgx-h200'"), std::string::npos);
  EXPECT_NE(t.status().message().find("a800, dgx-a100, dgx1-v100, hgx-h100, hgx2-16"),
            std::string::npos)
      << t.status().message();
}

}  // namespace
}  // namespace hachi::topo
