#include "diag/host_facts.h"

#include <errno.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/timex.h>
#include <time.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/strings.h"

namespace hachi::diag {

HostFacts ProbeHostFacts() {
  HostFacts f;
  f.source = "this machine";
  if (struct statvfs vfs; statvfs("/dev/shm", &vfs) == 0) {
    f.shm_bytes = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
  } else {
    f.why_unknown = std::string("statvfs /dev/shm: ") + std::strerror(errno);
  }
  if (struct rlimit rl; getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
    f.memlock_bytes =
        rl.rlim_cur == RLIM_INFINITY ? kUnlimited : static_cast<uint64_t>(rl.rlim_cur);
  }
  // modes 0 only reads the kernel's NTP state; no privilege needed.
  struct timex tx;
  std::memset(&tx, 0, sizeof(tx));
  if (ntp_adjtime(&tx) != -1) f.clock_synced = (tx.status & STA_UNSYNC) == 0;
  if (struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts) == 0) {
    f.monotonic_usec = static_cast<uint64_t>(ts.tv_sec) * 1000000 +
                       static_cast<uint64_t>(ts.tv_nsec) / 1000;
  }
  return f;
}

Result<HostFacts> ReadHostFactsFile(const std::string& path) {
  std::string error;
  std::optional<std::string> text = ReadFile(path, &error);
  if (!text) return NotFound(error);
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument(path + ": not a JSON object");
  HostFacts f;
  f.source = path;
  if (auto it = j.find("shm_bytes"); it != j.end()) {
    if (!it->is_number_unsigned()) return InvalidArgument(path + ": shm_bytes: a number");
    f.shm_bytes = it->get<uint64_t>();
  }
  if (auto it = j.find("memlock"); it != j.end()) {
    if (it->is_string() && *it == "unlimited") {
      f.memlock_bytes = kUnlimited;
    } else if (it->is_number_unsigned()) {
      f.memlock_bytes = it->get<uint64_t>();
    } else {
      return InvalidArgument(path + ": memlock: a number or \"unlimited\"");
    }
  }
  if (auto it = j.find("clock_synced"); it != j.end()) {
    if (!it->is_boolean()) return InvalidArgument(path + ": clock_synced: true or false");
    f.clock_synced = it->get<bool>();
  }
  if (auto it = j.find("monotonic_usec"); it != j.end()) {
    if (!it->is_number_unsigned()) {
      return InvalidArgument(path + ": monotonic_usec: a number");
    }
    f.monotonic_usec = it->get<uint64_t>();
  }
  return f;
}

}  // namespace hachi::diag
