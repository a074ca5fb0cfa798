// Golden tests of `hachi doctor`: the real binary on the fake libnvidia-ml.so.1
// (src/topo/testdata/fake_nvml/: a preset's node, faults from an events file) and a fake
// host tree (diag/doctor_testing.h) under --root. HACHI_UPDATE_GOLDEN=1 rewrites
// src/cli/testdata/doctor/*.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_testing.h"
#include "cli/golden_testing.h"
#include "core/testing/paths.h"
#include "diag/doctor_testing.h"
#include "topo/topology_testing.h"

namespace {

using hachi::cli::testing::CmdResult;
using hachi::cli::testing::ExpectGolden;
using hachi::cli::testing::Shell;
using hachi::diag::testing::HostTree;

std::vector<std::string> BusIds(const std::string& preset) {
  std::ifstream in(hachi::SourceDir() + "/src/topo/presets/" + preset + ".json");
  nlohmann::json j = nlohmann::json::parse(in);
  std::vector<std::string> ids;
  for (const auto& g : j["gpus"]) ids.push_back(g["pci_bus_id"]);
  return ids;
}

// A node: the preset's GPUs on the fake NVML, `events` its hardware faults, `host` its
// files (its GPUs' PCI paths filled in here).
struct Node {
  std::string preset;
  std::string events;
  HostTree host;
};

Node Healthy(const std::string& preset) {
  Node n{preset, "", HostTree()};
  n.host.gpu_bus_ids = BusIds(preset);
  n.host.fabric_manager = preset == "hgx-h100";
  return n;
}

// `hachi doctor ARGS --root <tree>` on `node`; stdout only.
CmdResult Doctor(const Node& node, const std::string& args) {
  hachi::topo::TempDir dir;
  node.host.WriteTo(dir.path() + "/root");
  const std::string events = dir.Write("events", node.events);
  return Shell("HACHI_FAKE_NVML_TOPOLOGY=" + hachi::SourceDir() + "/src/topo/presets/" +
               node.preset + ".json HACHI_FAKE_NVML_EVENTS=" + events +
               " HACHI_NVML_LIBRARY=" + hachi::FakeNvmlLibrary() + " " +
               hachi::BinaryDir() + "/hachi doctor --root " + dir.path() + "/root " +
               args + " 2>/dev/null");
}

struct Case {
  const char* name;  // the golden file's, under testdata/doctor/
  Node node;
  const char* args;
  int exit_code;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  cases.push_back({"hgx-h100.txt", Healthy("hgx-h100"), "--preset hgx-h100", 0});
  cases.push_back({"hgx-h100.json", Healthy("hgx-h100"), "--preset hgx-h100 --json", 0});
  cases.push_back({"dgx1-v100.txt", Healthy("dgx1-v100"), "--preset dgx1-v100", 0});
  cases.push_back(
      {"pcie-8x-l40s.txt", Healthy("pcie-8x-l40s"), "--preset pcie-8x-l40s", 0});
  // No preset: NVML's own links are the expectation.
  cases.push_back({"hgx-h100-no-preset.txt", Healthy("hgx-h100"), "", 0});

  Node persistence = Healthy("hgx-h100");
  persistence.events = "persistence 3 off\n";
  cases.push_back({"persistence-off.json", persistence, "--preset hgx-h100 --json", 2});
  // The burn-in gate's call: one GPU, node-wide checks too.
  cases.push_back(
      {"persistence-off-gpu3.json", persistence, "--preset hgx-h100 --json --gpu 3", 2});
  cases.push_back(
      {"persistence-off-gpu2.json", persistence, "--preset hgx-h100 --json --gpu 2", 0});

  Node nvlink = Healthy("hgx-h100");
  nvlink.events = "nvlink 2 5 down\n";
  cases.push_back({"nvlink-down.txt", nvlink, "--preset hgx-h100", 2});

  Node pcie = Healthy("hgx-h100");
  pcie.events = "pcie 4 5 8\n";
  cases.push_back({"pcie-x8.txt", pcie, "--preset hgx-h100", 2});

  Node fm = Healthy("hgx-h100");
  fm.host.fabric_manager = false;
  for (int g = 0; g < 8; ++g)
    fm.events += "fabric " + std::to_string(g) + " not-started\n";
  cases.push_back({"fabric-manager-missing.txt", fm, "--preset hgx-h100", 2});

