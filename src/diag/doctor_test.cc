// hachi doctor's stages, one at a time: the judging functions on hand-made NVML readings
// (a row per case), the file-reading ones on a fake host tree (doctor_testing.h). The
// whole command on the fake NVML is cli/doctor_cmd_test.cc's.
#include "diag/doctor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "diag/doctor_stages.h"
#include "diag/doctor_testing.h"
#include "topo/nvml_api.h"
#include "topo/presets.h"
#include "topo/topology_testing.h"

namespace hachi::diag {
namespace {

namespace nv = topo::nvml;
using testing::HostTree;
using topo::TempDir;

// One healthy GPU 0 on a node of one GPU.
NvmlReadings OneGpu(GpuReadings g) {
  NvmlReadings r;
  r.device_count = 1;
  g.index = 0;
  r.gpus.push_back(std::move(g));
  return r;
}

// The status of the only item of `check` in `items` (fails the test otherwise).
CheckStatus StatusOf(const std::vector<CheckItem>& items, const std::string& check) {
  const CheckItem* found = nullptr;
  for (const CheckItem& c : items) {
    if (c.check != check) continue;
    EXPECT_EQ(found, nullptr) << "two " << check << " items";
    found = &c;
  }
  if (found == nullptr) {
    ADD_FAILURE() << "no " << check << " item";
    return CheckStatus::kOk;
  }
  return found->status;
}

TEST(DoctorPcieTest, WidthFailsGenerationWarns) {
  struct Row {
    const char* name;
    PcieLinkFacts link;
    unsigned replays;
    CheckStatus link_status, replay_status;
  } rows[] = {
      {"trained fully", {5, 16, 5, 16}, 0, CheckStatus::kOk, CheckStatus::kOk},
      {"x8 of x16", {5, 8, 5, 16}, 0, CheckStatus::kFail, CheckStatus::kOk},
      {"idle at gen 1", {1, 16, 5, 16}, 0, CheckStatus::kWarn, CheckStatus::kOk},
      {"both low: the width wins",
       {1, 8, 5, 16},
       0,
       CheckStatus::kFail,
       CheckStatus::kOk},
      {"unknown", {0, 0, 0, 0}, 0, CheckStatus::kWarn, CheckStatus::kOk},
      {"100 replays", {4, 16, 4, 16}, 100, CheckStatus::kOk, CheckStatus::kOk},
      {"101 replays", {4, 16, 4, 16}, 101, CheckStatus::kOk, CheckStatus::kWarn},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    GpuReadings g;
    g.pcie = row.link;
    g.replays = row.replays;
    std::vector<CheckItem> items = PcieChecks(OneGpu(g), -1, 100);
    EXPECT_EQ(StatusOf(items, "pcie-link"), row.link_status);
    EXPECT_EQ(StatusOf(items, "pcie-replay"), row.replay_status);
  }
}

TEST(DoctorClocksTest, HardwareReasonsFailSoftwareWarnSettingsPass) {
  struct Row {
    uint64_t reasons;
    CheckStatus status;
  } rows[] = {
      {0, CheckStatus::kOk},
      {nv::kThrottleGpuIdle, CheckStatus::kOk},
      {nv::kThrottleApplicationsClocks | nv::kThrottleSyncBoost, CheckStatus::kOk},
      {nv::kThrottleSwPowerCap, CheckStatus::kWarn},
      {nv::kThrottleSwThermal, CheckStatus::kWarn},
      {nv::kThrottleHwSlowdown, CheckStatus::kFail},
      {nv::kThrottleHwThermal | nv::kThrottleSwPowerCap, CheckStatus::kFail},
      {nv::kThrottleHwPowerBrake, CheckStatus::kFail},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.reasons);
    GpuReadings g;
    g.clock_reasons = row.reasons;
    EXPECT_EQ(StatusOf(ClockChecks(OneGpu(g), -1), "clocks"), row.status);
  }
}

TEST(DoctorMigTest, AgainstTheConfig) {
  struct Row {
    const char* name;
    std::optional<unsigned> now, pending;
    std::optional<bool> want;
    CheckStatus status;
  } rows[] = {
      {"off, no config", 0u, 0u, std::nullopt, CheckStatus::kOk},
      {"on, no config", 1u, 1u, std::nullopt, CheckStatus::kOk},
      {"off, wanted off", 0u, 0u, false, CheckStatus::kOk},
      {"on, wanted off", 1u, 1u, false, CheckStatus::kFail},
      {"off, wanted on", 0u, 0u, true, CheckStatus::kFail},
      {"a change pending", 0u, 1u, std::nullopt, CheckStatus::kWarn},
      {"unsupported", std::nullopt, std::nullopt, std::nullopt, CheckStatus::kOk},
      {"unsupported, wanted on", std::nullopt, std::nullopt, true, CheckStatus::kFail},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    GpuReadings g;
    g.mig_now = row.now;
    g.mig_pending = row.pending;
    Expectation e;
    e.mig = row.want;
    EXPECT_EQ(StatusOf(MigChecks(OneGpu(g), e, -1), "mig"), row.status);
  }
}

// The layout the probe found is the evidence; MIG on without instances cannot run jobs.
TEST(DoctorMigTest, ReportsTheLayout) {
  using topo::MigDevice;
  const MigDevice slice{"1g.10gb", "", 1, 0, 9728};
  struct Row {
    const char* name;
    bool probed_on;
    std::vector<MigDevice> devices;
    std::optional<bool> want;
    CheckStatus status;
    const char* evidence;
  } rows[] = {
      {"seven slices", true, std::vector<MigDevice>(7, slice), std::nullopt,
       CheckStatus::kOk, "GPU 0: MIG on: 1g.10gb x7"},
      {"as expected",
       true,
       {{"3g.40gb", "", 2, 0, 0}, slice},
       true,
       CheckStatus::kOk,
       "GPU 0: MIG on: 3g.40gb, 1g.10gb, as expected"},
      {"no instances",
       true,
       {},
       std::nullopt,
       CheckStatus::kWarn,
       "GPU 0: MIG on, no instances: the GPU cannot run jobs until instances are "
       "created"},
      {"no instances, wanted on",
       true,
       {},
       true,
       CheckStatus::kWarn,
       "GPU 0: MIG on, no instances"},
      {"not probed", false, {}, std::nullopt, CheckStatus::kOk, "GPU 0: MIG on"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    GpuReadings g;
    g.mig_now = 1;
    g.mig_pending = 1;
    NvmlReadings r = OneGpu(g);
    r.topology = topo::Topology(1);
    r.topology.mutable_gpu(0).mig_enabled = row.probed_on;
    r.topology.mutable_gpu(0).mig_devices = row.devices;
    Expectation e;
    e.mig = row.want;
    std::vector<CheckItem> items = MigChecks(r, e, -1);
    EXPECT_EQ(StatusOf(items, "mig"), row.status);
    ASSERT_EQ(items.size(), 1u);
    EXPECT_EQ(items[0].evidence.rfind(row.evidence, 0), 0u) << items[0].evidence;
  }
}

TEST(DoctorMemoryTest, EccPagesAndRows) {
  struct Row {
    const char* name;
    uint64_t ecc_now, ecc_life;
    unsigned sbe, dbe;
    bool retire_pending, remap_pending, remap_failure;
    CheckStatus ecc, pages, remap;
  } rows[] = {
      {"clean", 0, 0, 0, 0, false, false, false, CheckStatus::kOk, CheckStatus::kOk,
       CheckStatus::kOk},
      {"uncorrectable now", 2, 2, 0, 0, false, false, false, CheckStatus::kFail,
       CheckStatus::kOk, CheckStatus::kOk},
      {"uncorrectable long ago", 0, 3, 0, 0, false, false, false, CheckStatus::kWarn,
       CheckStatus::kOk, CheckStatus::kOk},
      {"pages retired", 0, 0, 2, 1, false, false, false, CheckStatus::kOk,
       CheckStatus::kWarn, CheckStatus::kOk},
      {"retirement pending", 0, 0, 0, 1, true, false, false, CheckStatus::kOk,
       CheckStatus::kFail, CheckStatus::kOk},
      {"remap pending", 0, 0, 0, 0, false, true, false, CheckStatus::kOk,
       CheckStatus::kOk, CheckStatus::kFail},
      {"remap failed", 0, 0, 0, 0, false, false, true, CheckStatus::kOk, CheckStatus::kOk,
       CheckStatus::kFail},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    GpuReadings g;
    g.ecc_on = g.ecc_pending_on = true;
    g.ecc_uncorrected_volatile = row.ecc_now;
    g.ecc_uncorrected_aggregate = row.ecc_life;
    g.retired_sbe = row.sbe;
    g.retired_dbe = row.dbe;
    g.retired_pending = row.retire_pending;
    g.remap = GpuReadings::Remap{0, 1, row.remap_pending, row.remap_failure};
    std::vector<CheckItem> items = MemoryChecks(OneGpu(g), -1);
    EXPECT_EQ(StatusOf(items, "ecc"), row.ecc);
    EXPECT_EQ(StatusOf(items, "retired-pages"), row.pages);
    EXPECT_EQ(StatusOf(items, "row-remap"), row.remap);
  }
}

// Two NVSwitch GPUs of 18 links each, as the preset would have them.
NvmlReadings TwoSwitchGpus(const std::vector<unsigned>& down_on_1) {
  NvmlReadings r;
  r.device_count = 2;
  for (int i = 0; i < 2; ++i) {
    GpuReadings g;
    g.index = i;
    for (unsigned l = 0; l < 18; ++l) {
      bool down =
          i == 1 && std::find(down_on_1.begin(), down_on_1.end(), l) != down_on_1.end();
      (down ? g.links_down : g.links_up).push_back(l);
    }
    r.gpus.push_back(g);
  }
  r.topology = topo::Topology(2);
  const int pair = 18 - static_cast<int>(down_on_1.size());
  r.topology.SetSymmetricLink(0, 1, {pair, topo::PciePath::kSys});
  return r;
}

Expectation Switch18() {
  Expectation e;
  e.preset = "two-nv18";
  e.gpus = 2;
  e.topology = topo::Topology(2);
  e.topology->SetSymmetricLink(0, 1, {18, topo::PciePath::kSys});
  return e;
}

TEST(DoctorNvLinkTest, ADownLinkIsAFailNamingGpuAndLink) {
  std::vector<CheckItem> items = NvLinkChecks(TwoSwitchGpus({5}), Switch18(), -1);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].status, CheckStatus::kOk);
  EXPECT_EQ(items[1].status, CheckStatus::kFail);
  EXPECT_EQ(items[1].gpus, std::vector<int>{1});
  EXPECT_EQ(items[1].evidence, "GPU 1: NVLink 5 down (17 of 18 up)");
  // The pair's NV17 is the same fault: no second item for it.
  for (const CheckItem& c : items) EXPECT_NE(c.check, "nvlink-pair");
  // --gpu 0 sees only GPU 0's links.
  items = NvLinkChecks(TwoSwitchGpus({5}), Switch18(), 0);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].status, CheckStatus::kOk);
}

