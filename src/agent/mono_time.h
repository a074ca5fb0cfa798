// Deadlines of the agent's supervisors (the launcher's time limits and kill graces, the
// step runner's kill graces and pipe drains) are points on the monotonic timeline of the
// Clock they were given (core/clock.h), held as steady_clock time points: for
// RealClock() the two are the same clock, and a test's FakeClock moves them instead.
// Internal to agent/.
#pragma once

#include <chrono>

#include "core/clock.h"

namespace hachi::agent {

using Mono = std::chrono::steady_clock;

inline Mono::time_point MonoNow(const Clock& clock) {
  return Mono::time_point(std::chrono::microseconds(clock.MonotonicMicros()));
}

}  // namespace hachi::agent
