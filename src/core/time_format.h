// The points in time as Hachi prints them: every strftime in src/ is one of these. Apart
// from core/time.h, which nearly every file includes, so that these stay cheap to change.
// Pure functions; thread-safe (FormatSlurmLocal reads TZ, as localtime_r does).
#pragma once

#include <string>

#include "core/time.h"

namespace hachi {

// "2026-11-29T19:18:05Z": UTC, for the server's messages, logs and reports.
std::string FormatIsoUtc(Time t);
// "2026-11-29T19:18:05": local time (TZ), as Slurm's commands print times.
std::string FormatSlurmLocal(Time t);
// "2026-11-29 19:18:05 UTC": for people reading a trace's span (hachi sim).
std::string FormatUtcReadable(Time t);

}  // namespace hachi