TEST(DoctorNvLinkTest, NoLinksUpWithoutAPresetIsOneWarning) {
  NvmlReadings r = TwoSwitchGpus({});
  for (GpuReadings& g : r.gpus) std::swap(g.links_up, g.links_down);
  std::vector<CheckItem> items = NvLinkChecks(r, Expectation(), -1);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].status, CheckStatus::kWarn);
  // With the preset saying 18 each, both GPUs fail.
  items = NvLinkChecks(r, Switch18(), -1);
  EXPECT_EQ(WorstStatus(items), CheckStatus::kFail);
  EXPECT_EQ(items.size(), 2u);
}

TEST(DoctorNvLinkTest, PcieOnlyNodeHasNothingToCheck) {
  GpuReadings g;
  std::vector<CheckItem> items = NvLinkChecks(OneGpu(g), Expectation(), -1);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].evidence, "no NVLinks (PCIe only)");
}

TEST(DoctorFabricTest, ManagerAndRegistration) {
  NvmlReadings r = TwoSwitchGpus({});
  r.driver_version = "550.54.15";
  r.gpus[0].fabric = GpuReadings::Fabric{nv::kGpuFabricCompleted, nv::kSuccess, ""};
  r.gpus[1].fabric = GpuReadings::Fabric{nv::kGpuFabricNotStarted, 0, ""};
  EXPECT_TRUE(IsNvSwitchNode(r, Expectation()));
  std::vector<CheckItem> items = FabricChecks(r, false, -1);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].check, "fabric-manager");
  EXPECT_EQ(items[0].status, CheckStatus::kFail);
  EXPECT_NE(items[0].evidence.find("CUDA fails to initialise"), std::string::npos);
  EXPECT_NE(items[0].fix.find("550.54.15"), std::string::npos);
  EXPECT_EQ(items[1].status, CheckStatus::kOk);
  EXPECT_EQ(items[2].status, CheckStatus::kFail);
  EXPECT_EQ(WorstStatus(FabricChecks(r, true, 0)), CheckStatus::kOk);
}

