#include "agent/fake_launcher.h"

#include <gtest/gtest.h>

#include "agent/testing.h"

namespace hachi::agent {
namespace {

TEST(FakeLauncher, RecordsLaunchesAndReportsFinishOnce) {
  std::vector<api::JobExit> exits;
  FakeLauncher fake([&](const api::JobExit& e) { exits.push_back(e); });
  ASSERT_TRUE(fake.Launch(MakeLaunch(1)).ok());
  ASSERT_TRUE(fake.Launch(MakeLaunch(2)).ok());
  EXPECT_FALSE(fake.Launch(MakeLaunch(2)).ok());
  EXPECT_EQ(fake.Running(), (std::vector<JobId>{1, 2}));
  EXPECT_TRUE(fake.Finish(1, 3));
  EXPECT_FALSE(fake.Finish(1, 3));
  fake.Cancel(2, "by alice");
  fake.Cancel(2, "again");
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0].job, 1);
  EXPECT_EQ(exits[0].exit_code, 3);
  EXPECT_EQ(exits[1].kind, api::ExitKind::kCancelled);
  EXPECT_TRUE(fake.Running().empty());
  EXPECT_EQ(fake.launches().size(), 2u);
  EXPECT_EQ(fake.cancels().size(), 2u);
  fake.FailLaunches(Unavailable("down"));
  EXPECT_EQ(fake.Launch(MakeLaunch(3)).code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace hachi::agent
