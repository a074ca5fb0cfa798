#include "core/mutex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace hachi {
namespace {

using std::chrono::milliseconds;

// The real-time wait of a loop's interval: false once it passed with nobody signalling.
TEST(CondVarTest, WaitForTimesOut) {
  Mutex mu;
  CondVar cv(&mu);
  MutexLock lock(&mu);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(cv.WaitFor(milliseconds(20)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(20));
}

// A signal ends the wait early. The waiter loops on its condition, as every caller must
// (wake-ups may be spurious), bounded by a deadline far past the test's needs.
TEST(CondVarTest, ASignalEndsTheWait) {
  Mutex mu;
  CondVar cv(&mu);
  bool ready = false;
  std::thread signaller([&] {
    MutexLock lock(&mu);
    ready = true;
    cv.SignalAll();
  });
  {
    MutexLock lock(&mu);
    const auto deadline = CondVar::Clock::now() + std::chrono::seconds(10);
    while (!ready && cv.WaitUntil(deadline)) {
    }
    EXPECT_TRUE(ready);
  }
  signaller.join();
}

}  // namespace
}  // namespace hachi