// A node of `n` GPUs with bus ids 0x18, 0x19, ... and the tree of `host` for them.
struct Tree {
  TempDir dir;
  NvmlReadings r;
  std::string root() const { return dir.path() + "/root"; }
};
void MakeTree(int n, HostTree host, bool nvlink, Tree* t) {
  t->r.device_count = n;
  for (int i = 0; i < n; ++i) {
    GpuReadings g;
    g.index = i;
    char id[32];
    std::snprintf(id, sizeof(id), "00000000:%02X:00.0", 0x18 + i);
    g.bus_id = id;
    if (nvlink) g.links_up = {0, 1};
    host.gpu_bus_ids.push_back(id);
    t->r.gpus.push_back(g);
  }
  host.WriteTo(t->root());
}

TEST(DoctorAcsTest, SwitchPortsCountRootPortsDoNot) {
  HostTree host;
  host.acs[1] = 0x001D;  // SrcValid ReqRedir CmpltRedir UpstreamFwd, as Linux sets
  Tree t;
  MakeTree(2, host, /*nvlink=*/false, &t);
  std::vector<CheckItem> items = AcsChecks(t.r, t.root(), -1);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].status, CheckStatus::kOk) << items[0].evidence;
  EXPECT_EQ(items[1].status, CheckStatus::kFail);
  EXPECT_EQ(items[1].evidence,
            "GPU 1: ACS redirects peer-to-peer traffic on 0000:c3:00.0 (SrcValid+ "
            "ReqRedir+ CmpltRedir+ UpstreamFwd+): forces P2P through the root complex");
  // Where the GPUs talk over NVLink, only GPUDirect RDMA suffers: a warning.
  Tree nv;
  MakeTree(2, host, /*nvlink=*/true, &nv);
  EXPECT_EQ(AcsChecks(nv.r, nv.root(), 1)[0].status, CheckStatus::kWarn);
}

