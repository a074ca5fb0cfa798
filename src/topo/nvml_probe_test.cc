// ProbeNvml through the real dlopen path, against the fake libnvidia-ml.so.1 built from
// src/topo/testdata/fake_nvml/ and loaded by path.
#include "topo/nvml_probe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "core/cpulist.h"
#include "topo/presets.h"
#include "topo/topology_file.h"
#include "topo/topology_testing.h"

namespace hachi::topo {
namespace {

namespace fs = std::filesystem;

NvmlProbeOptions FakeOptions(const TempDir& dir) {
  NvmlProbeOptions opts;
  opts.library = HACHI_FAKE_NVML;
  opts.sysfs_root = dir.path() + "/sys";  // empty: NUMA comes from NVML
  return opts;
}

TEST(NvmlProbeTest, FakeLibraryIsNamedLikeTheRealOne) {
  EXPECT_EQ(fs::path(HACHI_FAKE_NVML).filename(), "libnvidia-ml.so.1");
}

TEST(NvmlProbeTest, ProbedTopologyEqualsPreset) {
  const char* presets[] = {"hgx-h100", "dgx1-v100", "pcie-8x-l40s",          "hgx2-16",
                           "dgx-a100", "a800",      "pcie-8x-4090-nv4-pairs"};
  for (const char* name : presets) {
    SCOPED_TRACE(name);
    Result<Topology> want = LoadPreset(name);
    ASSERT_TRUE(want.ok());
    TempDir dir;
    ScopedEnv env("HACHI_FAKE_NVML_TOPOLOGY",
                  dir.Write("topo.json", TopologyToJson(*want)));
    Result<Topology> got = ProbeNvml(FakeOptions(dir));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    // NVML knows nothing of NICs; everything else must come back as described.
    want->mutable_nics().clear();
    EXPECT_TRUE(SameTopology(*want, *got));
    EXPECT_EQ(got->source(), std::string("NVML (") + HACHI_FAKE_NVML + ")");
    EXPECT_TRUE(got->read_findings().empty()) << got->read_findings().front().code << ": "
                                              << got->read_findings().front().message;
  }
}

TEST(NvmlProbeTest, SysfsNumaNodeWinsOverNvml) {
  Result<Topology> want = LoadPreset("hgx-h100");
  ASSERT_TRUE(want.ok());
  TempDir dir;
  ScopedEnv env("HACHI_FAKE_NVML_TOPOLOGY",
                dir.Write("topo.json", TopologyToJson(*want)));
  // GPU 0 is 00000000:18:00.0; sysfs names it in lower case with a 4-digit domain.
  fs::create_directories(dir.path() + "/sys/bus/pci/devices/0000:18:00.0");
  dir.Write("sys/bus/pci/devices/0000:18:00.0/numa_node", "5\n");
  Result<Topology> got = ProbeNvml(FakeOptions(dir));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->gpu(0).numa_node, 5);
  EXPECT_EQ(got->gpu(1).numa_node, 0);
}

// Neither sysfs nor NVML names the GPU's node (a VM): the node whose CPUs hold the GPU's
// CPU affinity does, as nvidia-smi's NUMA Affinity; none when the affinity spans nodes.
TEST(NvmlProbeTest, NumaNodeFromCpuAffinityWhenNvmlHasNone) {
  Result<Topology> want = LoadPreset("hgx-h100");
  ASSERT_TRUE(want.ok());
  TempDir dir;
  ScopedEnv env("HACHI_FAKE_NVML_TOPOLOGY",
                dir.Write("topo.json", TopologyToJson(*want)));
  ScopedEnv off("HACHI_FAKE_NVML_UNSUPPORTED", "nvmlDeviceGetNumaNodeId");
  {
    Result<Topology> got = ProbeNvml(FakeOptions(dir));  // no node cpulists: unknown
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->gpu(0).numa_node, -1);
  }
  // The preset's two sockets as the kernel lists them.
  for (int node : {0, 1}) {
    std::vector<int> cpus;
    for (int g = 0; g < want->gpu_count(); ++g) {
      if (want->gpu(g).numa_node != node) continue;
      Result<std::vector<int>> c = ParseCpuList(want->gpu(g).cpu_affinity);
      ASSERT_TRUE(c.ok());
      cpus.insert(cpus.end(), c->begin(), c->end());
    }
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    const std::string d = "sys/devices/system/node/node" + std::to_string(node);
    fs::create_directories(dir.path() + "/" + d);
    dir.Write(d + "/cpulist", FormatCpuList(cpus) + "\n");
  }
  Result<Topology> got = ProbeNvml(FakeOptions(dir));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (int g = 0; g < want->gpu_count(); ++g) {
    EXPECT_EQ(got->gpu(g).numa_node, want->gpu(g).numa_node) << "GPU" << g;
  }
}