  Node acs = Healthy("pcie-8x-l40s");
  acs.host.acs[1] = 0x001D;
  cases.push_back({"acs-on.txt", acs, "--preset pcie-8x-l40s", 2});

  Node xid = Healthy("hgx-h100");
  xid.host.kernel_log +=
      "4,1201,93312233,-;NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', "
      "name=<unknown>, GPU has fallen off the bus.\n"
      "4,1202,93312240,-;NVRM: GPU 0000:5d:00.0: GPU has fallen off the bus.\n"
      "4,1230,95120001,-;NVRM: Xid (PCI:0000:18:00): 13, pid=4242, name=python, "
      "Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address\n";
  cases.push_back({"xid.json", xid, "--preset hgx-h100 --json", 2});

  // MIG GPUs as found: 7 slices, a mixed layout, one without instances (WARN).
  Node mig = Healthy("hgx-h100");
  mig.events =
      "migdev 0 1g.10gb 1g.10gb 1g.10gb 1g.10gb 1g.10gb 1g.10gb 1g.10gb\n"
      "migdev 1 3g.40gb 2g.20gb 1g.10gb 1g.10gb\n"
      "migdev 2\n";
  cases.push_back({"mig.txt", mig, "--preset hgx-h100", 1});

  Node host = Healthy("pcie-8x-l40s");
  host.host.facts =
      R"({"shm_bytes": 67108864, "memlock": 8388608, "clock_synced": false})";
  host.host.mounts =
      "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n"
      "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n";
  host.events = "throttle 6 0x44\nmig 7 1 1\nreplay 0 4000\n";
  host.host.pid_max = 32768;  // the kernel's default, without systemd's
  cases.push_back({"host-and-clocks.txt", host, "--preset pcie-8x-l40s --mig off", 2});
  return cases;
}

TEST(DoctorCmdTest, Goldens) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    CmdResult r = Doctor(c.node, c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << r.out;
    ExpectGolden(std::string("doctor/") + c.name, r.out);
  }
}

// What the burn-in gate reads: the first FAIL item's check and evidence.
TEST(DoctorCmdTest, FirstFailNamesTheFault) {
  Node n = Healthy("hgx-h100");
  n.events = "persistence 3 off\n";
  CmdResult r = Doctor(n, "--json --gpu 3");
  ASSERT_EQ(r.exit_code, 2) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "FAIL");
  for (const auto& c : j["checks"]) {
    if (c["status"] != "FAIL") continue;
    EXPECT_EQ(c["check"], "persistence");
    EXPECT_EQ(c["gpu"], 3);
    EXPECT_NE(c["evidence"].get<std::string>().find("GPU 3"), std::string::npos);
    return;
  }
  ADD_FAILURE() << "no FAIL item: " << r.out;
}

TEST(DoctorCmdTest, NoDriverIsAFailNotACrash) {
  Node n = Healthy("hgx-h100");
  CmdResult r = Doctor(n, "--nvml-library /nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  ExpectGolden("doctor/no-driver.txt", r.out);
}

// --server adds the node's clock against the server's; a server it cannot ask is a
// warning, not a crash (the FAIL of a clock an hour off: cli/faults_e2e_test.cc).
TEST(DoctorCmdTest, ClockCheckAgainstAServerItCannotReachWarns) {
  CmdResult r = Doctor(Healthy("hgx-h100"),
                       "--preset hgx-h100 --json --server unix:/nonexistent/hachi.sock "
                       "--node n1");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  bool found = false;
  for (const auto& c : j["checks"]) {
    if (c["check"] != "clock-offset") continue;
    found = true;
    EXPECT_EQ(c["status"], "WARN");
    EXPECT_NE(c["evidence"].get<std::string>().find("cannot ask the server"),
              std::string::npos)
        << c.dump();
  }
  EXPECT_TRUE(found) << r.out;
}

TEST(DoctorCmdTest, BadOptionsExit2) {
  Node n = Healthy("hgx-h100");
  EXPECT_EQ(Doctor(n, "--preset nope").exit_code, 2);
  EXPECT_EQ(Doctor(n, "--gpu 8").exit_code, 2);
  EXPECT_EQ(Doctor(n, "--mig maybe").exit_code, 2);
}

}  // namespace