TEST(DoctorAcsTest, UnreadableOrMissingIsAWarning) {
  Tree t;
  MakeTree(1, HostTree(), false, &t);
  // What a user reads of a bridge's config: 64 bytes.
  const std::string port = t.root() + "/sys/devices/pci0000:00/0000:00:01.0";
  std::ofstream(port + "/config", std::ios::trunc) << std::string(64, '\0');
  std::vector<CheckItem> items = AcsChecks(t.r, t.root(), -1);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].status, CheckStatus::kWarn);
  EXPECT_NE(items[0].evidence.find("0000:00:01.0"), std::string::npos);
  t.r.gpus[0].bus_id = "00000000:77:00.0";
  items = AcsChecks(t.r, t.root(), -1);
  EXPECT_EQ(items[0].evidence,
            "GPU 0: 0000:77:00.0 is not in sysfs: the PCIe bridges above it cannot be "
            "checked");
}

TEST(DoctorHostTest, CgroupModes) {
  struct Row {
    const char* name;
    std::string mounts, controllers;
    CheckStatus status;
    std::string evidence;
  } rows[] = {
      {"v2", "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n", "cpuset cpu io memory pids",
       CheckStatus::kOk,
       "cgroup v2; cpu, cpuset, memory, pids; devices through BPF programs"},
      {"v2 without pids", "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n", "cpuset cpu memory",
       CheckStatus::kWarn,
       "cgroup v2 without pids: jobs' limits of those are not enforced"},
      {"hybrid",
       "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n"
       "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n"
       "cgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\n"
       "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n"
       "cgroup /sys/fs/cgroup/pids cgroup rw,pids 0 0\n"
       "cgroup /sys/fs/cgroup/devices cgroup rw,devices 0 0\n",
       "", CheckStatus::kOk,
       "cgroup hybrid (v1 controllers, v2 beside them); cpu, cpuset, memory, pids, "
       "devices"},
      {"none", "proc /proc proc rw 0 0\n", "", CheckStatus::kWarn,
       "no cgroup hierarchy is mounted: jobs run without limits or isolation"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    HostTree host;
    host.mounts = row.mounts;
    host.controllers = row.controllers;
    Tree t;
    MakeTree(0, host, false, &t);
    HostFacts facts;
    for (const CheckItem& c : HostChecks(t.root(), facts)) {
      if (c.check != "cgroup") continue;
      EXPECT_EQ(c.status, row.status);
      EXPECT_EQ(c.evidence, row.evidence);
    }
  }
}

TEST(DoctorHostTest, ShmMemlockAndClock) {
  Tree t;
  MakeTree(0, HostTree(), false, &t);  // 2 TiB of RAM
  struct Row {
    const char* name;
    HostFacts facts;
    CheckStatus shm, memlock, time;
  } rows[] = {
      {"healthy",
       {uint64_t{1} << 40, kUnlimited, true, "", "", {}},
       CheckStatus::kOk,
       CheckStatus::kOk,
       CheckStatus::kOk},
      {"docker's 64 MiB",
       {uint64_t{64} << 20, uint64_t{8} << 20, false, "", "", {}},
       CheckStatus::kWarn,
       CheckStatus::kWarn,
       CheckStatus::kWarn},
      {"a tenth of RAM",
       {uint64_t{200} << 30, kUnlimited, true, "", "", {}},
       CheckStatus::kWarn,
       CheckStatus::kOk,
       CheckStatus::kOk},
      {"unknown", {}, CheckStatus::kWarn, CheckStatus::kWarn, CheckStatus::kWarn},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    std::vector<CheckItem> items = HostChecks(t.root(), row.facts);
    EXPECT_EQ(StatusOf(items, "shm"), row.shm);
    EXPECT_EQ(StatusOf(items, "memlock"), row.memlock);
    EXPECT_EQ(StatusOf(items, "time-sync"), row.time);
  }
}

TEST(DoctorHostTest, FabricManagerByItsCommName) {
  Tree t;
  HostTree host;
  MakeTree(0, host, false, &t);
  EXPECT_EQ(FabricManagerRunning(t.root()), false);
  host.fabric_manager = true;
  host.WriteTo(t.root());
  EXPECT_EQ(FabricManagerRunning(t.root()), true);
  EXPECT_EQ(FabricManagerRunning(t.root() + "/nowhere"), std::nullopt);
}

TEST(DoctorXidTest, GroupedByGpuAndXid) {
  TempDir dir;
  const std::string log = dir.Write(
      "kmsg",
      "4,1,1,-;NVRM: Xid (PCI:0000:19:00): 79, pid='<unknown>', name=<unknown>, GPU has "
      "fallen off the bus.\n"
      "4,2,2,-;NVRM: Xid (PCI:0000:18:00): 13, pid=42, name=python, Graphics SM "
      "Exception\n"
      "4,3,3,-;NVRM: Xid (PCI:0000:19:00): 79, pid='<unknown>', name=<unknown>, GPU has "
      "fallen off the bus.\n"
      "4,4,4,-;NVRM: Xid (PCI:0000:99:00): 48, pid=7, name=x, DBE\n"
      "6,5,5,-;eth0: link up\n");
  NvmlReadings r;
  r.device_count = 2;
  r.gpus.resize(2);
  r.gpus[0] = {};
  r.gpus[0].bus_id = "00000000:18:00.0";
  r.gpus[1].index = 1;
  r.gpus[1].bus_id = "00000000:19:00.0";
  std::vector<CheckItem> items = XidChecks(r, {log, "/dev/kmsg"}, -1);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].status, CheckStatus::kWarn);  // Xid 13: the application's
  EXPECT_EQ(items[0].gpus, std::vector<int>{0});
  EXPECT_EQ(items[1].status, CheckStatus::kFail);  // Xid 79, twice
  EXPECT_NE(items[1].evidence.find("2 lines in /dev/kmsg"), std::string::npos);
  EXPECT_NE(items[1].evidence.find("first: NVRM: Xid (PCI:0000:19:00): 79"),
            std::string::npos);
  EXPECT_TRUE(items[2].gpus.empty());  // a device NVML does not list
  EXPECT_NE(items[2].evidence.find("device 00000000:99:00.0"), std::string::npos);
  // --gpu 0: its lines only.
  items = XidChecks(r, {log, "/dev/kmsg"}, 0);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].gpus, std::vector<int>{0});
  // A log that cannot be read is a warning, not a pass.
  items = XidChecks(r, {dir.path() + "/none", "/dev/kmsg"}, -1);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].status, CheckStatus::kWarn);
}

