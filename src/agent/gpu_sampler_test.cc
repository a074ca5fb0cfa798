// GpuSampler against the fake libnvidia-ml.so.1: scripted utilisation and
// memory series advance one value per sample, power, clock and PCIe figures read back,
// NVLink throughput from the counters' growth; a function NVML lacks leaves its figure
// unknown.
#include "agent/gpu_sampler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>

#include "core/clock.h"
#include "core/testing/paths.h"
#include "topo/presets.h"
#include "topo/topology_file.h"
#include "topo/topology_testing.h"

namespace hachi::agent {
namespace {

using topo::ScopedEnv;
using topo::TempDir;

class FakeGpus {
 public:
  explicit FakeGpus(const std::string& events, const std::string& preset = "hgx-h100")
      : topology_(
            "HACHI_FAKE_NVML_TOPOLOGY",
            dir_.Write("topo.json", topo::TopologyToJson(*topo::LoadPreset(preset)))),
        events_("HACHI_FAKE_NVML_EVENTS", dir_.Write("events", events)) {}

 private:
  TempDir dir_;
  ScopedEnv topology_, events_;
};

TEST(GpuSampler, ScriptedSeriesAdvanceOnePerSample) {
  FakeGpus node(
      "util 3 5,95,40 20\n"
      "memused 3 1000,2000\n"
      "power 3 450\n"
      "smclock 3 1755\n"
      "pcietput 3 300 200\n");
  Result<std::unique_ptr<GpuSampler>> s = GpuSampler::Open(FakeNvmlLibrary());
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ((*s)->gpu_count(), 8);
  EXPECT_EQ((*s)->summary(), "utilisation, memory, power, SM clock, PCIe, NVLink");
  const int want_util[] = {5, 95, 40, 40};
  const int64_t want_mem[] = {1000, 2000, 2000, 2000};
  for (int k = 0; k < 4; ++k) {
    std::vector<state::GpuSample> got = (*s)->Sample();
    ASSERT_EQ(got.size(), 8u);
    EXPECT_EQ(got[3].util, want_util[k]) << k;
    EXPECT_EQ(got[3].mem_util, 20);
    EXPECT_EQ(got[3].mem_mib, want_mem[k]) << k;
    EXPECT_EQ(got[3].power_w, 450);
    EXPECT_EQ(got[3].sm_clock_mhz, 1755);
    EXPECT_EQ(got[3].pcie_kbs, 500);
    EXPECT_EQ(got[0].util, 0);  // unscripted: idle
    EXPECT_EQ(got[0].power_w, 70);
  }
}

TEST(GpuSampler, NvLinkThroughputFromTheCounters) {
  // TX and RX each count 1,000,000 KiB more at the second sample, a second later.
  FakeGpus node("nvlinkkib 1 5000,1005000\n");
  FakeClock clock;
  Result<std::unique_ptr<GpuSampler>> s = GpuSampler::Open(FakeNvmlLibrary(), &clock);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)->Sample()[1].nvlink_kbs, -1);  // no earlier counters yet
  clock.Advance(std::chrono::seconds(1));
  const std::vector<state::GpuSample> got = (*s)->Sample();
  EXPECT_EQ(got[1].nvlink_kbs, 2'000'000);
  EXPECT_EQ(got[2].nvlink_kbs, 0);
}

TEST(GpuSampler, WhatNvmlLacksStaysUnknown) {
  FakeGpus node("util 0 50\n");
  ScopedEnv off("HACHI_FAKE_NVML_UNSUPPORTED",
                "nvmlDeviceGetPowerUsage,nvmlDeviceGetFieldValues");
  Result<std::unique_ptr<GpuSampler>> s = GpuSampler::Open(FakeNvmlLibrary());
  ASSERT_TRUE(s.ok()) << s.status().message();
  (*s)->Sample();
  const std::vector<state::GpuSample> got = (*s)->Sample();
  EXPECT_EQ(got[0].util, 50);
  EXPECT_EQ(got[0].power_w, -1);
  EXPECT_EQ(got[0].nvlink_kbs, -1);
}

TEST(GpuSampler, NoLibraryIsAClearError) {
  Result<std::unique_ptr<GpuSampler>> s =
      GpuSampler::Open("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("/nonexistent/libnvidia-ml.so.1"),
            std::string::npos)
      << s.status().message();
}

}  // namespace
}  // namespace hachi::agent
