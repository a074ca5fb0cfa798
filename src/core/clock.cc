#include "core/clock.h"

namespace hachi {
namespace {

class SystemClock final : public Clock {
 public:
  int64_t NowMicros() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  int64_t MonotonicMicros() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace

const Clock* RealClock() {
  static const SystemClock* const clock = new SystemClock();  // never destroyed
  return clock;
}

FakeClock::FakeClock(Time start) : wall_us_(start * 1'000'000) {}

int64_t FakeClock::NowMicros() const { return wall_us_.load(); }

int64_t FakeClock::MonotonicMicros() const { return mono_us_.load(); }

void FakeClock::Advance(std::chrono::microseconds d) {
  if (d.count() <= 0) return;
  // Monotonic first: a reader that sees the new wall time sees an age no shorter.
  mono_us_.fetch_add(d.count());
  wall_us_.fetch_add(d.count());
}

void FakeClock::Set(Time wall_seconds) { wall_us_.store(wall_seconds * 1'000'000); }

void FakeClock::SetMicros(int64_t wall_micros) { wall_us_.store(wall_micros); }

}  // namespace hachi