// Only the driver's own lines count: not its text quoted inside another kernel message
// (overlayfs' error for a lowerdir any user can name), nor records userspace wrote to
// /dev/kmsg, nor what dmesg and journalctl make of a message with a newline in it.
TEST(DoctorXidTest, OnlyTheDriversOwnLines) {
  const std::string forged =
      "NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus";
  NvmlReadings r;
  r.device_count = 2;
  r.gpus.resize(2);
  r.gpus[0].bus_id = "00000000:18:00.0";
  r.gpus[1].index = 1;
  r.gpus[1].bus_id = "00000000:19:00.0";
  TempDir dir;
  const std::string kmsg = dir.Write(
      "kmsg", "3,340,2795990901,-;overlayfs: failed to resolve '/tmp/x/" + forged +
                  "': -2\n"
                  "3,341,2798941488,-;overlayfs: failed to resolve '/tmp/x/a\\x0a" +
                  forged + "': -2\n" + "12,342,2984424619,-;" + forged + "\n" +
                  " DEVICE=+" + forged + "\n" +
                  "4,343,2984424620,-;NVRM: Xid (PCI:0000:19:00): 13, pid=42, "
                  "name=python, Graphics SM Exception\n");
  std::vector<CheckItem> items = XidChecks(r, {kmsg, "/dev/kmsg"}, -1);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].gpus, std::vector<int>{1});
  EXPECT_EQ(items[0].status, CheckStatus::kWarn);
  // The same file given as a saved log, and a log in dmesg's and journalctl's forms.
  items = XidChecks(r, {kmsg, "saved", topo::KernelLogSource::kSavedText}, -1);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].gpus, std::vector<int>{1});
  const std::string saved = dir.Write(
      "saved",
      "[ 2798.941488] overlayfs: failed to resolve '/tmp/x/a\n"
      "               " +
          forged + "': -2\n" + forged + "': -2\n" +  // dmesg -t
          "Mar  3 10:01:02 gpu07 kernel: overlayfs: failed to resolve '/tmp/x/" + forged +
          "': -2\n" +
          "Mar  3 10:01:03 gpu07 kernel: NVRM: Xid (PCI:0000:19:00): 48, pid=7, "
          "name=x, DBE\n");
  items = XidChecks(r, {saved, "saved", topo::KernelLogSource::kSavedText}, -1);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].gpus, std::vector<int>{1});
  EXPECT_EQ(items[0].status, CheckStatus::kFail);
  EXPECT_NE(items[0].evidence.find(
                "1 line in saved since boot: NVRM: Xid (PCI:0000:19:00): 48"),
            std::string::npos)
      << items[0].evidence;
}

