#include "core/signals.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace hachi {
namespace {

TEST(ParseSignal, NamesAndNumbers) {
  EXPECT_EQ(ParseSignal("USR1"), SIGUSR1);
  EXPECT_EQ(ParseSignal("SIGUSR2"), SIGUSR2);
  EXPECT_EQ(ParseSignal("usr1"), SIGUSR1);
  EXPECT_EQ(ParseSignal("sigterm"), SIGTERM);
  EXPECT_EQ(ParseSignal("10"), 10);
  EXPECT_EQ(ParseSignal("64"), 64);
}

TEST(ParseSignal, RefusesWhatIsNoSignal) {
  for (const char* bad : {"", "0", "65", "USR3", "SIG", "-1", "1x", "10000000000000"}) {
    EXPECT_EQ(ParseSignal(bad), std::nullopt) << bad;
  }
}

TEST(SignalName, RoundTrips) {
  EXPECT_EQ(SignalName(SIGUSR1), "USR1");
  EXPECT_EQ(SignalName(40), "40");
  EXPECT_EQ(ParseSignal(SignalName(SIGTERM)), SIGTERM);
}

}  // namespace
}  // namespace hachi
