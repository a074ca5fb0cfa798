// The facts `hachi doctor` needs that only system calls give: the size of /dev/shm
// (statvfs), this process's RLIMIT_MEMLOCK and the kernel's clock synchronisation state
// (ntp_adjtime). The seam between doctor and the machine: ProbeHostFacts asks the running
// kernel, ReadHostFactsFile reads fixed values, so that a test (or a node examined from
// its files under --root) gives the same answer on any machine. Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"

namespace hachi::diag {

struct HostFacts {
  std::optional<uint64_t> shm_bytes;      // the size of /dev/shm's file system
  std::optional<uint64_t> memlock_bytes;  // soft RLIMIT_MEMLOCK; UINT64_MAX: unlimited
  std::optional<bool> clock_synced;       // false when ntp_adjtime says STA_UNSYNC
  std::string source;                     // "this machine", or the file they came from
  std::string why_unknown;                // when a fact is missing: why
  // Microseconds since boot now (CLOCK_MONOTONIC), the clock /dev/kmsg stamps its
  // records by: what `--xid-since` counts back from.
  std::optional<uint64_t> monotonic_usec;
};

inline constexpr uint64_t kUnlimited = UINT64_MAX;

// This machine's facts (statvfs("/dev/shm"), getrlimit, ntp_adjtime with no change,
// clock_gettime(CLOCK_MONOTONIC)).
HostFacts ProbeHostFacts();

// The facts in a JSON file: {"shm_bytes": N, "memlock": N | "unlimited",
// "clock_synced": true | false, "monotonic_usec": N}; a key left out is unknown.
// kNotFound when the file does not exist, kInvalidArgument when it is not such an object.
Result<HostFacts> ReadHostFactsFile(const std::string& path);

}  // namespace hachi::diag
