// Test helpers for GpuHealthMonitor and what listens to it: a Recorder of the events a
// callback got, waited on with a deadline, and a FakeNode, an HGX node in the fake
// libnvidia-ml.so.1 (src/topo/testdata/fake_nvml/) with a file to append faults to.
// Tests only; a Recorder's methods may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/gpu_health.h"
#include "core/testing/paths.h"
#include "topo/presets.h"
#include "topo/topology_file.h"
#include "topo/topology_testing.h"

namespace hachi::agent::testing {

// What the monitor reported, waited on with a deadline.
class Recorder {
 public:
  GpuHealthCallback Callback() {
    return [this](const GpuHealthEvent& e) {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(e);
      cv_.notify_all();
    };
  }
  // The `n`th event matching (from 1), waiting up to 10 s for it.
  template <typename Pred>
  std::optional<GpuHealthEvent> WaitForNth(Pred pred, int n) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<GpuHealthEvent> found;
    cv_.wait_for(lock, std::chrono::seconds(10), [&] {
      int seen = 0;
      for (const GpuHealthEvent& e : events_) {
        if (pred(e) && ++seen == n) {
          found = e;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  template <typename Pred>
  std::optional<GpuHealthEvent> WaitFor(Pred pred) {
    return WaitForNth(pred, 1);
  }
  std::optional<GpuHealthEvent> WaitFor(int gpu, const std::string& kind) {
    return WaitFor(
        [&](const GpuHealthEvent& e) { return e.gpu == gpu && e.kind == kind; });
  }
  int Count(int gpu, const std::string& kind) {
    std::lock_guard<std::mutex> lock(mu_);
    return CountLocked(gpu, kind);
  }
  // Whether `n` such events came within 10 s.
  bool WaitForCount(int gpu, const std::string& kind, int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10),
                        [&] { return CountLocked(gpu, kind) >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<GpuHealthEvent> events_;

  int CountLocked(int gpu, const std::string& kind) const {
    int n = 0;
    for (const GpuHealthEvent& e : events_) n += e.gpu == gpu && e.kind == kind;
    return n;
  }
};

// An HGX H100 node in the fake NVML, with an events file to append faults to.
class FakeNode {
 public:
  explicit FakeNode(const std::string& preset = "hgx-h100")
      : topology_(
            "HACHI_FAKE_NVML_TOPOLOGY",
            dir_.Write("topo.json", topo::TopologyToJson(*topo::LoadPreset(preset)))),
        events_("HACHI_FAKE_NVML_EVENTS", dir_.path() + "/events") {}

  // Appends one line at once, so the fake never sees half of it.
  void Inject(const std::string& line) {
    std::ofstream(dir_.path() + "/events", std::ios::app) << line + "\n";
  }
  GpuHealthOptions Options() const {
    GpuHealthOptions o;
    o.library = FakeNvmlLibrary();
    o.event_wait_ms = 50;
    o.poll_interval_ms = 20;
    return o;
  }
  const topo::TempDir& dir() const { return dir_; }

 private:
  topo::TempDir dir_;
  topo::ScopedEnv topology_, events_;
};

}  // namespace hachi::agent::testing
