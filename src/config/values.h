// The small value syntaxes of the cluster config file (docs/config.md): durations
// ("30m", "4h", "7d", "1h30m"), times of day ("08:00"), days of the week ("mon") and
// Slurm-style node lists ("n[0001-0016]", "n[1-3,7],gpu9"). Each parser returns a
// message that says what was expected; the caller adds the file, line and key.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/hostlist.h"
#include "core/status.h"
#include "core/time.h"

namespace hachi::config {

// One or more <whole number><unit> parts, units s, m, h, d, w ("90s", "4h", "1h30m",
// "7d"); at least 0s, at most 10 years. kInvalidArgument: "'9x' is not a duration
// (use 30m, 4h, 7d)".
Result<Duration> ParseDuration(std::string_view text);

// "HH:MM" (24-hour clock), 00:00..23:59, and 24:00 when `allow_24` (a window end).
// Minutes since midnight.
Result<int> ParseTimeOfDay(std::string_view text, bool allow_24);

// A memory size: a whole number with a unit K, M, G or T (binary: 64G = 65536 MiB; K
// rounds up), "512M", "64G", "1T"; 1 MiB..64 TiB. In MiB. kInvalidArgument: "'64Q' is
// not a size (use 512M, 64G, 1T)".
Result<int64_t> ParseSizeMib(std::string_view text);

// "sun".."sat" or the full name, any case: 0 = Sunday .. 6 = Saturday.
Result<int> ParseWeekday(std::string_view text);

// Host lists ("n[0001-0016]"): core/hostlist.h, shared with the scheduler.
using ::hachi::ExpandHostList;

// Refuses the text toml++ 3.3 (Debian's) must not see: some non-ASCII characters where
// it asks "is this whitespace?" reach a __builtin_unreachable() in its Unicode tables
// (undefined behaviour; upstream issues #190 and #295, fixed after 3.3; fuzz_config
// found it). That is any non-ASCII character outside strings and comments, which TOML
// 1.0 does not allow there anyway, and one right after a backslash (an escape or a
// line-ending backslash, with the whitespace it trims) in a """multi-line""" string.
// A leading byte-order mark is fine. The error is "LINE: ..." for the caller to prefix
// with the file.
Status CheckTomlText(std::string_view text);

}  // namespace hachi::config
