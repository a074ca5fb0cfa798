// commtest's expectations and checks (pure), and RunCommtest end to end on the fake
// libcuda.so.1 (src/diag/testdata/fake_cuda/) with link facts from the fake NVML.
#include "diag/commtest.h"

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

LinkFacts FactsOf(const std::string& preset, int pcie_gen, int nvlink_version) {
  LinkFacts f;
  Result<topo::Topology> t = topo::LoadPreset(preset);
  EXPECT_TRUE(t.ok());
  f.topology = *t;
  for (int i = 0; i < t->gpu_count(); ++i) {
    GpuLinkFacts g;
    g.index = i;
    g.pcie = {pcie_gen, 16, pcie_gen, 16};
    g.nvlink_version = nvlink_version;
    f.gpus.push_back(g);
  }
  return f;
}

TEST(CommtestExpectTest, PairHostAndAllPairs) {
  LinkFacts h100 = FactsOf("hgx-h100", 5, 4);
  EXPECT_DOUBLE_EQ(ExpectedPairGbps(h100, 0, 7), 18 * 25.0);  // NV18 over NVSwitch
  EXPECT_NEAR(ExpectedHostGbps(h100, 3), 63.015, 1e-3);
  EXPECT_DOUBLE_EQ(ExpectedAllPairsGbps(h100, 0, {1, 2, 3, 4, 5, 6, 7}), 450.0);
  LinkFacts l40s = FactsOf("pcie-8x-l40s", 4, 0);
  EXPECT_NEAR(ExpectedPairGbps(l40s, 0, 1), 31.508, 1e-3);  // the PCIe bottleneck
  l40s.gpus[1].pcie.width = 8;                              // a downtrained peer
  EXPECT_NEAR(ExpectedPairGbps(l40s, 0, 1), 15.754, 1e-3);
  LinkFacts dgx1 = FactsOf("dgx1-v100", 3, 2);
  const int n01 = dgx1.topology.link(0, 1).nvlinks;
  ASSERT_GT(n01, 0);
  EXPECT_DOUBLE_EQ(ExpectedPairGbps(dgx1, 0, 1), n01 * 25.0);
}

struct Measured {
  TempDir dir;
  Result<CommtestReport> report = Unavailable("not run");
};

void RunOn(const std::string& preset, const std::string& degrade, Measured* out,
           std::vector<int> gpus = {}) {
  Result<topo::Topology> t = topo::LoadPreset(preset);
  ASSERT_TRUE(t.ok());
  ScopedEnv topo_env("HACHI_FAKE_NVML_TOPOLOGY",
                     out->dir.Write("topo.json", topo::TopologyToJson(*t)));
  ScopedEnv degrade_env("HACHI_FAKE_CUDA_DEGRADE", degrade);
  topo::NvmlProbeOptions nopts;
  nopts.library = FakeNvmlLibrary();
  nopts.sysfs_root = out->dir.path() + "/sys";
  Result<topo::Topology> probed = topo::ProbeNvml(nopts);
  ASSERT_TRUE(probed.ok()) << probed.status().ToString();
  Result<const topo::NvmlApi*> nvml = topo::LoadNvml(FakeNvmlLibrary());
  ASSERT_TRUE(nvml.ok());
  ASSERT_EQ((*nvml)->init(), 0);
  Result<LinkFacts> facts = ProbeLinkFacts(**nvml, *probed);
  (*nvml)->shutdown();
  ASSERT_TRUE(facts.ok());
  Result<const CudaApi*> cu = LoadCuda(FakeCudaLibrary());
  ASSERT_TRUE(cu.ok()) << cu.status().ToString();
  CommtestOptions opts;
  opts.size_bytes = int64_t{64} << 20;
  opts.repeats = 2;
  opts.latency_iters = 3;
  opts.gpus = gpus;
  out->report = RunCommtest(**cu, &*facts, opts);
}

TEST(CommtestRunTest, HealthyHgxH100Passes) {
  Measured r;
  RunOn("hgx-h100", "", &r);
  ASSERT_TRUE(r.report.ok()) << r.report.status().ToString();
  EXPECT_EQ(r.report->gpus.size(), 8u);
  EXPECT_EQ(r.report->pairs.size(), 28u);
  for (const CheckItem& c : r.report->checks) {
    EXPECT_NE(c.status, CheckStatus::kFail) << c.check << ": " << c.evidence;
  }
  EXPECT_EQ(CommtestExitCode(*r.report), 0);
  const PairResult& p = r.report->pairs[0];
  EXPECT_NEAR(p.ab.ratio(), 0.85, 0.02);
  EXPECT_NEAR(p.bidir.ratio(), 0.85, 0.02);
  EXPECT_GT(p.latency_us, 1.0);
  EXPECT_NEAR(r.report->gpus[0].h2d.ratio(), 0.85, 0.02);
  EXPECT_NEAR(r.report->gpus[0].all_pairs.ratio(), 0.85, 0.02);
  const std::string json = RenderCommtestJson(*r.report);
  EXPECT_NE(json.find("\"checks\""), std::string::npos);
  const std::string text = RenderCommtestText(*r.report);
  EXPECT_NE(text.find("NV18"), std::string::npos) << text;
}

// A pair at 40 % of its NVLinks: flagged, with its ratio, and commtest exits 2.
TEST(CommtestRunTest, DegradedNvLinkPairFails) {
  Measured r;
  RunOn("hgx-h100", "2-5:0.40", &r);
  ASSERT_TRUE(r.report.ok()) << r.report.status().ToString();
  bool flagged = false;
  for (const CheckItem& c : r.report->checks) {
    if (c.status != CheckStatus::kFail) continue;
    // The pair itself, and GPUs 2 and 5 in the all-pairs run (their slowest copy).
    if (c.check == "commtest-pair-bandwidth") {
      EXPECT_EQ(c.gpus, (std::vector<int>{2, 5})) << c.evidence;
      EXPECT_NE(c.evidence.find("40 %"), std::string::npos) << c.evidence;
      flagged = true;
    } else {
      EXPECT_EQ(c.check, "commtest-all-pairs") << c.evidence;
      ASSERT_EQ(c.gpus.size(), 1u);
      EXPECT_TRUE(c.gpus[0] == 2 || c.gpus[0] == 5) << c.evidence;
    }
  }
  EXPECT_TRUE(flagged);
  EXPECT_EQ(CommtestExitCode(*r.report), 2);
}

TEST(CommtestRunTest, PcieBoxAndDgx1Pass) {
  for (const char* preset : {"pcie-8x-l40s", "dgx1-v100"}) {
    SCOPED_TRACE(preset);
    Measured r;
    RunOn(preset, "", &r);
    ASSERT_TRUE(r.report.ok()) << r.report.status().ToString();
    for (const CheckItem& c : r.report->checks) {
      EXPECT_NE(c.status, CheckStatus::kFail) << c.check << ": " << c.evidence;
    }
  }
}

// --gpu 3: only GPU 3 and the pairs it is in.
TEST(CommtestRunTest, OneGpu) {
  Measured r;
  RunOn("hgx-h100", "", &r, {3});
  ASSERT_TRUE(r.report.ok()) << r.report.status().ToString();
  ASSERT_EQ(r.report->gpus.size(), 1u);
  EXPECT_EQ(r.report->gpus[0].index, 3);
  EXPECT_EQ(r.report->pairs.size(), 7u);
}

}  // namespace
}  // namespace hachi::diag
