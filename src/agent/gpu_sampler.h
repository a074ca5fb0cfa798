// What the node's GPUs are doing (docs/efficiency.md): GpuSampler reads, for
// every GPU, SM and memory utilisation, memory used, power, SM clock, PCIe throughput
// and NVLink data throughput through NVML (loaded once per process by
// topo/nvml_library.h), for the agent's per-job samples (AgentDaemon's usage loop). A
// figure NVML does not give (an older driver, a PCIe GPU's NVLink, a lost GPU) is -1.
//
// NVLink throughput comes from NVML's cumulative data counters (fields 138 and 139, per
// link): the first sample has none, later ones the KiB/s since the previous sample, the
// time between them read on the Clock the sampler was given (a test moves a FakeClock).
//
// Thread safety: Sample() from one thread at a time (the agent's usage loop); Open and
// the destructor from any thread. NVML itself is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "state/usage.h"
#include "topo/nvml_library.h"

namespace hachi::agent {

class GpuSampler {
 public:
  // Loads NVML ("" = $HACHI_NVML_LIBRARY, else libnvidia-ml.so.1) and initialises it.
  // kUnavailable naming the library when it cannot be used or sees no GPU. `clock`: not
  // owned, outlives the sampler.
  static Result<std::unique_ptr<GpuSampler>> Open(const std::string& library,
                                                  const Clock* clock = RealClock());
  ~GpuSampler();  // nvmlShutdown
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  // Every GPU's figures now, ascending by index.
  std::vector<state::GpuSample> Sample();
  int gpu_count() const { return static_cast<int>(devices_.size()); }
  // "utilisation, memory, power, SM clock, PCIe, NVLink" less what this NVML lacks.
  std::string summary() const;

 private:
  explicit GpuSampler(const Clock* clock) : clock_(clock) {}
  const Clock* const clock_;
  topo::NvmlApi api_;
  std::vector<topo::nvml::Device> devices_;  // null: the handle failed
  // NVLink counters (TX + RX KiB, summed over links) at the previous sample; -1: none.
  std::vector<long long> nvlink_kib_;
  int64_t nvlink_at_us_ = 0;  // the Clock's monotonic time of the previous sample
};

}  // namespace hachi::agent
