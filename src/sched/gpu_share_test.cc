// GPU shares: applying/releasing shares on a node, one user per GPU (the MPS limits:
// agent/environment_test.cc).
#include "sched/gpu_share.h"

#include <gtest/gtest.h>

#include "sched/testing.h"

namespace hachi::sched {
namespace {

Allocation ShareOn(int gpu, int milli, int64_t memory_mib) {
  Allocation a;
  a.node = 0;
  a.gpus = GpuSet::FromIndices({gpu});
  a.share_milli = milli;
  a.gpu_memory_mib = memory_mib;
  return a;
}

TEST(ApplyShareTest, PacksReleasesAndRefusesOvercommit) {
  Node n = testing::PresetNode("n0", "hgx-h100");  // 8 GPUs of 80 GiB
  ASSERT_TRUE(ApplyShare(n, ShareOn(1, 600, 40000), "alice").ok());
  EXPECT_FALSE(n.free_gpus.contains(1));
  EXPECT_TRUE(n.shared_gpus.contains(1));
  EXPECT_FALSE(ApplyShare(n, ShareOn(1, 500, 0), "alice").ok());  // 1100 milli
  EXPECT_FALSE(ApplyShare(n, ShareOn(1, 100, n.gpu_memory_mib), "alice").ok());  // memory
  ASSERT_TRUE(ApplyShare(n, ShareOn(1, 400, 1000), "alice").ok());
  EXPECT_EQ(ShareUse(n, 1).milli, 1000);
  ReleaseShare(n, ShareOn(1, 600, 40000));
  EXPECT_TRUE(n.shared_gpus.contains(1));
  ReleaseShare(n, ShareOn(1, 400, 1000));
  EXPECT_TRUE(n.free_gpus.contains(1));
  EXPECT_TRUE(n.shared_gpus.empty());
  n.free_gpus = n.free_gpus - GpuSet::FromIndices({2});  // a whole-GPU job holds GPU 2
  EXPECT_FALSE(ApplyShare(n, ShareOn(2, 100, 0), "alice").ok());
}

TEST(RoomForTest, RoomAndOneUserPerGpu) {
  struct Row {
    const char* name;
    GpuShareUse use;
    int milli;
    int64_t memory_mib;
    const char* user;
    ShareRoom want;
  };
  const Row rows[] = {
      {"empty_gpu_takes_anyone", {}, 999, 80000, "bob", ShareRoom::kFits},
      {"owner_with_room",
       {500, false, 1000, "alice"},
       500,
       1000,
       "alice",
       ShareRoom::kFits},
      {"other_user_with_room",
       {250, false, 0, "alice"},
       250,
       0,
       "bob",
       ShareRoom::kOtherUser},
      {"other_user_too_few_milli",
       {250, false, 0, "alice"},
       900,
       0,
       "bob",
       ShareRoom::kFull},
      {"owner_too_few_milli",
       {250, false, 0, "alice"},
       900,
       0,
       "alice",
       ShareRoom::kFull},
      {"owner_too_little_memory",
       {100, false, 70000, "alice"},
       100,
       20000,
       "alice",
       ShareRoom::kFull},
      {"mixed_refuses_its_first_user",
       {300, true, 0, "alice"},
       100,
       0,
       "alice",
       ShareRoom::kOtherUser},
      {"empty_user_is_a_user", {300, false, 0, ""}, 100, 0, "bob", ShareRoom::kOtherUser},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(RoomFor(r.use, 80000, r.milli, r.memory_mib, r.user), r.want) << r.name;
  }
}

TEST(ApplyShareTest, OneUserPerGpuUntilItsLastShareLeaves) {
  Node n = testing::PresetNode("n0", "hgx-h100");
  ASSERT_TRUE(ApplyShare(n, ShareOn(1, 250, 0), "alice").ok());
  EXPECT_EQ(ShareUse(n, 1).user, "alice");
  EXPECT_TRUE(ShareFits(n, 1, 250, 0, "alice"));
  EXPECT_FALSE(ShareFits(n, 1, 250, 0, "bob"));
  EXPECT_TRUE(ShareFits(n, 2, 250, 0, "bob"));  // a free GPU takes anyone
  const Status refused = ApplyShare(n, ShareOn(1, 250, 0), "bob");
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("holds shares of user alice"), std::string::npos)
      << refused.message();
  EXPECT_NE(refused.message().find("a share of user bob"), std::string::npos);
  EXPECT_NE(refused.message().find("one user per GPU"), std::string::npos);
  EXPECT_EQ(ShareUse(n, 1).milli, 250);  // untouched
  ASSERT_TRUE(ApplyShare(n, ShareOn(2, 250, 0), "bob").ok());
  ASSERT_TRUE(ApplyShare(n, ShareOn(1, 500, 0), "alice").ok());
  ReleaseShare(n, ShareOn(1, 250, 0));
  EXPECT_EQ(ShareUse(n, 1).user, "alice");  // one of hers is still there
  EXPECT_FALSE(ShareFits(n, 1, 100, 0, "bob"));
  ReleaseShare(n, ShareOn(1, 500, 0));
  EXPECT_EQ(ShareUse(n, 1).user, "");  // the last left: nobody's
  EXPECT_TRUE(n.free_gpus.contains(1));
  ASSERT_TRUE(ApplyShare(n, ShareOn(1, 250, 0), "bob").ok());
  EXPECT_EQ(ShareUse(n, 1).user, "bob");
}

// Records from before the rule: two users' running shares on one GPU are booked (they
// run), and the GPU takes no new share of anyone until it is empty.
TEST(ApplyShareTest, AlreadyRunningSharesOfTwoUsersMakeTheGpuMixed) {
  Node n = testing::PresetNode("n0", "hgx-h100");
  ASSERT_TRUE(ApplyShare(n, ShareOn(0, 250, 0), "alice").ok());
  ASSERT_TRUE(ApplyShare(n, ShareOn(0, 250, 0), "bob", /*already_running=*/true).ok());
  EXPECT_TRUE(ShareUse(n, 0).mixed);
  EXPECT_EQ(ShareUse(n, 0).milli, 500);
  EXPECT_FALSE(ShareFits(n, 0, 100, 0, "alice"));
  EXPECT_FALSE(ShareFits(n, 0, 100, 0, "bob"));
  EXPECT_FALSE(ApplyShare(n, ShareOn(0, 900, 0), "bob", true).ok());  // still no room
  ReleaseShare(n, ShareOn(0, 250, 0));
  EXPECT_TRUE(ShareUse(n, 0).mixed);  // whose left is not known: stays refused
  ReleaseShare(n, ShareOn(0, 250, 0));
  EXPECT_FALSE(ShareUse(n, 0).mixed);
  EXPECT_TRUE(ShareFits(n, 0, 100, 0, "bob"));
}

}  // namespace
}  // namespace hachi::sched
