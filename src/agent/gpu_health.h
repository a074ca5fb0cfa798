// GPU health on the agent's node: GpuHealthMonitor watches every GPU through NVML
// (libnvidia-ml.so.1, loaded once per process by topo/nvml_library.h) and reports faults
// -- Xid errors, ECC errors, GPUs that fell off the bus, pending or failed row remapping,
// heat -- to a callback, each classified by what it means for scheduling (GpuFault). The
// agent forwards them to the server, which drains the GPU or node and requeues the job.
//
// Two sources, because NVML events alone miss a GPU that dies quietly: a thread waits on
// an NVML event set (Xid, double- and single-bit ECC) and, every poll interval, asks each
// GPU for its temperature and remapped rows; a call answering GPU_IS_LOST marks the GPU
// lost. ParseNvrmXidLine (topo/xid.h) reads the same Xids from the kernel log, for
// callers that watch it.
//
// Thread safety: Start, Stop, gpu_count, WatchesXids and summary may be called from any
// thread. The
// callback runs on the monitor's own thread, one call at a time; it must not call Stop
// (Stop joins that thread). Free functions are pure.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "core/time.h"
#include "topo/xid.h"

namespace hachi::agent {

// The Xid table and the kernel log's line parser live in topo/xid.h, below both the
// agent and `hachi doctor`; the agent's code names them as its own.
using topo::ClassifyXid;
using topo::GpuFault;
using topo::GpuFaultName;
using topo::KernelLogSource;
using topo::KernelXid;
using topo::ParseNvrmXidLine;
using topo::XidInfo;
using topo::XidMessage;

struct GpuHealthEvent {
  int gpu = -1;  // NVML index (the topology's index); -1: node-wide or an unknown device
  // "xid", "ecc-dbe", "ecc-sbe", "gpu-lost", "remap-pending", "remap-failure",
  // "temperature".
  std::string kind;
  int xid = 0;  // for "xid"; 79 for "gpu-lost" (what the driver logs for it)
  GpuFault fault = GpuFault::kInfo;
  std::string message;  // one line for humans: "Xid 79: GPU has fallen off the bus"
  Time at = 0;          // seconds since the Unix epoch, when the monitor saw it
};

// A compute process on a GPU, as NVML lists it (nvmlDeviceGetComputeRunningProcesses_v3).
struct GpuProcess {
  int gpu = -1;           // NVML index
  unsigned pid = 0;       // in the agent's pid namespace
  int64_t used_mib = -1;  // -1: NVML does not say (permissions, MIG)
};
// Every poll, all compute processes on the GPUs that answered (ascending by GPU, pid).
using GpuProcessesCallback = std::function<void(const std::vector<GpuProcess>&)>;

struct GpuHealthOptions {
  // NVML's file name or path; "" = $HACHI_NVML_LIBRARY, else "libnvidia-ml.so.1".
  std::string library;
  // The longest single nvmlEventSetWait_v2 call; Stop() returns within about this long.
  int event_wait_ms = 500;
  // How often every GPU is asked for its temperature and remapped rows (which is also
  // how a GPU lost without an Xid 79 event is found).
  int poll_interval_ms = 5000;
  // 0: no temperature events. Else a "temperature" event (kInfo: the GPU throttles and
  // protects itself; an operator should look at the cooling, the scheduler need not act)
  // when the GPU goes above this many degrees C; again only after it has cooled to the
  // limit or below.
  int temperature_limit_c = 0;
  // The same Xid or ECC error on the same GPU within this many seconds of its last
  // report is not reported again (a faulting job can log thousands).
  int repeat_after_s = 60;
  // When set, called on the monitor's thread after each poll with the GPUs' compute
  // processes (users who pin GPUs by hand show up here: agent/gpu_processes.h).
  GpuProcessesCallback on_processes;
  // Events' times and the repeat window read it (the poll schedule waits in real time).
  // Not owned; outlives the monitor; null: RealClock().
  const Clock* clock = RealClock();
};

using GpuHealthCallback = std::function<void(const GpuHealthEvent&)>;

class GpuHealthMonitor {
 public:
  // Loads NVML, registers Xid/ECC events on every GPU that supports them and starts the
  // watching thread. kUnavailable (the message names the library or the failing call)
  // when NVML cannot be used: no library, nvmlInit_v2 fails, no GPU. GPUs without events
  // are still polled; summary() says which.
  static Result<std::unique_ptr<GpuHealthMonitor>> Start(GpuHealthOptions options,
                                                         GpuHealthCallback cb);
  GpuHealthMonitor(const GpuHealthMonitor&) = delete;
  GpuHealthMonitor& operator=(const GpuHealthMonitor&) = delete;
  ~GpuHealthMonitor();  // Stop()

  // Stops and joins the thread, frees the event set, calls nvmlShutdown (the library
  // stays loaded for the process). Idempotent.
  void Stop();

  int gpu_count() const;
  // Whether NVML reports GPU `gpu`'s Xids as events now: registered, the event set alive
  // and the GPU not lost. Where it does, a kernel-log Xid can be checked against NVML's
  // (agent/xid_confirm.h); where it does not, the kernel log is the only source.
  bool WatchesXids(int gpu) const;
  // "NVML events on 8 GPUs (Xid, ECC); polling every 5s", plus what is not watched.
  std::string summary() const;

 private:
  struct Impl;
  explicit GpuHealthMonitor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hachi::agent
