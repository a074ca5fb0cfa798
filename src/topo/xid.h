// The NVIDIA driver's Xid errors: what each well-known Xid means and what it asks of
// the scheduler (ClassifyXid), and the kernel log's "NVRM: Xid" lines (ParseNvrmXidLine),
// trusted only where the kernel's NVIDIA driver wrote them (topo/kernel_log_line.h).
// Pure functions, thread-safe. Below both of their users: the agent's GPU health monitor
// (agent/gpu_health.h, agent/kernel_log.h) and `hachi doctor` (diag/doctor.h), which
// reads the kernel log since boot.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "topo/kernel_log_line.h"

namespace hachi::topo {

// What a fault asks of the scheduler.
enum class GpuFault {
  kInfo,   // logged only
  kJob,    // the application's fault (Xid 13, 31, 43...); the GPU is fine
  kReset,  // the GPU needs a reset before it is trusted again: drain that GPU
  kFatal,  // the GPU is broken or gone (Xid 48, 79, lost): drain that GPU
  kNode,   // node-wide (NVLink / NVSwitch fabric): drain the node
};

// "info", "job", "reset", "fatal", "node".
std::string_view GpuFaultName(GpuFault f);

struct XidInfo {
  GpuFault fault;
  std::string meaning;  // "GPU has fallen off the bus"
};

// The well-known Xids of NVIDIA's Xid catalogue (table and sources in xid.cc).
// Ids not in the table: kReset, "Xid N (not in Hachi's table)" -- an unknown error is
// trusted no more than a known hardware one.
XidInfo ClassifyXid(int xid);
// "Xid 79: GPU has fallen off the bus"; for an unknown id, ClassifyXid's meaning.
std::string XidMessage(int xid);

// The driver's Xid line: "NVRM: Xid (PCI:0000:18:00): 79, pid=..., GPU has fallen off
// the bus." (drivers before about 2015: "NVRM: Xid (0000:18:00): 48, ...").
struct KernelXid {
  std::string pci_bus_id;  // NVML's form, as in topology files: "00000000:18:00.0"
  int xid = 0;
  std::string
      text;     // after the Xid and the pid/name fields: "GPU has fallen off the bus."
  int pid = 0;  // 0: not given or '<unknown>'
  std::string process;  // the name= field, "" when not given or <unknown>
};
// `message` is a kernel message from its first byte (KernelLogLine::message): the
// driver's text must start it. Anywhere else it is text someone had the kernel quote.
// nullopt for any other message.
std::optional<KernelXid> ParseNvrmXidMessage(std::string_view message);
// A whole line of a kernel log read from `source` (topo/kernel_log_line.h): the kernel's
// own line, in one of that source's formats, whose message is the driver's Xid line.
std::optional<KernelXid> ParseNvrmXidLine(std::string_view line, KernelLogSource source);

}  // namespace hachi::topo
