// Slurm's time-of-event forms (sbatch --begin / --deadline, sacct -S/-E), parsed
// against a given "now" so that tests and callers decide the clock (core/clock.h):
//
//   HH:MM[:SS] [AM|PM]       today at that time, or tomorrow when it has passed
//   YYYY-MM-DD[THH:MM[:SS]]  that day (midnight) or moment
//   MM/DD[/YY] , MMDD[YY]    that day, midnight (this year; a past day: next year)
//   now[+N[unit]]            N seconds (bare), or seconds/minutes/hours/days/weeks
//                            (s, sec, m, min, h, hour, d, day, w, week, plurals)
//   today, tomorrow          midnight at the start of that day
//   midnight, noon, fika, teatime   the next 00:00, 12:00, 15:00, 16:00
//
// Local time is `now`'s wall clock shifted by `utc_offset` seconds (local - UTC; the
// offset of now is used for the whole computation, so a DST change in between is not
// followed). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"
#include "core/time.h"

namespace hachi {

// Unix seconds. kInvalidArgument: "'16:75' is not a time (use HH:MM[:SS],
// YYYY-MM-DD[THH:MM[:SS]], now+N[unit], today, tomorrow, midnight, noon)".
Result<Time> ParseSlurmTime(std::string_view text, Time now, int64_t utc_offset);

// The offset (local - UTC, seconds) of the process's time zone at `t` (localtime_r).
int64_t LocalUtcOffset(Time t);

}  // namespace hachi
