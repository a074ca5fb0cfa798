// doctor's kernel log check: every "NVRM: Xid" line the driver logged since boot, with
// what NVIDIA's Xid catalogue says it means (topo/xid.h). Only the kernel's own lines
// that start with the driver's text count (topo/kernel_log_line.h): a user can have the
// kernel quote "NVRM: Xid ..." inside another message, and the burn-in gate must not
// fail a GPU on that. /dev/kmsg is read from its start: it holds the
// kernel's ring buffer since boot, unless the buffer has wrapped (then the oldest lines
// are gone).
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <map>
#include <string>
#include <tuple>

#include "core/strings.h"
#include "diag/doctor_stages.h"
#include "topo/xid.h"

namespace hachi::diag {
namespace {

constexpr size_t kMaxLog = size_t{64} << 20;

// /dev/kmsg gives one record per read and EAGAIN at its end (EPIPE when a record was
// overwritten before it was read: the next read goes on); a file gives what it has.
std::optional<std::string> ReadLog(const std::string& path, std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    *error = std::strerror(errno);
    return std::nullopt;
  }
  std::string out;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      // A kmsg record is one line without its newline only when it was cut.
      if (out.back() != '\n') out += '\n';
      if (out.size() > kMaxLog) break;
      continue;
    }
    if (n < 0 && (errno == EINTR || errno == EPIPE)) continue;
    if (n < 0 && errno != EAGAIN) {
      *error = std::strerror(errno);
      ::close(fd);
      return std::nullopt;
    }
    break;
  }
  ::close(fd);
  return out;
}

struct Seen {
  int count = 0;
  std::string first;  // the first line, from "NVRM:" on
};

std::string FixFor(topo::GpuFault fault, int gpu) {
  const std::string reset =
      gpu >= 0 ? "nvidia-smi -r -i " + std::to_string(gpu) : std::string("nvidia-smi -r");
  switch (fault) {
    case topo::GpuFault::kFatal:
      return "drain the GPU; check that it is on the bus (nvidia-smi -L, lspci), reset "
             "or reboot, and reseat or replace it if it recurs";
    case topo::GpuFault::kReset:
      return "reset the GPU (" + reset +
             ") or reboot, then run hachi doctor again; replace it if the Xid recurs";
    case topo::GpuFault::kNode:
      return "reboot the node and read the fabric manager's log";
    case topo::GpuFault::kJob:
      return "usually the application's fault (a bad address or illegal instruction); "
             "the GPU is suspect only if it recurs across jobs";
    case topo::GpuFault::kInfo:
      return "informational; watch for repeats";
  }
  return "";
}

std::string DurationText(int64_t s) {
  if (s % 3600 == 0) return std::to_string(s / 3600) + "h";
  if (s % 60 == 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

}  // namespace

std::vector<CheckItem> XidChecks(const NvmlReadings& r, const KernelLogInput& in,
                                 int only_gpu, int64_t since_s,
                                 std::optional<uint64_t> now_usec) {
  const std::string& shown = in.shown;
  // The window: records before `cutoff` are history; none when it cannot be placed.
  std::optional<uint64_t> cutoff;
  if (since_s > 0 && now_usec) {
    const uint64_t back = static_cast<uint64_t>(since_s) * 1000000;
    cutoff = *now_usec > back ? *now_usec - back : 0;
  }
  const std::string when =
      since_s <= 0 ? " since boot"
      : cutoff     ? " in the last " + DurationText(since_s)
                   : " since boot (the clock to place --xid-since by is unknown)";
  std::string error;
  std::optional<std::string> log = ReadLog(in.path, &error);
  if (!log) {
    return {{"xid",
             CheckStatus::kWarn,
             {},
             "cannot read the kernel log " + shown + ": " + error,
             "run hachi doctor as root, or give --kernel-log FILE (journalctl -k -b > "
             "FILE)"}};
  }
  std::map<std::string, int> gpu_by_bus;
  for (const GpuReadings& g : r.gpus) {
    if (!g.bus_id.empty()) gpu_by_bus[g.bus_id] = g.index;
  }
  // By GPU (devices NVML does not list last, by bus id), then Xid.
  std::map<std::tuple<int, std::string, int>, Seen> seen;
  for (std::string_view line : SplitLines(*log)) {
    const std::optional<topo::KernelLogLine> kernel =
        topo::SplitKernelLogLine(line, in.source);
    if (!kernel) continue;
    std::optional<topo::KernelXid> x = topo::ParseNvrmXidMessage(kernel->message);
    if (!x) continue;
    if (cutoff && kernel->kmsg_usec && *kernel->kmsg_usec < *cutoff) continue;
    auto it = gpu_by_bus.find(x->pci_bus_id);
    const int gpu = it == gpu_by_bus.end() ? -1 : it->second;
    if (only_gpu >= 0 && gpu != only_gpu) continue;
    Seen& s = seen[{gpu < 0 ? INT_MAX : gpu, gpu < 0 ? x->pci_bus_id : "", x->xid}];
    if (s.count++ == 0) s.first = Clip(Trim(kernel->message), 240);
  }
  std::vector<CheckItem> out;
  for (const auto& [key, s] : seen) {
    const auto& [order, bus, xid] = key;
    const int gpu = order == INT_MAX ? -1 : order;
    const topo::XidInfo info = topo::ClassifyXid(xid);
    const bool fatal = info.fault == topo::GpuFault::kFatal ||
                       info.fault == topo::GpuFault::kReset ||
                       info.fault == topo::GpuFault::kNode;
    const std::string who = gpu >= 0 ? "GPU " + std::to_string(gpu)
                                     : "device " + bus + " (not a GPU NVML lists)";
    out.push_back({"xid", fatal ? CheckStatus::kFail : CheckStatus::kWarn,
                   gpu >= 0 ? std::vector<int>{gpu} : std::vector<int>{},
                   who + ": Xid " + std::to_string(xid) + " (" + info.meaning + "), " +
                       (s.count == 1 ? "1 line in " + shown + when + ": "
                                     : std::to_string(s.count) + " lines in " + shown +
                                           when + ", the first: ") +
                       s.first,
                   FixFor(info.fault, gpu)});
  }
  if (out.empty()) {
    out.push_back({"xid",
                   CheckStatus::kOk,
                   {},
                   "no NVRM Xid lines in " + shown +
                       (only_gpu >= 0 ? " for GPU " + std::to_string(only_gpu) : "") +
                       (since_s > 0 ? when : ""),
                   ""});
  }
  return out;
}

}  // namespace hachi::diag
