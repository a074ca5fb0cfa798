// Time in Hachi: whole seconds. `Time` is a point (seconds since the Unix epoch in the
// server, since the trace start in the simulator), `Duration` a span. The scheduler
// never reads a clock: `now` is always passed in (DESIGN.md §4, sched/ is pure).
#pragma once

#include <cstdint>
#include <limits>
#include <string>

namespace hachi {

using Time = int64_t;
using Duration = int64_t;
inline constexpr Time kNever = std::numeric_limits<Time>::max();
inline constexpr Duration kMinute = 60;
inline constexpr Duration kHour = 3600;
inline constexpr Duration kDay = 86400;

// "45s", "12m30s", "3h05m", "2d04h": short and readable, for diagnoses.
std::string FormatDuration(Duration d);

}  // namespace hachi