TEST(NvmlProbeTest, UnsupportedQueriesDegradeToFindings) {
  struct Case {
    std::string name, unsupported;
    std::string finding;  // expected in a read finding's message
  };
  const Case cases[] = {
      {"no_ancestor", "nvmlDeviceGetTopologyCommonAncestor",
       "nvmlDeviceGetTopologyCommonAncestor failed"},
      {"no_affinity", "nvmlDeviceGetCpuAffinity", "nvmlDeviceGetCpuAffinity failed"},
      {"no_name", "nvmlDeviceGetName", "nvmlDeviceGetName failed for GPU(s) 0-7"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    ScopedEnv env("HACHI_FAKE_NVML_TOPOLOGY",
                  dir.Write("topo.json", TopologyToJson(*LoadPreset("hgx-h100"))));
    ScopedEnv off("HACHI_FAKE_NVML_UNSUPPORTED", c.unsupported);
    Result<Topology> got = ProbeNvml(FakeOptions(dir));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->gpu_count(), 8);
    EXPECT_EQ(got->link(0, 5).nvlinks, 18);  // NVLinks are still read
    bool found = false;
    for (const Finding& f : got->read_findings()) {
      found |= f.message.find(c.finding) != std::string::npos;
    }
    EXPECT_TRUE(found);
  }
}

TEST(NvmlProbeTest, RemoteDeviceTypeIsOptional) {
  // Without the type, links to bus ids that are not GPUs are NVSwitch links.
  TempDir dir;
  ScopedEnv env("HACHI_FAKE_NVML_TOPOLOGY",
                dir.Write("topo.json", TopologyToJson(*LoadPreset("dgx-a100"))));
  ScopedEnv off("HACHI_FAKE_NVML_UNSUPPORTED", "nvmlDeviceGetNvLinkRemoteDeviceType");
  Result<Topology> got = ProbeNvml(FakeOptions(dir));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->link(2, 7), (Link{12, PciePath::kSys}));
}

TEST(NvmlProbeTest, Errors) {
  TempDir dir;
  std::string topo = dir.Write("topo.json", TopologyToJson(*LoadPreset("a800")));
  struct Case {
    std::string name, library, init_error, topology;
    std::string want;
  };
  const Case cases[] = {
      {"missing_library", dir.path() + "/libnvidia-ml.so.1", "", topo,
       "cannot load NVML (" + dir.path() + "/libnvidia-ml.so.1)"},
      {"not_a_library", topo, "", topo, "cannot load NVML"},
      {"init_fails", HACHI_FAKE_NVML, "9", topo,
       "failed to initialise: Driver Not Loaded (NVML error 9)"},
      {"fake_without_topology", HACHI_FAKE_NVML, "", dir.path() + "/none.json",
       "failed to initialise: fake NVML: cannot open"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ScopedEnv env("HACHI_FAKE_NVML_TOPOLOGY", c.topology);
    ScopedEnv init("HACHI_FAKE_NVML_INIT_ERROR", c.init_error);
    NvmlProbeOptions opts = FakeOptions(dir);
    opts.library = c.library;
    Result<Topology> got = ProbeNvml(opts);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(got.status().message().find(c.want), std::string::npos)
        << got.status().message();
  }
}

TEST(NvmlProbeTest, LibraryFromEnvironment) {
  NvmlProbeOptions opts;
  {
    ScopedEnv env("HACHI_NVML_LIBRARY", "/opt/nvml/libnvidia-ml.so.1");
    EXPECT_EQ(NvmlLibraryPath(opts), "/opt/nvml/libnvidia-ml.so.1");
    opts.library = "/explicit.so";
    EXPECT_EQ(NvmlLibraryPath(opts), "/explicit.so");
  }
  ScopedEnv env("HACHI_NVML_LIBRARY", "");
  EXPECT_EQ(NvmlLibraryPath(NvmlProbeOptions{}), "libnvidia-ml.so.1");
}

}  // namespace
}  // namespace hachi::topo
