// DiscoverLocalTopology's fallbacks: the fake NVML, then a fake `nvidia-smi` script that
// prints a saved `nvidia-smi topo -m` of a DGX A100 (testdata/nvidia-smi/).
#include "topo/discover.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "core/strings.h"
#include "core/testing/paths.h"
#include "topo/presets.h"
#include "topo/topology_file.h"
#include "topo/topology_testing.h"

namespace hachi::topo {
namespace {

const std::string kMatrixFixture =
    SourceDir() + "/testdata/nvidia-smi/topo-dgx-a100-mlx5-names.txt";

// `--query-gpu=index,uuid,name,memory.total,pci.bus_id --format=csv,noheader,nounits`
// as nvidia-smi would print it for the dgx-a100 preset.
std::string QueryCsv() {
  Topology t = *LoadPreset("dgx-a100");
  std::string csv;
  for (const Gpu& g : t.gpus()) {
    csv += std::to_string(g.index) + ", " + g.uuid + ", " + g.model + ", " +
           std::to_string(g.memory_mib) + ", " + g.pci_bus_id + "\n";
  }
  return csv;
}

// A fake nvidia-smi: logs its arguments, answers the two queries, runs `extra` first.
std::string FakeSmi(const TempDir& dir, const std::string& extra = "") {
  std::string csv = dir.Write("query.csv", QueryCsv());
  std::string script = "#!/bin/sh\necho \"$@\" >> " + dir.path() + "/args.log\n" + extra +
                       "case \"$1\" in\n"
                       "  topo) cat '" +
                       kMatrixFixture +
                       "' ;;\n"
                       "  --query-gpu=*) cat '" +
                       csv +
                       "' ;;\n"
                       "  *) exit 2 ;;\n"
                       "esac\n";
  std::string path = dir.Write("nvidia-smi", script);
  chmod(path.c_str(), 0755);
  return path;
}

DiscoverOptions NoNvml(const TempDir& dir) {
  DiscoverOptions opts;
  opts.nvml.library = dir.path() + "/no-such/libnvidia-ml.so.1";
  return opts;
}

TEST(DiscoverTest, UsesNvmlFirst) {
  TempDir dir;
  ScopedEnv env("HACHI_FAKE_NVML_TOPOLOGY",
                dir.Write("topo.json", TopologyToJson(*LoadPreset("hgx-h100"))));
  DiscoverOptions opts;
  opts.nvml.library = FakeNvmlLibrary();
  opts.nvml.sysfs_root = dir.path();
  opts.nvidia_smi = FakeSmi(dir);
  Result<Topology> t = DiscoverLocalTopology(opts);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->source(), "NVML (" + FakeNvmlLibrary() + ")");
  EXPECT_EQ(t->link(0, 7).nvlinks, 18);
  std::string unused;
  EXPECT_FALSE(ReadFile(dir.path() + "/args.log", &unused).has_value());
}

TEST(DiscoverTest, FallsBackToNvidiaSmi) {
  TempDir dir;
  DiscoverOptions opts = NoNvml(dir);
  opts.nvidia_smi = FakeSmi(dir);
  Result<Topology> t = DiscoverLocalTopology(opts);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->source(), "nvidia-smi (" + opts.nvidia_smi + ")");
  ASSERT_EQ(t->gpu_count(), 8);
  EXPECT_EQ(t->link(0, 1).nvlinks, 12);
  EXPECT_EQ(t->gpu(0).model, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(t->gpu(7).pci_bus_id, "00000000:BD:00.0");
  EXPECT_EQ(t->gpu(2).numa_node, 1);
  bool nvml_noted = false;
  for (const Finding& f : t->read_findings()) nvml_noted |= f.code == "nvml-unavailable";
  EXPECT_TRUE(nvml_noted);
  EXPECT_EQ(*ReadFile(dir.path() + "/args.log", nullptr),
            "topo -m\n--query-gpu=index,uuid,name,memory.total,pci.bus_id "
            "--format=csv,noheader,nounits\n");
}

TEST(DiscoverTest, NvidiaSmiFromEnvironment) {
  TempDir dir;
  ScopedEnv env("HACHI_NVIDIA_SMI", FakeSmi(dir));
  DiscoverOptions opts = NoNvml(dir);
  EXPECT_EQ(NvidiaSmiPath(opts), dir.path() + "/nvidia-smi");
  Result<Topology> t = DiscoverLocalTopology(opts);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->gpu_count(), 8);
}

TEST(DiscoverTest, Failures) {
  struct Case {
    std::string name;
    std::string smi_extra;  // shell run by the fake nvidia-smi before answering
    bool smi_missing;
    std::string want;
  };
  const Case cases[] = {
      {"nothing_found", "", true, "nvidia-smi: "},
      {"driver_down",
       "echo 'NVIDIA-SMI has failed because it couldn'\"'\"'t communicate with the "
       "NVIDIA "
       "driver.'; exit 9\n",
       false, "failed (exit status 9): NVIDIA-SMI has failed"},
      {"hangs", "sleep 5\n", false, "did not finish within"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    DiscoverOptions opts = NoNvml(dir);
    opts.nvidia_smi =
        c.smi_missing ? dir.path() + "/no-nvidia-smi" : FakeSmi(dir, c.smi_extra);
    opts.command_timeout_ms = 300;
    Result<Topology> t = DiscoverLocalTopology(opts);
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), StatusCode::kUnavailable);
    const std::string& m = t.status().message();
    EXPECT_NE(m.find(c.want), std::string::npos) << m;
    EXPECT_NE(m.find("neither NVML"), std::string::npos) << m;
    EXPECT_NE(m.find("--preset NAME"), std::string::npos) << m;
    EXPECT_NE(m.find("--file PATH"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace hachi::topo
