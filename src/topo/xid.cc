#include "topo/xid.h"

#include <cctype>
#include <charconv>
#include <climits>
#include <cstdio>
#include <system_error>
#include <vector>

#include "core/strings.h"

namespace hachi::topo {
namespace {

// The Xid catalogue, as NVIDIA publishes it ("Xid Errors" and "Analyzing Xid Errors with
// the Xid Catalog", docs.nvidia.com/deploy/xid-errors/; the older Xid table of
// docs.nvidia.com/deploy/xid-errors/ for Volta and before), reduced to what the scheduler
// must do. NVIDIA's "Resolution Bucket (Immediate Action)" guides the choice:
// RESTART_APP -> kJob, RESET_GPU -> kReset, CONTACT_SUPPORT for a dead GPU -> kFatal.
// Hachi's own calls, where the catalogue leaves room:
//  - 48 (double-bit ECC) is kFatal, not kReset: the memory is suspect until an operator
//    has looked, even where row remapping would repair it at the next reset.
//  - 63 (page retirement / row remap recorded) is kReset: the driver itself says "reset
//    GPU to activate"; until then the bad row stays in use.
//  - 74 (NVLink error) is kReset: one GPU's link, reset with that GPU. ClassifyXid has no
//    topology, so it cannot tell an NVSwitch node, where the server may choose to widen
//    it to the node.
//  - 144-150 (NVLink SAW/RLW/TLW/TREX/NVLPW/NETIR/MSE errors of Hopper and later) are
//    kReset like 74: they are reported per GPU, and NVIDIA's operational-event catalogue
//    lists them under the GPU's NVLink module, so that GPU leaves service, not the node
//    (draining a whole 8-GPU node for one GPU's link would strand seven good GPUs).
//    kNode is kept for faults of the fabric itself (NVSwitch SXids), which an agent would
//    learn from the fabric manager, not from these Xids.
//  - 94 (contained ECC) is kJob: the driver stopped only the application that touched
//    the memory; 95 (uncontained) is kReset.
struct XidRow {
  int xid;
  GpuFault fault;
  const char* meaning;
};
constexpr XidRow kXids[] = {
    {8, GpuFault::kJob, "GPU stopped processing (a channel timed out)"},
    {13, GpuFault::kJob,
     "Graphics Engine Exception (usually the application: an out-of-bounds access or "
     "illegal instruction)"},
    {31, GpuFault::kJob, "GPU memory page fault (usually the application's bad address)"},
    {32, GpuFault::kReset,
     "Invalid or corrupted push buffer stream (DMA fault, often PCIe signal quality)"},
    {38, GpuFault::kReset, "Driver firmware error"},
    {43, GpuFault::kJob,
     "GPU stopped processing (the application's fault; the GPU is fine)"},
    {45, GpuFault::kInfo, "Preemptive cleanup (an application was stopped or killed)"},
    {48, GpuFault::kFatal, "Double-bit ECC error (uncorrectable memory error)"},
    {61, GpuFault::kReset, "Internal micro-controller breakpoint/warning"},
    {62, GpuFault::kReset, "Internal micro-controller halt"},
    {63, GpuFault::kReset,
     "ECC page retirement or row remapping recorded (a GPU reset activates it)"},
    {64, GpuFault::kReset, "ECC page retirement or row remapper recording failure"},
    {68, GpuFault::kJob, "Video processor (NVDEC) exception"},
    {69, GpuFault::kJob, "Graphics Engine class error"},
    {74, GpuFault::kReset, "NVLink error (this link, or the device at its other end)"},
    {79, GpuFault::kFatal, "GPU has fallen off the bus"},
    {92, GpuFault::kInfo, "High single-bit ECC error rate"},
    {94, GpuFault::kJob,
     "Contained ECC error (only the application using the memory was "
     "stopped; the GPU is fine)"},
    {95, GpuFault::kReset, "Uncontained ECC error (a GPU reset is needed)"},
    {119, GpuFault::kReset,
     "GSP RPC timeout (the GPU's system processor did not answer)"},
    {120, GpuFault::kReset, "GSP error (the GPU's system processor failed)"},
    {121, GpuFault::kInfo, "C2C (chip-to-chip) link corrected error"},
    {140, GpuFault::kReset, "Unrecovered ECC error"},
    {143, GpuFault::kFatal, "GPU initialization failure"},
    {144, GpuFault::kReset, "NVLink: SAW error"},
    {145, GpuFault::kReset, "NVLink: RLW error"},
    {146, GpuFault::kReset, "NVLink: TLW error"},
    {147, GpuFault::kReset, "NVLink: TREX error"},
    {148, GpuFault::kReset, "NVLink: NVLPW control error"},
    {149, GpuFault::kReset, "NVLink: NETIR error"},
    {150, GpuFault::kReset, "NVLink: MSE error"},
    {154, GpuFault::kReset,
     "GPU recovery action changed (the driver asks for a GPU reset or node reboot; see "
     "nvidia-smi -q)"},
};

const XidRow* FindXid(int xid) {
  for (const XidRow& r : kXids) {
    if (r.xid == xid) return &r;
  }
  return nullptr;
}

}  // namespace

std::string_view GpuFaultName(GpuFault f) {
  switch (f) {
    case GpuFault::kInfo:
      return "info";
    case GpuFault::kJob:
      return "job";
    case GpuFault::kReset:
      return "reset";
    case GpuFault::kFatal:
      return "fatal";
    case GpuFault::kNode:
      return "node";
  }
  return "info";
}

XidInfo ClassifyXid(int xid) {
  if (const XidRow* r = FindXid(xid)) return {r->fault, r->meaning};
  return {GpuFault::kReset, "Xid " + std::to_string(xid) + " (not in Hachi's table)"};
}

std::string XidMessage(int xid) {
  const XidRow* r = FindXid(xid);
  return r ? "Xid " + std::to_string(xid) + ": " + r->meaning : ClassifyXid(xid).meaning;
}

namespace {

// "0000:3b:00", "0000:3B:00.0", "00000000:3b:00.0" -> "00000000:3B:00.0"; nullopt when
// it is not a PCI address.
std::optional<std::string> NormalizeBusId(std::string_view id) {
  std::vector<std::string_view> parts = Split(id, ':');
  if (parts.size() == 2) parts.insert(parts.begin(), "0");
  if (parts.size() != 3) return std::nullopt;
  std::string_view dev = parts[2], fn = "0";
  if (size_t dot = dev.find('.'); dot != std::string_view::npos) {
    fn = dev.substr(dot + 1);
    dev = dev.substr(0, dot);
  }
  unsigned long long v[4] = {};
  const std::string_view fields[4] = {parts[0], parts[1], dev, fn};
  const unsigned long long max[4] = {0xFFFFFFFF, 0xFF, 0x1F, 0x7};
  for (int k = 0; k < 4; ++k) {
    const std::string_view f = fields[k];
    if (f.empty() || f.size() > 8) return std::nullopt;
    auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v[k], 16);
    if (ec != std::errc() || end != f.data() + f.size() || v[k] > max[k]) {
      return std::nullopt;
    }
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%08llX:%02llX:%02llX.%llX", v[0], v[1], v[2], v[3]);
  return std::string(buf);
}

// Splits "key=value, rest" off the front of `s` when it starts with `key=`.
std::optional<std::string_view> TakeField(std::string_view& s, std::string_view key) {
  if (!StartsWith(s, key)) return std::nullopt;
  const size_t comma = s.find(',');
  std::string_view value =
      s.substr(key.size(), comma == std::string_view::npos ? std::string_view::npos
                                                           : comma - key.size());
  s = comma == std::string_view::npos ? std::string_view() : Trim(s.substr(comma + 1));
  value = Trim(value);
  if (value.size() >= 2 && value.front() == '\'' && value.back() == '\'') {
    value = value.substr(1, value.size() - 2);
  }
  return value;
}

}  // namespace

std::optional<KernelXid> ParseNvrmXidMessage(std::string_view message) {
  constexpr std::string_view kTag = "NVRM: Xid (";
  if (!StartsWith(message, kTag)) return std::nullopt;
  std::string_view rest = message.substr(kTag.size());
  const size_t close = rest.find(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view bus = rest.substr(0, close);
  if (StartsWith(bus, "PCI:")) bus.remove_prefix(4);
  std::optional<std::string> bus_id = NormalizeBusId(bus);
  if (!bus_id) return std::nullopt;
  rest = rest.substr(close + 1);
  if (!StartsWith(rest, ":")) return std::nullopt;
  rest = Trim(rest.substr(1));
  size_t digits = 0;
  while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) {
    ++digits;
  }
  if (digits == 0 || digits > 6) return std::nullopt;
  KernelXid k;
  k.pci_bus_id = std::move(*bus_id);
  k.xid = static_cast<int>(*ParseInt(rest.substr(0, digits)));
  rest = rest.substr(digits);
  if (!rest.empty() && rest[0] != ',') return std::nullopt;  // "79x": not an Xid line
  if (!rest.empty()) rest = Trim(rest.substr(1));
  // Newer drivers put the process first: pid='<unknown>', name=<unknown>, ...
  for (bool more = true; more;) {
    more = false;
    if (auto pid = TakeField(rest, "pid=")) {
      std::optional<long long> n = ParseInt(*pid);
      k.pid = n && *n > 0 && *n <= INT_MAX ? static_cast<int>(*n) : 0;
      more = true;
    }
    if (auto name = TakeField(rest, "name=")) {
      k.process = *name == "<unknown>" ? "" : std::string(*name);
      more = true;
    }
  }
  k.text = std::string(Trim(rest));
  return k;
}

std::optional<KernelXid> ParseNvrmXidLine(std::string_view line, KernelLogSource source) {
  const std::optional<KernelLogLine> l = SplitKernelLogLine(line, source);
  if (!l) return std::nullopt;
  return ParseNvrmXidMessage(l->message);
}

}  // namespace hachi::topo
