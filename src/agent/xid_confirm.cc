#include "agent/xid_confirm.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace hachi::agent {
namespace {

// NVML reports some faults under an event or poll of their own, not as an Xid event:
// those confirm the kernel's Xid for the same fault too.
struct AlsoConfirmedBy {
  int xid;
  const char* nvml_kind;  // GpuHealthEvent::kind
};
constexpr AlsoConfirmedBy kAlsoConfirmedBy[] = {
    {48, "ecc-dbe"},        // double-bit ECC: NVML's ECC event
    {63, "remap-pending"},  // a row remap recorded: the remapped-rows poll
    {64, "remap-failure"},
};

// The faults the server takes a GPU (or the node) out of service for.
bool TakesOutOfService(GpuFault f) {
  return f == GpuFault::kReset || f == GpuFault::kFatal || f == GpuFault::kNode;
}

}  // namespace

KernelXidConfirmer::KernelXidConfirmer(const Clock* clock, int window_s)
    : clock_(clock != nullptr ? clock : RealClock()),
      window_us_(int64_t{std::max(window_s, 0)} * 1'000'000) {}

void KernelXidConfirmer::NoteNvml(const GpuHealthEvent& e) {
  if (e.gpu < 0) return;
  const int64_t now = clock_->MonotonicMicros();
  MutexLock lock(&mu_);
  if (e.kind == "gpu-lost") lost_.insert(e.gpu);
  nvml_seen_[{e.gpu, e.kind, e.xid}] = now;
}

GpuHealthEvent KernelXidConfirmer::Judge(GpuHealthEvent kernel, bool nvml_watches) const {
  if (!nvml_watches || !TakesOutOfService(kernel.fault)) return kernel;
  const int64_t now = clock_->MonotonicMicros();
  {
    MutexLock lock(&mu_);
    if (lost_.contains(kernel.gpu)) return kernel;
    std::vector<std::pair<std::string, int>> confirming = {{"xid", kernel.xid}};
    for (const AlsoConfirmedBy& a : kAlsoConfirmedBy) {
      if (a.xid == kernel.xid) confirming.emplace_back(a.nvml_kind, 0);
    }
    for (const auto& [kind, xid] : confirming) {
      auto it = nvml_seen_.find({kernel.gpu, kind, xid});
      if (it != nvml_seen_.end() && now - it->second <= window_us_) return kernel;
    }
  }
  kernel.fault = GpuFault::kInfo;
  kernel.message += ", not confirmed by NVML: the GPU stays in service";
  return kernel;
}

}  // namespace hachi::agent
