// How the simulator derives a job's time limit (what the user asked for) from its true
// run time (docs/sim.md, "Time limits"). Jobs always run their true duration: a limit
// only feeds the scheduler's backfill estimates. Pure functions; thread-safe.
#pragma once

#include <string_view>

#include "core/status.h"
#include "core/time.h"

namespace hachi::sim {

enum class TimeLimitModel : uint8_t {
  kRounded,  // the true duration rounded up to the next usual request (15m ... 90d)
  kExact,    // the true duration: a perfect estimate
};
std::string_view TimeLimitModelName(TimeLimitModel m);  // "rounded", "exact"
Result<TimeLimitModel> ParseTimeLimitModel(std::string_view name);

// The usual requests, shortest first: 15m, 30m, 1h, 2h, 4h, 8h, 12h, 1d, 2d, 3d, 7d,
// 14d, 30d, 60d, 90d. A duration past the last one keeps its own value.
Duration RoundUpTimeLimit(Duration true_duration);
Duration TimeLimitFor(TimeLimitModel model, Duration true_duration);

}  // namespace hachi::sim
