// Deadlines of the agent's supervisors (the launcher's time limits and kill graces, the
// step runner's kill graces and pipe drains) are points on the monotonic timeline of the
// Clock they were given (core/clock.h), held as steady_clock time points: for
// RealClock() the two are the same clock, and a test's FakeClock moves them instead.
// Internal to agent/.
#pragma once

#include <chrono>
#include <cstdint>

#include "core/clock.h"
#include "core/mutex.h"

namespace hachi::agent {

using Mono = std::chrono::steady_clock;

inline Mono::time_point MonoNow(const Clock& clock) {
  return Mono::time_point(std::chrono::microseconds(clock.MonotonicMicros()));
}

// A supervisor's Tick() for tests on a FakeClock: asks its thread for one round on the
// Clock and waits until that round ran. Bounded by 10 s of real time: a thread that has
// returned (stop) runs no more rounds.
template <typename State>
void AskRoundAndWait(State& s) REQUIRES(s.mu) {
  const uint64_t want = ++s.ticks_asked;
  s.Wake();
  const auto until = CondVar::Clock::now() + std::chrono::seconds(10);
  while (s.ticks_done < want && !s.stop && s.ticked.WaitUntil(until)) {
  }
}

}  // namespace hachi::agent
