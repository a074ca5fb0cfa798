// KernelXidConfirmer: the rule alone on a fake clock (a table), and as the agent wires it
// (cli/daemon_cmds.cc, WatchGpus) between a GpuHealthMonitor on the fake
// libnvidia-ml.so.1 and a KernelXidWatcher on a file standing in for /dev/kmsg.
#include "agent/xid_confirm.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/gpu_health_testing.h"
#include "agent/kernel_log.h"

namespace hachi::agent {
namespace {

using std::chrono::seconds;
using testing::FakeNode;
using testing::Recorder;

// What KernelXidWatcher reports for a driver line.
GpuHealthEvent KernelEvent(int gpu, int xid) {
  GpuHealthEvent e;
  e.gpu = gpu;
  e.kind = "xid";
  e.xid = xid;
  e.fault = ClassifyXid(xid).fault;
  e.message = XidMessage(xid) + " (kernel log)";
  return e;
}

GpuHealthEvent NvmlEvent(int gpu, std::string kind, int xid) {
  GpuHealthEvent e;
  e.gpu = gpu;
  e.kind = std::move(kind);
  e.xid = xid;
  return e;
}

TEST(KernelXidConfirmerTest, Rule) {
  struct Case {
    std::string name;
    std::vector<GpuHealthEvent> nvml;  // noted first
    int later_s;                       // then the clock moves on
    int gpu, xid;                      // the kernel log's Xid
    bool nvml_watches;
    GpuFault want;
  };
  const Case cases[] = {
      {"alone", {}, 0, 0, 79, true, GpuFault::kInfo},
      {"alone_reset_class", {}, 0, 0, 119, true, GpuFault::kInfo},
      {"nvml_same_xid", {NvmlEvent(0, "xid", 48)}, 0, 0, 48, true, GpuFault::kFatal},
      {"nvml_same_xid_in_window",
       {NvmlEvent(0, "xid", 48)},
       60,
       0,
       48,
       true,
       GpuFault::kFatal},
      {"nvml_same_xid_too_long_ago",
       {NvmlEvent(0, "xid", 48)},
       61,
       0,
       48,
       true,
       GpuFault::kInfo},
      {"nvml_other_gpu", {NvmlEvent(1, "xid", 48)}, 0, 0, 48, true, GpuFault::kInfo},
      {"nvml_other_xid", {NvmlEvent(0, "xid", 13)}, 0, 0, 48, true, GpuFault::kInfo},
      {"nvml_ecc_event_for_48",
       {NvmlEvent(0, "ecc-dbe", 0)},
       0,
       0,
       48,
       true,
       GpuFault::kFatal},
      {"nvml_ecc_event_not_for_79",
       {NvmlEvent(0, "ecc-dbe", 0)},
       0,
       0,
       79,
       true,
       GpuFault::kInfo},
      {"nvml_remap_pending_for_63",
       {NvmlEvent(0, "remap-pending", 0)},
       0,
       0,
       63,
       true,
       GpuFault::kReset},
      // A lost GPU does not come back until a restart: any later Xid of it is believed.
      {"nvml_lost", {NvmlEvent(3, "gpu-lost", 79)}, 3600, 3, 79, true, GpuFault::kFatal},
      {"nvml_lost_other_gpu",
       {NvmlEvent(3, "gpu-lost", 79)},
       0,
       2,
       79,
       true,
       GpuFault::kInfo},
      // NVML does not watch this GPU's Xids: the kernel log is the only source.
      {"nvml_not_watching", {}, 0, 0, 79, false, GpuFault::kFatal},
      // Faults that take nothing out need no word from NVML.
      {"application_fault", {}, 0, 0, 13, true, GpuFault::kJob},
      {"informational", {}, 0, 0, 45, true, GpuFault::kInfo},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FakeClock clock;
    KernelXidConfirmer confirm(&clock);
    for (const GpuHealthEvent& e : c.nvml) confirm.NoteNvml(e);
    clock.Advance(seconds(c.later_s));
    const GpuHealthEvent kernel = KernelEvent(c.gpu, c.xid);
    const GpuHealthEvent got = confirm.Judge(kernel, c.nvml_watches);
    EXPECT_EQ(got.fault, c.want) << GpuFaultName(got.fault);
    EXPECT_EQ(got.gpu, c.gpu);
    EXPECT_EQ(got.xid, c.xid);
    const bool downgraded = c.want != kernel.fault;
    EXPECT_EQ(
        got.message,
        kernel.message +
            (downgraded ? ", not confirmed by NVML: the GPU stays in service" : ""));
  }
}

// hgx-h100's GPUs by bus id, as the agent gives them to the watcher.
std::map<std::string, int> HgxBusIds() {
  Result<topo::Topology> t = topo::LoadPreset("hgx-h100");
  std::map<std::string, int> ids;
  for (int g = 0; g < t->gpu_count(); ++g) ids[t->gpu(g).pci_bus_id] = g;
  return ids;
}

// The agent's two sources of faults as WatchGpus wires them, on one fake clock.
class TwoSources {
 public:
  explicit TwoSources(FakeNode* node) : kmsg_(node->dir().Write("kmsg", "")) {
    GpuHealthOptions o = node->Options();
    o.clock = &clock_;
    auto m = GpuHealthMonitor::Start(o, [this](const GpuHealthEvent& e) {
      confirm_.NoteNvml(e);
      got_.Callback()(e);
    });
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (m.ok()) nvml_ = std::move(*m);
    auto k = KernelXidWatcher::Start(
        kmsg_, HgxBusIds(),
        [this](const GpuHealthEvent& e) {
          got_.Callback()(confirm_.Judge(e, nvml_ && nvml_->WatchesXids(e.gpu)));
        },
        20, &clock_);
    EXPECT_TRUE(k.ok()) << k.status().ToString();
    if (k.ok()) kernel_ = std::move(*k);
  }
  ~TwoSources() {
    if (kernel_) kernel_->Stop();
    if (nvml_) nvml_->Stop();
  }
  bool ok() const { return nvml_ && kernel_; }

