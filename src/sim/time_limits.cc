#include "sim/time_limits.h"

#include <algorithm>
#include <array>
#include <string>

namespace hachi::sim {
namespace {

// Round figures users type into `--time`. Real users over-estimate and pick a few round
// values (Tsafrir, Etsion and Feitelson, "Modeling User Runtime Estimates", 2005); the
// next round value up is the kindest such user: never killed, and within 2x of the run
// time between 15m and 1d (jobs shorter than 15m still ask for 15m).
constexpr std::array<Duration, 15> kUsualLimits = {
    15 * kMinute, 30 * kMinute, kHour,     2 * kHour, 4 * kHour,
    8 * kHour,    12 * kHour,   kDay,      2 * kDay,  3 * kDay,
    7 * kDay,     14 * kDay,    30 * kDay, 60 * kDay, 90 * kDay};

}  // namespace

std::string_view TimeLimitModelName(TimeLimitModel m) {
  return m == TimeLimitModel::kExact ? "exact" : "rounded";
}

Result<TimeLimitModel> ParseTimeLimitModel(std::string_view name) {
  if (name == "rounded") return TimeLimitModel::kRounded;
  if (name == "exact") return TimeLimitModel::kExact;
  return InvalidArgument("unknown time-limit model '" + std::string(name) +
                         "' (known: rounded, exact)");
}

Duration RoundUpTimeLimit(Duration true_duration) {
  auto it = std::lower_bound(kUsualLimits.begin(), kUsualLimits.end(), true_duration);
  return it == kUsualLimits.end() ? true_duration : *it;
}

Duration TimeLimitFor(TimeLimitModel model, Duration true_duration) {
  return model == TimeLimitModel::kExact ? true_duration
                                         : RoundUpTimeLimit(true_duration);
}

}  // namespace hachi::sim
