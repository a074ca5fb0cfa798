// KernelXidWatcher: follows the kernel log (/dev/kmsg) for the NVIDIA driver's
// "NVRM: Xid (PCI:0000:18:00): 79, ..." lines and reports each as a GpuHealthEvent, the
// GPU found by its PCI bus id. A second source beside NVML's events (gpu_health.h): the
// driver logs some faults it raises no NVML event for, and the log is readable when NVML
// is wedged. The server treats a fault reported twice as one.
//
// Only the kernel's own records (facility 0) whose message starts with the driver's text
// count (topo/kernel_log_line.h): an unprivileged user can have the kernel quote an Xid
// line inside another message. Where NVML watches a GPU, its kernel-log Xids still need
// NVML's word before they take it out of service (agent/xid_confirm.h).
//
// Thread safety: Start/Stop from any thread; the callback runs on the watcher's thread.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "agent/gpu_health.h"
#include "core/status.h"

namespace hachi::agent {

class KernelXidWatcher {
 public:
  // `path`: /dev/kmsg (root can read it), or any file of its records that grows (tests).
  // Reading starts at its end: only lines logged from now on count. `gpu_by_bus`:
  // NVML-form bus id
  // ("00000000:18:00.0") -> GPU index; a line for another device is reported with gpu -1.
  // kUnavailable when the log cannot be opened (not root, no /dev/kmsg in a container).
  // Events are stamped with `clock`'s time (not owned; outlives the watcher; null:
  // RealClock()).
  static Result<std::unique_ptr<KernelXidWatcher>> Start(
      std::string path, std::map<std::string, int> gpu_by_bus, GpuHealthCallback cb,
      int poll_ms = 500, const Clock* clock = RealClock());
  KernelXidWatcher(const KernelXidWatcher&) = delete;
  KernelXidWatcher& operator=(const KernelXidWatcher&) = delete;
  ~KernelXidWatcher();  // Stop()
  void Stop();          // joins the thread; idempotent

 private:
  struct Impl;
  explicit KernelXidWatcher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hachi::agent
