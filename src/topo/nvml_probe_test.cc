// ProbeNvml through the real dlopen path, against the fake libnvidia-ml.so.1 built from
// src/topo/testdata/fake_nvml/ and loaded by path.
#include "topo/nvml_probe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <string>

#include "core/cpulist.h"
#include "core/testing/paths.h"
#include "topo/presets.h"
#include "topo/topology_file.h"
#include "topo/topology_testing.h"

namespace hachi::topo {
namespace {

namespace fs = std::filesystem;

NvmlProbeOptions FakeOptions(const TempDir& dir) {
  NvmlProbeOptions opts;
  opts.library = FakeNvmlLibrary();
  opts.sysfs_root = dir.path() + "/sys";  // empty: NUMA comes from NVML
  return opts;
}

TEST(NvmlProbeTest, FakeLibraryIsNamedLikeTheRealOne) {
  EXPECT_EQ(fs::path(FakeNvmlLibrary()).filename(), "libnvidia-ml.so.1");
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
    EXPECT_EQ(got->source(), "NVML (" + FakeNvmlLibrary() + ")");
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

// An HGX H100 whose GPU 0 is split as a topology file says, GPU 1 in MIG mode without
// instances: the probe reads back the file's layout.
Topology MigNode() {
  Topology t = *LoadPreset("hgx-h100");
  Gpu& g0 = t.mutable_gpu(0);
  g0.mig_enabled = true;
  g0.mig_devices = {
      {"3g.40gb", "MIG-d771d938-b556-4f9d-b742-2dd26b864023", 2, 0, 40192},
      {"2g.20gb", "MIG-08bce7f3-bac7-4715-b56f-91541f15fe37", 3, 0, 19968},
      {"1g.10gb", "MIG-761ea9d1-82ac-41cb-9e19-d3593973f144", 9, 0, 9856},
      {"1g.10gb", "MIG-a5b1e9ac-1c96-4ca0-b57c-53878e7531dc", 10, 0, 9856},
  };
  t.mutable_gpu(1).mig_enabled = true;
  return t;
}

TEST(NvmlProbeTest, MigDevicesFromTheFileComeBack) {
  const Topology want = MigNode();
  TempDir dir;
  ScopedEnv env("HACHI_FAKE_NVML_TOPOLOGY", dir.Write("topo.json", TopologyToJson(want)));
  Result<Topology> got = ProbeNvml(FakeOptions(dir));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  Topology expected = want;
  expected.mutable_nics().clear();
  EXPECT_TRUE(SameTopology(expected, *got));
  ASSERT_EQ(got->read_findings().size(), 1u);
  const Finding& f = got->read_findings()[0];
  EXPECT_EQ(f.code, "mig-no-instances");
  EXPECT_EQ(f.severity, Severity::kWarning);
  EXPECT_EQ(f.gpus.ToString(), "1");
  EXPECT_NE(f.message.find("MIG on, no instances: the GPU cannot run jobs until "
                           "instances are created"),
            std::string::npos)
      << f.message;
}

// The events file's migdev line: empty slots are skipped, ids and memory filled in, and
// the UUIDs are the same in every run. A mode change pending a reset is not MIG yet.
TEST(NvmlProbeTest, MigDevicesFromTheEventsLine) {
  TempDir dir;
  ScopedEnv env("HACHI_FAKE_NVML_TOPOLOGY",
                dir.Write("topo.json", TopologyToJson(*LoadPreset("hgx-h100"))));
  ScopedEnv events(
      "HACHI_FAKE_NVML_EVENTS",
      dir.Write("events", "migdev 3 3g.40gb - 1g.10gb/9/0 1g.10gb\nmig 4 0 1\n"));
  Result<Topology> got = ProbeNvml(FakeOptions(dir));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const Gpu& g = got->gpu(3);
  EXPECT_TRUE(g.mig_enabled);
  ASSERT_EQ(g.mig_devices.size(), 3u);
  EXPECT_EQ(MigLayoutText(g.mig_devices), "3g.40gb, 1g.10gb x2");
  EXPECT_EQ(g.mig_devices[0].gpu_instance, 1);  // slot 0
  EXPECT_EQ(g.mig_devices[1].gpu_instance, 9);  // as written
  EXPECT_EQ(g.mig_devices[2].gpu_instance, 4);  // slot 3
  EXPECT_EQ(g.mig_devices[2].compute_instance, 0);
  EXPECT_EQ(g.mig_devices[0].memory_mib, 38912);
  EXPECT_EQ(g.mig_devices[0].slices(), 3);
  std::regex uuid("MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
  for (const MigDevice& m : g.mig_devices) {
    EXPECT_TRUE(std::regex_match(m.uuid, uuid)) << m.uuid;
  }
  EXPECT_NE(g.mig_devices[1].uuid, g.mig_devices[2].uuid);
  EXPECT_FALSE(got->gpu(4).mig_enabled);
  EXPECT_FALSE(got->gpu(0).mig_enabled);
  Result<Topology> again = ProbeNvml(FakeOptions(dir));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->gpu(3).mig_devices, g.mig_devices);
}

TEST(NvmlProbeTest, MigListingThatFailsIsAFinding) {
  TempDir dir;
  ScopedEnv env("HACHI_FAKE_NVML_TOPOLOGY",
                dir.Write("topo.json", TopologyToJson(MigNode())));
  ScopedEnv off("HACHI_FAKE_NVML_UNSUPPORTED", "nvmlDeviceGetMigDeviceHandleByIndex");
  Result<Topology> got = ProbeNvml(FakeOptions(dir));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->gpu(0).mig_enabled);
  EXPECT_TRUE(got->gpu(0).mig_devices.empty());
  std::string codes;
  for (const Finding& f : got->read_findings()) {
    codes += f.code + "(" + f.gpus.ToString() + ") ";
  }
  // Unknown, not absent: no mig-no-instances for either GPU.
  EXPECT_EQ(codes, "mig-unreadable(0,1) nvml-query-failed(0,1) ");
}

// The fake's MIG handles answer the calls a MIG-aware user makes (the probe, later the
// agent's process list), the way NVML does.
TEST(NvmlProbeTest, FakeMigHandles) {
  TempDir dir;
  ScopedEnv env("HACHI_FAKE_NVML_TOPOLOGY",
                dir.Write("topo.json", TopologyToJson(MigNode())));
  ScopedEnv events("HACHI_FAKE_NVML_EVENTS",
                   dir.Write("events", "proc 0 4242 100 9 0\nproc 0 77 5\n"));
  Result<const NvmlApi*> loaded = LoadNvml(FakeNvmlLibrary());
  ASSERT_TRUE(loaded.ok());
  const NvmlApi& api = **loaded;
  ASSERT_TRUE(api.has_mig() && api.is_mig_handle && api.get_mig_parent &&
              api.get_gpu_instance_id && api.get_compute_instance_id);
  ASSERT_EQ(api.init(), nvml::kSuccess);
  nvml::Device gpu0 = nullptr, gpu2 = nullptr, mig = nullptr, parent = nullptr;
  ASSERT_EQ(api.get_handle(0, &gpu0), nvml::kSuccess);
  ASSERT_EQ(api.get_handle(2, &gpu2), nvml::kSuccess);
  unsigned max = 0, is_mig = 1, gi = 0, ci = 9;
  EXPECT_EQ(api.get_max_mig_count(gpu0, &max), nvml::kSuccess);
  EXPECT_EQ(max, 7u);
  EXPECT_EQ(api.get_max_mig_count(gpu2, &max), nvml::kSuccess);
  EXPECT_EQ(max, 0u);  // MIG off
  EXPECT_EQ(api.get_mig_handle(gpu0, 4, &mig), nvml::kErrorNotFound);
  EXPECT_EQ(api.get_mig_handle(gpu2, 0, &mig), nvml::kErrorNotSupported);
  ASSERT_EQ(api.get_mig_handle(gpu0, 2, &mig), nvml::kSuccess);
  EXPECT_EQ(api.is_mig_handle(gpu0, &is_mig), nvml::kSuccess);
  EXPECT_EQ(is_mig, 0u);
  EXPECT_EQ(api.is_mig_handle(mig, &is_mig), nvml::kSuccess);
  EXPECT_EQ(is_mig, 1u);
  EXPECT_EQ(api.get_mig_parent(mig, &parent), nvml::kSuccess);
  EXPECT_EQ(parent, gpu0);
  char name[nvml::kDeviceNameBufferSize] = {};
  EXPECT_EQ(api.get_name(mig, name, sizeof(name)), nvml::kSuccess);
  EXPECT_STREQ(name, "NVIDIA H100 80GB HBM3 MIG 1g.10gb");
  EXPECT_EQ(api.get_gpu_instance_id(mig, &gi), nvml::kSuccess);
  EXPECT_EQ(api.get_compute_instance_id(mig, &ci), nvml::kSuccess);
  EXPECT_EQ(gi, 9u);
  EXPECT_EQ(ci, 0u);
  EXPECT_EQ(api.get_gpu_instance_id(gpu0, &gi), nvml::kErrorNotSupported);
  // Calls for whole GPUs refuse a MIG handle.
  nvml::PciInfo pci = {};
  EXPECT_EQ(api.get_pci(mig, &pci), nvml::kErrorInvalidArgument);
  // The GPU's handle lists every process with its instance; the MIG device's, its own.
  nvml::ProcessInfo procs[4] = {};
  unsigned n = 4;
  ASSERT_EQ(api.get_processes(gpu0, &n, procs), nvml::kSuccess);
  ASSERT_EQ(n, 2u);
  EXPECT_EQ(procs[0].pid, 77u);
  EXPECT_EQ(procs[0].gpu_instance_id, 0xFFFFFFFFu);
  EXPECT_EQ(procs[1].pid, 4242u);
  EXPECT_EQ(procs[1].gpu_instance_id, 9u);
  EXPECT_EQ(procs[1].compute_instance_id, 0u);
  n = 4;
  ASSERT_EQ(api.get_processes(mig, &n, procs), nvml::kSuccess);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(procs[0].pid, 4242u);
  EXPECT_EQ(procs[0].used_gpu_memory, 100ULL << 20);
  nvml::Device other = nullptr;
  ASSERT_EQ(api.get_mig_handle(gpu0, 0, &other), nvml::kSuccess);
  n = 4;
  ASSERT_EQ(api.get_processes(other, &n, procs), nvml::kSuccess);
  EXPECT_EQ(n, 0u);
  api.shutdown();
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
      {"init_fails", FakeNvmlLibrary(), "9", topo,
       "failed to initialise: Driver Not Loaded (NVML error 9)"},
      {"fake_without_topology", FakeNvmlLibrary(), "", dir.path() + "/none.json",
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
