// GPU shares: applying/releasing shares on a node (the MPS limits:
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
  ASSERT_TRUE(ApplyShare(n, ShareOn(1, 600, 40000)).ok());
  EXPECT_FALSE(n.free_gpus.contains(1));
  EXPECT_TRUE(n.shared_gpus.contains(1));
  EXPECT_FALSE(ApplyShare(n, ShareOn(1, 500, 0)).ok());                 // 1100 milli
  EXPECT_FALSE(ApplyShare(n, ShareOn(1, 100, n.gpu_memory_mib)).ok());  // memory
  ASSERT_TRUE(ApplyShare(n, ShareOn(1, 400, 1000)).ok());
  EXPECT_EQ(ShareUse(n, 1).milli, 1000);
  ReleaseShare(n, ShareOn(1, 600, 40000));
  EXPECT_TRUE(n.shared_gpus.contains(1));
  ReleaseShare(n, ShareOn(1, 400, 1000));
  EXPECT_TRUE(n.free_gpus.contains(1));
  EXPECT_TRUE(n.shared_gpus.empty());
  n.free_gpus = n.free_gpus - GpuSet::FromIndices({2});  // a whole-GPU job holds GPU 2
  EXPECT_FALSE(ApplyShare(n, ShareOn(2, 100, 0)).ok());
}

}  // namespace
}  // namespace hachi::sched