// --xid-since: only /dev/kmsg records stamped in the window count (a GPU back from
// repair); a line without a kmsg stamp always does; without the clock, since boot.
TEST(DoctorXidTest, SinceAWindow) {
  TempDir dir;
  const std::string log = dir.Write(
      "kmsg",
      "4,1,1000000,-;NVRM: Xid (PCI:0000:19:00): 79, pid='<unknown>', name=<unknown>, "
      "GPU has fallen off the bus.\n"
      "4,2,95000000,-;NVRM: Xid (PCI:0000:18:00): 48, pid=7, name=x, DBE\n");
  NvmlReadings r;
  r.device_count = 2;
  r.gpus.resize(2);
  r.gpus[0].bus_id = "00000000:18:00.0";
  r.gpus[1].index = 1;
  r.gpus[1].bus_id = "00000000:19:00.0";
  std::vector<CheckItem> items = XidChecks(r, {log, "/dev/kmsg"}, -1, 10, 100000000);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].gpus, std::vector<int>{0});
  EXPECT_NE(items[0].evidence.find("1 line in /dev/kmsg in the last 10s"),
            std::string::npos)
      << items[0].evidence;
  // GPU 1's Xid 79 is history in that window: it passes.
  items = XidChecks(r, {log, "/dev/kmsg"}, 1, 10, 100000000);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].status, CheckStatus::kOk);
  EXPECT_EQ(items[0].evidence,
            "no NVRM Xid lines in /dev/kmsg for GPU 1 in the last 10s");
  // Without the clock the window cannot be placed: since boot, and said.
  items = XidChecks(r, {log, "/dev/kmsg"}, 1, 10, std::nullopt);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].status, CheckStatus::kFail);
  EXPECT_NE(items[0].evidence.find("the clock to place --xid-since by is unknown"),
            std::string::npos);
}

