// Clock: where the server and the agent read the time (DESIGN.md §4.7: the clock is the
// first of the seams to the outside world). RealClock() reads the system's clocks;
// FakeClock is set and moved by tests, so that a test waiting for time to pass (an agent
// timeout, a queue wait, a time limit) advances the clock instead of sleeping. Model:
// LevelDB's Env::NowMicros. Code that decides by time ("silent past the agent timeout",
// "time limit reached") reads a Clock it was given; code that only waits (a condition
// variable's timeout, a loop's interval) may wait on real time.
//
// Thread-safety: every method of every Clock may be called from any thread at any time.
// RealClock() is one process-wide instance that lives as long as the process. A
// FakeClock's Advance and Set may run concurrently with its reads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "core/time.h"

namespace hachi {

class Clock {
 public:
  virtual ~Clock() = default;

  // Wall time: microseconds since the Unix epoch. May jump either way (NTP, an operator).
  virtual int64_t NowMicros() const = 0;
  // Microseconds since an unspecified start, never going back: for ages and timeouts.
  virtual int64_t MonotonicMicros() const = 0;

  // Wall time in whole seconds since the epoch, rounded down as std::time does: what
  // records hold (submit, start and end times).
  Time Now() const { return FloorDiv(NowMicros(), 1'000'000); }
  // The monotonic clock in whole milliseconds, rounded down.
  int64_t MonotonicMs() const { return FloorDiv(MonotonicMicros(), 1'000); }

 private:
  static int64_t FloorDiv(int64_t a, int64_t b) {
    return a / b - (a % b != 0 && a < 0 ? 1 : 0);
  }
};

// The system's clocks (std::chrono::system_clock and steady_clock). Never null.
const Clock* RealClock();

// A clock that moves only when told to. Starts at `start` (wall, seconds since the epoch)
// with its monotonic clock at kMonotonicStart.
class FakeClock final : public Clock {
 public:
  static constexpr Time kDefaultStart = 1'767'225'600;       // 2026-01-01T00:00:00Z
  static constexpr int64_t kMonotonicStart = 1'000'000'000;  // us: nonzero, as a boot's

  explicit FakeClock(Time start = kDefaultStart);
  FakeClock(const FakeClock&) = delete;
  FakeClock& operator=(const FakeClock&) = delete;

  int64_t NowMicros() const override;
  int64_t MonotonicMicros() const override;

  // Moves both clocks forward by `d` (negative: no-op; the monotonic clock never goes
  // back).
  void Advance(std::chrono::microseconds d);
  // Sets the wall clock (it may go back, as a real one can); the monotonic clock stays.
  void Set(Time wall_seconds);
  void SetMicros(int64_t wall_micros);

 private:
  std::atomic<int64_t> wall_us_;
  std::atomic<int64_t> mono_us_{kMonotonicStart};
};

}  // namespace hachi
