// KernelXidConfirmer: whether an Xid read from the kernel log may take a GPU out of
// service on a node where NVML watches that GPU. The kernel log is text: even with only
// the driver's own lines read (topo/kernel_log_line.h), one source that a user may be
// able to shape should not by itself requeue another user's job. NVML's events come from
// the driver. So where NVML reports a GPU's Xids as events, a kernel-log Xid that would
// drain the GPU counts only when NVML reported the same fault on that GPU in the window
// before it (or NVML found the GPU lost); otherwise it is passed on as information, and
// the GPU stays in service. A kernel line read before NVML's own event loses nothing:
// that event, when it comes, takes the GPU out by itself. Where NVML does not watch the
// GPU (no NVML, no Xid events on it), the kernel log is the only source and its Xids
// count as read.
//
// Thread safety: every method may be called from any thread (NVML's events come on the
// health monitor's thread, the kernel log's on its watcher's).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <tuple>

#include "agent/gpu_health.h"
#include "core/clock.h"
#include "core/mutex.h"

namespace hachi::agent {

class KernelXidConfirmer {
 public:
  // At least the health monitor's repeat window (GpuHealthOptions::repeat_after_s): NVML
  // repeats of one fault inside it are not reported, and a kernel line that repeats with
  // them must still find the first. Long is safe: only NVML's own report of the same
  // fault on the same GPU confirms, and that report has taken the GPU out already.
  static constexpr int kDefaultWindowS = 60;

  // `clock`: not owned, outlives this (null: RealClock()).
  explicit KernelXidConfirmer(const Clock* clock = RealClock(),
                              int window_s = kDefaultWindowS);
  KernelXidConfirmer(const KernelXidConfirmer&) = delete;
  KernelXidConfirmer& operator=(const KernelXidConfirmer&) = delete;

  // Every event GpuHealthMonitor reports.
  void NoteNvml(const GpuHealthEvent& e) EXCLUDES(mu_);

  // The event to report for `kernel` (a KernelXidWatcher's): as it is when its fault
  // does not take a GPU out, when NVML does not watch that GPU's Xids (`nvml_watches`:
  // GpuHealthMonitor::WatchesXids) or when NVML confirmed it; else the same Xid as
  // information (GpuFault::kInfo), its message saying why.
  GpuHealthEvent Judge(GpuHealthEvent kernel, bool nvml_watches) const EXCLUDES(mu_);

 private:
  // Constant after construction.
  const Clock* clock_;
  const int64_t window_us_;

  mutable Mutex mu_;
  // When NVML last reported (GPU, kind, Xid): the clock's monotonic microseconds.
  std::map<std::tuple<int, std::string, int>, int64_t> nvml_seen_ GUARDED_BY(mu_);
  std::set<int> lost_ GUARDED_BY(mu_);  // GPUs NVML found lost: gone until a restart
};

}  // namespace hachi::agent
