// The link arithmetic, and ProbeLinkFacts against the fake libnvidia-ml.so.1
// (src/topo/testdata/fake_nvml/) loaded by path.
#include "diag/link_facts.h"

#include <gtest/gtest.h>

#include <string>

#include "core/testing/paths.h"
#include "topo/nvml_probe.h"
#include "topo/presets.h"
#include "topo/topology_file.h"
#include "topo/topology_testing.h"

namespace hachi::diag {
namespace {

using topo::ScopedEnv;
using topo::TempDir;

TEST(LinkFactsTest, NvLinkGbpsPerGeneration) {
  struct Row {
    int version;
    double gbps;
  } rows[] = {{0, 0}, {1, 20}, {2, 25}, {3, 25}, {4, 25}, {5, 50}, {6, 0}};
  for (const Row& r : rows) {
    EXPECT_DOUBLE_EQ(NvLinkGbps(r.version), r.gbps) << "NVLink " << r.version;
  }
}

TEST(LinkFactsTest, PcieGbpsAfterLineCoding) {
  struct Row {
    const char* name;
    int gen, width;
    double gbps;
  } rows[] = {
      {"gen1 x16", 1, 16, 4.0},
      {"gen2 x8", 2, 8, 4.0},
      {"gen3 x16", 3, 16, 15.753846153846155},
      {"gen4 x16", 4, 16, 31.50769230769231},
      {"gen5 x16", 5, 16, 63.01538461538462},
      {"gen4 x8 (downtrained)", 4, 8, 15.753846153846155},
      {"gen6 x16", 6, 16, 121.0},
      {"unknown gen", 0, 16, 0},
      {"unknown width", 4, 0, 0},
      {"gen7", 7, 16, 0},
  };
  for (const Row& r : rows) {
    EXPECT_NEAR(PcieGbps(r.gen, r.width), r.gbps, 1e-9) << r.name;
  }
}

struct Probed {
  TempDir dir;
  Result<LinkFacts> facts = Unavailable("not probed");
};

// Probes `preset` on the fake NVML with `events` as its events file.
void Probe(const std::string& preset, const std::string& events, Probed* out) {
  Result<topo::Topology> t = topo::LoadPreset(preset);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ScopedEnv topo_env("HACHI_FAKE_NVML_TOPOLOGY",
                     out->dir.Write("topo.json", topo::TopologyToJson(*t)));
  ScopedEnv events_env("HACHI_FAKE_NVML_EVENTS", out->dir.Write("events", events));
  topo::NvmlProbeOptions opts;
  opts.library = FakeNvmlLibrary();
  opts.sysfs_root = out->dir.path() + "/sys";
  Result<topo::Topology> probed = topo::ProbeNvml(opts);
  ASSERT_TRUE(probed.ok()) << probed.status().ToString();
  Result<const topo::NvmlApi*> api = topo::LoadNvml(FakeNvmlLibrary());
  ASSERT_TRUE(api.ok());
  ASSERT_EQ((*api)->init(), 0);
  out->facts = ProbeLinkFacts(**api, *probed);
  (*api)->shutdown();
}

TEST(LinkFactsTest, HealthyHgxH100) {
  Probed p;
  Probe("hgx-h100", "", &p);
  ASSERT_TRUE(p.facts.ok()) << p.facts.status().ToString();
  ASSERT_EQ(p.facts->gpus.size(), 8u);
  for (const GpuLinkFacts& g : p.facts->gpus) {
    EXPECT_EQ(g.pcie.gen, 5);
    EXPECT_EQ(g.pcie.width, 16);
    EXPECT_EQ(g.pcie.max_gen, 5);
    EXPECT_EQ(g.pcie.max_width, 16);
    EXPECT_EQ(g.nvlinks_up, 18);
    EXPECT_EQ(g.nvlink_version, 4);
  }
  EXPECT_EQ(p.facts->topology.link(0, 7).nvlinks, 18);
}

TEST(LinkFactsTest, PcieBoxHasNoNvLink) {
  Probed p;
  Probe("pcie-8x-l40s", "", &p);
  ASSERT_TRUE(p.facts.ok());
  for (const GpuLinkFacts& g : p.facts->gpus) {
    EXPECT_EQ(g.pcie.gen, 4);
    EXPECT_EQ(g.nvlinks_up, 0);
    EXPECT_EQ(g.nvlink_version, 0);
  }
}

TEST(LinkFactsTest, DowntrainedLinkAndLinkDown) {
  Probed p;
  Probe("dgx1-v100", "pcie 3 3 8\nnvlink 5 0 down\n", &p);
  ASSERT_TRUE(p.facts.ok());
  EXPECT_EQ(p.facts->gpus[3].pcie.gen, 3);
  EXPECT_EQ(p.facts->gpus[3].pcie.width, 8);
  EXPECT_EQ(p.facts->gpus[3].pcie.max_width, 16);
  EXPECT_EQ(p.facts->gpus[0].nvlink_version, 2);
  EXPECT_EQ(p.facts->gpus[5].nvlinks_up, p.facts->gpus[4].nvlinks_up - 1);
}

}  // namespace
}  // namespace hachi::diag