  // The driver's line for `bus` ("0000:18:00"), as the kernel writes it to /dev/kmsg.
  void KernelLogs(const std::string& bus, int xid) {
    std::ofstream(kmsg_, std::ios::app)
        << "4," << ++seq_ << ",1000,-;NVRM: Xid (PCI:" << bus << "): " << xid
        << ", pid='<unknown>', name=<unknown>, " << XidMessage(xid) << "\n";
  }
  // The `n`th event the kernel log gave for `gpu` (1-based), waited for.
  std::optional<GpuHealthEvent> FromKernel(int gpu, int n) {
    return got_.WaitForNth(
        [gpu](const GpuHealthEvent& e) {
          return e.gpu == gpu && e.message.find("(kernel log)") != std::string::npos;
        },
        n);
  }
  Recorder& got() { return got_; }
  FakeClock& clock() { return clock_; }
  const GpuHealthMonitor& nvml() const { return *nvml_; }

 private:
  FakeClock clock_;
  KernelXidConfirmer confirm_{&clock_};
  Recorder got_;
  std::string kmsg_;
  int seq_ = 0;
  std::unique_ptr<GpuHealthMonitor> nvml_;
  std::unique_ptr<KernelXidWatcher> kernel_;
};

TEST(KernelXidConfirmerTest, OnTheFakeNvml) {
  FakeNode node;
  TwoSources s(&node);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s.nvml().WatchesXids(0));
  // The kernel log alone: reported, but the GPU stays in service.
  s.KernelLogs("0000:18:00", 79);
  std::optional<GpuHealthEvent> alone = s.FromKernel(0, 1);
  ASSERT_TRUE(alone.has_value());
  EXPECT_EQ(alone->xid, 79);
  EXPECT_EQ(alone->fault, GpuFault::kInfo);
  EXPECT_NE(alone->message.find("not confirmed by NVML"), std::string::npos);
  // NVML reports Xid 48 on GPU 2 (00000000:3A:00.0); the kernel's line for it counts.
  node.Inject("xid 2 48");
  ASSERT_TRUE(s.got().WaitFor(2, "xid").has_value());
  s.KernelLogs("0000:3a:00", 48);
  std::optional<GpuHealthEvent> confirmed = s.FromKernel(2, 1);
  ASSERT_TRUE(confirmed.has_value());
  EXPECT_EQ(confirmed->fault, GpuFault::kFatal);
  // Past the window NVML's report is history.
  s.clock().Advance(seconds(KernelXidConfirmer::kDefaultWindowS + 1));
  s.KernelLogs("0000:3a:00", 48);
  std::optional<GpuHealthEvent> stale = s.FromKernel(2, 2);
  ASSERT_TRUE(stale.has_value());
  EXPECT_EQ(stale->fault, GpuFault::kInfo);
  // GPU 5 (00000000:AB:00.0) falls off the bus: NVML finds it lost.
  node.Inject("lost 5");
  ASSERT_TRUE(s.got().WaitFor(5, "gpu-lost").has_value());
  EXPECT_FALSE(s.nvml().WatchesXids(5));
  s.KernelLogs("0000:ab:00", 79);
  std::optional<GpuHealthEvent> lost = s.FromKernel(5, 1);
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(lost->fault, GpuFault::kFatal);
}

// NVML runs but raises no Xid events (here it refuses to register them): the kernel log
// is the only source of Xids, and its lines count as read.
TEST(KernelXidConfirmerTest, NvmlWithoutXidEvents) {
  FakeNode node;
  topo::ScopedEnv off("HACHI_FAKE_NVML_UNSUPPORTED", "nvmlDeviceRegisterEvents");
  TwoSources s(&node);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s.nvml().WatchesXids(0));
  s.KernelLogs("0000:18:00", 79);
  std::optional<GpuHealthEvent> got = s.FromKernel(0, 1);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->fault, GpuFault::kFatal);
}

}  // namespace
}  // namespace hachi::agent
