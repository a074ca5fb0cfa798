// GPU shares: MPS limits per allocation, and applying/releasing shares on a node.
#include "sched/gpu_share.h"

#include <gtest/gtest.h>

#include "sched/testing.h"

namespace hachi::sched {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

struct MpsRow {
  const char* name;
  int gpu;
  int milli;
  int64_t memory_mib;
  Env want;
};

class MpsEnvironmentTest : public ::testing::TestWithParam<MpsRow> {};

TEST_P(MpsEnvironmentTest, Limits) {
  Allocation a;
  a.node = 0;
  a.gpus = GpuSet::FromIndices({GetParam().gpu});
  a.share_milli = GetParam().milli;
  a.gpu_memory_mib = GetParam().memory_mib;
  EXPECT_EQ(MpsEnvironment(a), GetParam().want);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, MpsEnvironmentTest,
    ::testing::Values(
        MpsRow{"whole_gpu", 0, 0, 0, {}},
        MpsRow{"quarter", 2, 250, 0, {{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25"}}},
        MpsRow{"rounds_up", 0, 1, 0, {{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "1"}}},
        MpsRow{"rounds_up_odd", 0, 333, 0, {{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "34"}}},
        MpsRow{"with_memory",
               3,
               500,
               20480,
               {{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "50"},
                {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "3=20480M"}}}),
    [](const auto& row) { return std::string(row.param.name); });

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
