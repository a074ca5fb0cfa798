#include "core/testing/wait_for.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace hachi {
namespace {

using std::chrono::milliseconds;

TEST(WaitFor, TrueAtOnceWithoutWaiting) {
  int asked = 0;
  EXPECT_TRUE(WaitFor([&] { return ++asked > 0; }, milliseconds(0)));
  EXPECT_EQ(asked, 1);
}

// Bounded: a condition that never comes gives false once the time is up, having been
// asked at the end too.
TEST(WaitFor, FalseWhenTheTimeIsUp) {
  int asked = 0;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(WaitFor([&] { return ++asked < 0; }, milliseconds(30), milliseconds(10)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(30));
  EXPECT_GE(asked, 2);
}

TEST(WaitFor, SeesWhatAnotherThreadDoes) {
  std::atomic<bool> done{false};
  std::thread t([&] { done = true; });
  EXPECT_TRUE(WaitFor([&] { return done.load(); }));
  t.join();
}

}  // namespace
}  // namespace hachi
