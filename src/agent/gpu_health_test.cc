// GpuHealthMonitor through the real dlopen and NVML event path, against the fake
// libnvidia-ml.so.1 (src/topo/testdata/fake_nvml/), with faults appended to the file
// named by HACHI_FAKE_NVML_EVENTS; and the Xid table (the kernel-line parser's tests:
// topo/xid_test.cc).
#include "agent/gpu_health.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/gpu_health_testing.h"
#include "core/strings.h"
#include "core/testing/paths.h"
#include "core/testing/wait_for.h"
#include "topo/presets.h"
#include "topo/topology_file.h"
#include "topo/topology_testing.h"

namespace hachi::agent {
namespace {

using testing::FakeNode;
using testing::Recorder;
using topo::ScopedEnv;
using topo::TempDir;

TEST(ClassifyXidTest, Table) {
  struct Case {
    int xid;
    GpuFault fault;
    std::string meaning;  // a part of it
  };
  const Case cases[] = {
      {13, GpuFault::kJob, "Graphics Engine Exception"},
      {31, GpuFault::kJob, "page fault"},
      {43, GpuFault::kJob, "GPU stopped processing"},
      {45, GpuFault::kInfo, "Preemptive cleanup"},
      {48, GpuFault::kFatal, "Double-bit ECC"},
      {63, GpuFault::kReset, "row remapping"},
      {74, GpuFault::kReset, "NVLink"},
      {79, GpuFault::kFatal, "fallen off the bus"},
      {94, GpuFault::kJob, "Contained ECC"},
      {95, GpuFault::kReset, "Uncontained ECC"},
      {119, GpuFault::kReset, "GSP"},
      {145, GpuFault::kReset, "NVLink"},
      {154, GpuFault::kReset, "recovery action"},
      {9999, GpuFault::kReset, "Xid 9999 (not in Hachi's table)"},
      {-1, GpuFault::kReset, "Xid -1 (not in Hachi's table)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("Xid " + std::to_string(c.xid));
    XidInfo got = ClassifyXid(c.xid);
    EXPECT_EQ(got.fault, c.fault) << GpuFaultName(got.fault);
    EXPECT_NE(got.meaning.find(c.meaning), std::string::npos) << got.meaning;
  }
}

TEST(ClassifyXidTest, FaultNames) {
  EXPECT_EQ(GpuFaultName(GpuFault::kInfo), "info");
  EXPECT_EQ(GpuFaultName(GpuFault::kJob), "job");
  EXPECT_EQ(GpuFaultName(GpuFault::kReset), "reset");
  EXPECT_EQ(GpuFaultName(GpuFault::kFatal), "fatal");
  EXPECT_EQ(GpuFaultName(GpuFault::kNode), "node");
}

TEST(GpuHealthMonitorTest, InjectedFaultsAreReported) {
  struct Case {
    std::string name;
    std::vector<std::string> inject;
    int gpu;
    std::string kind;
    int xid;
    GpuFault fault;
    std::string message;  // a part of it
  };
  const Case cases[] = {
      {"xid_79",
       {"xid 3 79"},
       3,
       "gpu-lost",
       79,
       GpuFault::kFatal,
       "Xid 79: GPU has fallen off the bus"},
      {"xid_13", {"xid 1 13"}, 1, "xid", 13, GpuFault::kJob, "Xid 13: Graphics Engine"},
      {"xid_48", {"xid 6 48"}, 6, "xid", 48, GpuFault::kFatal, "Xid 48: Double-bit"},
      {"xid_unknown",
       {"xid 2 9999"},
       2,
       "xid",
       9999,
       GpuFault::kReset,
       "Xid 9999 (not in Hachi's table)"},
      {"dbe", {"dbe 2"}, 2, "ecc-dbe", 0, GpuFault::kFatal, "Double-bit ECC"},
      {"sbe", {"sbe 7"}, 7, "ecc-sbe", 0, GpuFault::kInfo, "Single-bit ECC"},
      {"remap_failure",
       {"remap 4 failure"},
       4,
       "remap-failure",
       0,
       GpuFault::kFatal,
       "Row remapping failed"},
      {"remap_pending",
       {"remap 0 pending"},
       0,
       "remap-pending",
       0,
       GpuFault::kReset,
       "a GPU reset applies it"},
      {"hot",
       {"temp 0 95"},
       0,
       "temperature",
       0,
       GpuFault::kInfo,
       "GPU temperature 95C is above the limit of 90C"},
      // Found by the Xid 79 event or by a poll, whichever comes first.
      {"lost", {"lost 5"}, 5, "gpu-lost", 79, GpuFault::kFatal, "off the bus"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FakeNode node;
    Recorder rec;
    GpuHealthOptions opts = node.Options();
    opts.temperature_limit_c = 90;
    auto mon = GpuHealthMonitor::Start(opts, rec.Callback());
    ASSERT_TRUE(mon.ok()) << mon.status().ToString();
    EXPECT_EQ((*mon)->gpu_count(), 8);
    const auto before = std::chrono::system_clock::now();
    for (const std::string& line : c.inject) node.Inject(line);
    std::optional<GpuHealthEvent> got = rec.WaitFor(c.gpu, c.kind);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->xid, c.xid);
    EXPECT_EQ(got->fault, c.fault) << GpuFaultName(got->fault);
    EXPECT_NE(got->message.find(c.message), std::string::npos) << got->message;
    EXPECT_GE(got->at,
              std::chrono::duration_cast<std::chrono::seconds>(before.time_since_epoch())
                  .count());
  }
}

// A lost GPU is seen twice (the Xid 79 event and the polls' GPU_IS_LOST) and reported
// once; the other GPUs are still watched.
TEST(GpuHealthMonitorTest, LostGpuIsReportedOnceAndOthersStillWatched) {
  FakeNode node;
  Recorder rec;
  GpuHealthOptions opts = node.Options();
  opts.temperature_limit_c = 90;
  auto mon = GpuHealthMonitor::Start(opts, rec.Callback());
  ASSERT_TRUE(mon.ok()) << mon.status().ToString();
  node.Inject("lost 5");
  ASSERT_TRUE(rec.WaitFor(5, "gpu-lost").has_value());
  // Events arrive in order: once Xid 48 on GPU 6 is in, the Xid 79 event of GPU 5 has
  // been handled too.
  node.Inject("xid 6 48");
  std::optional<GpuHealthEvent> xid48 = rec.WaitFor(6, "xid");
  ASSERT_TRUE(xid48.has_value());
  EXPECT_EQ(xid48->xid, 48);
  EXPECT_EQ(xid48->fault, GpuFault::kFatal);
  // A poll visits GPU 5 before GPU 7: once GPU 7's heat is in, a poll has asked GPU 5.
  node.Inject("temp 7 95");
  ASSERT_TRUE(rec.WaitFor(7, "temperature").has_value());
  EXPECT_EQ(rec.Count(5, "gpu-lost"), 1);
  EXPECT_EQ(rec.Count(5, "xid"), 0);
  EXPECT_NE((*mon)->summary().find("GPU 5 lost"), std::string::npos) << (*mon)->summary();
}

// Without events (here NVML refuses registration) the polls alone find a lost GPU.
TEST(GpuHealthMonitorTest, PollsFindLostGpuWithoutEvents) {
  FakeNode node;
  ScopedEnv off("HACHI_FAKE_NVML_UNSUPPORTED", "nvmlDeviceRegisterEvents");
  Recorder rec;
  auto mon = GpuHealthMonitor::Start(node.Options(), rec.Callback());
  ASSERT_TRUE(mon.ok()) << mon.status().ToString();
  EXPECT_EQ((*mon)->summary(),
            "no NVML events (no GPU accepted them); polling every 20ms; no events on GPU "
            "0,1,2,3,4,5,6,7: nvmlDeviceRegisterEvents: Not Supported (NVML error 3)");
  node.Inject("lost 2");
  std::optional<GpuHealthEvent> got = rec.WaitFor(2, "gpu-lost");
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->fault, GpuFault::kFatal);
  // Whichever poll call comes first after the line is read tells.
  EXPECT_TRUE(StartsWith(got->message,
                         "GPU is lost (off the bus or otherwise unreachable): "
                         "nvmlDeviceGet"))
      << got->message;
  EXPECT_NE(got->message.find("answered GPU is lost (NVML error 15)"), std::string::npos)
      << got->message;
}

// An event set whose waits keep failing is rebuilt once, then given up for polling.
TEST(GpuHealthMonitorTest, FailingEventWaitsFallBackToPolling) {
  FakeNode node;
  ScopedEnv off("HACHI_FAKE_NVML_UNSUPPORTED", "nvmlEventSetWait_v2");
  Recorder rec;
  GpuHealthOptions opts = node.Options();
  opts.event_wait_ms = 10;
  auto mon = GpuHealthMonitor::Start(opts, rec.Callback());
  ASSERT_TRUE(mon.ok()) << mon.status().ToString();
  const std::string want =
      "no NVML events (nvmlEventSetWait_v2 failed 10 times in a row: Not Supported (NVML "
      "error 3); polling only); polling every 20ms";
  hachi::WaitFor([&] { return (*mon)->summary() == want; });
  EXPECT_EQ((*mon)->summary(), want);
  node.Inject("lost 6");
  ASSERT_TRUE(rec.WaitFor(6, "gpu-lost").has_value());
}

// A GPU already gone at Start has no handle; it is reported once, from the thread.
TEST(GpuHealthMonitorTest, GpuLostBeforeStart) {
  FakeNode node;
  node.Inject("lost 2");
  Recorder rec;
  auto mon = GpuHealthMonitor::Start(node.Options(), rec.Callback());
  ASSERT_TRUE(mon.ok()) << mon.status().ToString();
  EXPECT_EQ((*mon)->summary(),
            "NVML events on 7 of 8 GPUs (Xid, ECC); polling every 20ms; GPU 2 lost");
  ASSERT_TRUE(rec.WaitFor(2, "gpu-lost").has_value());
  node.Inject("xid 3 13");
  ASSERT_TRUE(rec.WaitFor(3, "xid").has_value());
  EXPECT_EQ(rec.Count(2, "gpu-lost"), 1);
}

// The same Xid on the same GPU within repeat_after_s is one report.
TEST(GpuHealthMonitorTest, RepeatedXidIsReportedOnceWithinTheWindow) {
  FakeNode node;
  Recorder rec;
  auto mon = GpuHealthMonitor::Start(node.Options(), rec.Callback());
  ASSERT_TRUE(mon.ok()) << mon.status().ToString();
  node.Inject("xid 1 13");
  node.Inject("xid 1 13");
  node.Inject("xid 1 31");
  node.Inject("xid 2 13");  // after the others, in order
  ASSERT_TRUE(rec.WaitFor(2, "xid").has_value());
  EXPECT_EQ(rec.Count(1, "xid"), 2);  // 13 once, 31 once
}

TEST(GpuHealthMonitorTest, RepeatedXidAfterTheWindowIsReportedAgain) {
  FakeNode node;
  Recorder rec;
  GpuHealthOptions opts = node.Options();
  opts.repeat_after_s = 0;
  auto mon = GpuHealthMonitor::Start(opts, rec.Callback());
  ASSERT_TRUE(mon.ok()) << mon.status().ToString();
  node.Inject("xid 1 13");
  node.Inject("xid 1 13");
  EXPECT_TRUE(rec.WaitForCount(1, "xid", 2));
}

// The window is on the monitor's clock: a minute passes on a FakeClock, not in the test.
TEST(GpuHealthMonitorTest, RepeatWindowIsReadFromTheClock) {
  FakeNode node;
  Recorder rec;
  FakeClock clock;
  GpuHealthOptions opts = node.Options();
  opts.repeat_after_s = 60;
  opts.clock = &clock;
  auto mon = GpuHealthMonitor::Start(opts, rec.Callback());
  ASSERT_TRUE(mon.ok()) << mon.status().ToString();
  node.Inject("xid 1 13");
  std::optional<GpuHealthEvent> first = rec.WaitFor(1, "xid");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->at, clock.Now()) << "stamped with the clock's time";
  clock.Advance(std::chrono::seconds(59));
  node.Inject("xid 1 13");  // within the window: dropped
  node.Inject("xid 2 13");  // after it, in order: once this is in, the repeat was seen
  ASSERT_TRUE(rec.WaitFor(2, "xid").has_value());
  EXPECT_EQ(rec.Count(1, "xid"), 1);
  clock.Advance(std::chrono::seconds(1));
  node.Inject("xid 1 13");  // 60 s after the first: reported again
  EXPECT_TRUE(rec.WaitForCount(1, "xid", 2));
}

TEST(GpuHealthMonitorTest, SummaryAndDefaults) {
  FakeNode node;
  GpuHealthOptions opts;
  opts.library = FakeNvmlLibrary();
  auto mon = GpuHealthMonitor::Start(opts, nullptr);
  ASSERT_TRUE(mon.ok()) << mon.status().ToString();
  EXPECT_EQ((*mon)->summary(), "NVML events on 8 GPUs (Xid, ECC); polling every 5s");
}

TEST(GpuHealthMonitorTest, StopReturnsPromptly) {
  FakeNode node;
  GpuHealthOptions opts;  // the default 500 ms wait
  opts.library = FakeNvmlLibrary();
  auto mon = GpuHealthMonitor::Start(opts, [](const GpuHealthEvent&) {});
  ASSERT_TRUE(mon.ok()) << mon.status().ToString();
  const auto start = std::chrono::steady_clock::now();
  (*mon)->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  (*mon)->Stop();  // idempotent
}

TEST(GpuHealthMonitorTest, StartAgainAfterStop) {
  FakeNode node;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    Recorder rec;
    auto mon = GpuHealthMonitor::Start(node.Options(), rec.Callback());
    ASSERT_TRUE(mon.ok()) << mon.status().ToString();
    node.Inject("xid 4 " + std::to_string(31 + round));
    std::optional<GpuHealthEvent> got = rec.WaitFor(
        [&](const GpuHealthEvent& e) { return e.gpu == 4 && e.xid == 31 + round; });
    ASSERT_TRUE(got.has_value());
  }
}

TEST(GpuHealthMonitorTest, Unavailable) {
  TempDir dir;
  std::string topo =
      dir.Write("topo.json", topo::TopologyToJson(*topo::LoadPreset("hgx-h100")));
  struct Case {
    std::string name, library, init_error;
    std::string want;
  };
  const Case cases[] = {
      {"missing_library", dir.path() + "/libnvidia-ml.so.1", "",
       "cannot load NVML (" + dir.path() + "/libnvidia-ml.so.1)"},
      {"not_a_library", topo, "", "cannot load NVML (" + topo + ")"},
      {"init_fails", FakeNvmlLibrary(), "9",
       "failed to initialise: Driver Not Loaded (NVML error 9)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ScopedEnv env("HACHI_FAKE_NVML_TOPOLOGY", topo);
    ScopedEnv init("HACHI_FAKE_NVML_INIT_ERROR", c.init_error);
    GpuHealthOptions opts;
    opts.library = c.library;
    auto mon = GpuHealthMonitor::Start(opts, nullptr);
    ASSERT_FALSE(mon.ok());
    EXPECT_EQ(mon.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(mon.status().message().find(c.want), std::string::npos)
        << mon.status().message();
  }
}

}  // namespace
}  // namespace hachi::agent
