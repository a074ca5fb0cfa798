// WaitFor: the one bounded wait of tests on something that runs beside them in real time
// and cannot be told to hurry — a real process (a server, an agent, a job, a fake
// daemon), or a file it writes. Time the code under test decides by is a FakeClock the
// test advances (core/clock.h); this is for the rest. Every wait is bounded: a condition
// that never comes fails the test after `timeout` instead of hanging it.
//
// Header-only; tests only. Thread-safety: `done` runs on the caller's thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace hachi {

// Whether `done()` holds within `timeout` of real time: asked at once, then every
// `every`, and once more when the time is up.
template <typename Pred>
bool WaitFor(Pred&& done, std::chrono::milliseconds timeout = std::chrono::seconds(10),
             std::chrono::milliseconds every = std::chrono::milliseconds(10)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (done()) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now >= end) return false;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(every, end - now));
  }
}

}  // namespace hachi