TEST(HostFactsTest, FromAFile) {
  TempDir dir;
  Result<HostFacts> f = ReadHostFactsFile(
      dir.Write("f.json", R"({"shm_bytes": 1024, "memlock": "unlimited"})"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->shm_bytes, 1024u);
  EXPECT_EQ(f->memlock_bytes, kUnlimited);
  EXPECT_EQ(f->clock_synced, std::nullopt);
  EXPECT_EQ(
      ReadHostFactsFile(dir.Write("bad.json", R"({"memlock": "lots"})")).status().code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadHostFactsFile(dir.path() + "/none").status().code(),
            StatusCode::kNotFound);
}

TEST(DoctorRenderTest, OkRowsOfOneCheckFoldAcrossGpus) {
  DoctorReport r;
  r.node = "n1";
  r.nvml = true;
  r.driver_version = "550.54.15";
  r.gpus = {{0, "H100", ""}, {1, "H100", ""}, {2, "H100", ""}};
  r.checks = {
      {"persistence", CheckStatus::kOk, {0}, "GPU 0: persistence mode on", ""},
      {"persistence", CheckStatus::kOk, {1}, "GPU 1: persistence mode on", ""},
      {"persistence", CheckStatus::kFail, {2}, "GPU 2: persistence mode off", "pm 1"},
      {"shm", CheckStatus::kWarn, {}, "/dev/shm 64 MiB", "remount"},
  };
  EXPECT_EQ(RenderDoctorText(r),
            "hachi doctor: n1, 3 GPUs (H100), driver 550.54.15\n"
            "\n"
            "STATUS CHECK           GPU    EVIDENCE\n"
            "OK     persistence     0,1    persistence mode on\n"
            "FAIL   persistence     2      persistence mode off\n"
            "                              fix: pm 1\n"
            "WARN   shm             -      /dev/shm 64 MiB\n"
            "                              fix: remount\n"
            "\n"
            "FAIL: 1 FAIL, 1 WARN, 2 OK\n");
  EXPECT_EQ(DoctorExitCode(r), 2);
}

}  // namespace
}  // namespace hachi::diag
