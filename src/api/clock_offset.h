// An agent's clock offset: its wall clock minus the server's, as the server measures it
// at each work poll (server/clock_offsets.h; docs/fencing.md "Clocks"). Shared by the
// server's log, `hachi show node` and `hachi doctor`. Header-only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace hachi::api {

// Past this a node's clock is a node problem: far beyond a poll's one-way delay (the
// measurement's error), far below what breaks things (log times, token expiry, TLS).
// Limits and accounting never read an agent's wall clock, so jobs are not affected.
inline constexpr int64_t kClockOffsetProblemMs = 5000;

inline bool ClockOffsetIsProblem(int64_t offset_ms) {
  return offset_ms > kClockOffsetProblemMs || offset_ms < -kClockOffsetProblemMs;
}

// "+3600.02s", "-0.01s"; "unknown" when never measured (an older agent, or none since
// the server started).
inline std::string FormatClockOffset(std::optional<int64_t> offset_ms) {
  if (!offset_ms) return "unknown";
  const int64_t ms = *offset_ms;
  const int64_t abs = ms < 0 ? -ms : ms;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%c%lld.%02llds", ms < 0 ? '-' : '+',
                static_cast<long long>(abs / 1000),
                static_cast<long long>((abs % 1000) / 10));
  return buf;
}

}  // namespace hachi::api
