#include "alloc/cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "alloc/hachi_policy.h"
#include "alloc/hachi_tables.h"
#include "alloc/testing.h"

namespace hachi::alloc {
namespace {

// The full table agrees with a direct decision for every (free, count) of an 8-GPU
// layout and for a sample of a 16-GPU one.
TEST(HachiTables, DecisionTableMatchesDirectDecisions) {
  for (const char* name : {"dgx1", "pairs8", "nvswitch16"}) {
    const NodeModel m = testing::NamedModel(name);
    auto t = HachiTables::Build(m);
    const std::vector<uint16_t> table = t->DecisionTable();
    const int n = m.gpu_count();
    std::mt19937 rng(7);
    const int samples = n <= 8 ? (1 << n) : 3000;
    for (int k = 0; k < samples; ++k) {
      const uint32_t f = n <= 8 ? static_cast<uint32_t>(k) : rng() & ((1u << n) - 1);
      for (int c = 1; c <= std::popcount(f); ++c) {
        ASSERT_EQ(table[static_cast<size_t>(f) * (n + 1) + c], t->Decide(f, c, 0))
            << name << " free " << GpuSet(f).ToString() << " count " << c;
      }
    }
  }
}

TEST(AllocCache, CountsHitsMissesAndDirect) {
  const NodeModel m = testing::NamedModel("dgx1");
  AllocCache cache;
  const GpuSet free = GpuSet::FromIndices({1, 2, 4, 5, 6, 7});
  ASSERT_TRUE(cache.Pick(m, free, {2, {}}).ok());
  ASSERT_TRUE(cache.Pick(m, free, {2, {}}).ok());
  ASSERT_TRUE(cache.Pick(m, free, {2, GpuSet::FromIndices({1})}).ok());
  AllocCache::Stats s = cache.stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.direct, 1u);
  EXPECT_EQ(s.lazy_entries, 1u);
  cache.BuildTable(m);
  EXPECT_TRUE(cache.HasTable(m));
  EXPECT_EQ(cache.stats().lazy_entries, 0u);
  ASSERT_TRUE(cache.Pick(m, free, {3, {}}).ok());
  EXPECT_EQ(cache.stats().hits, 2u);
}

TEST(AllocCache, ErrorsPassThrough) {
  const NodeModel m = testing::NamedModel("nvswitch8");
  AllocCache cache;
  cache.BuildTable(m);
  EXPECT_EQ(cache.Pick(m, m.all_gpus(), {9, {}}).status().code(),
            StatusCode::kUnsatisfiable);
  EXPECT_EQ(cache.Pick(m, GpuSet::FromIndices({0}), {2, {}}).status().code(),
            StatusCode::kBusy);
}

TEST(AllocCache, IdenticalNodesShareEntries) {
  const NodeModel a =
      testing::TopoBuilder(8).NvSwitch(18).Numa({0, 0, 0, 0, 1, 1, 1, 1}).Model();
  const NodeModel b =
      testing::TopoBuilder(8).NvSwitch(18).Numa({2, 2, 2, 2, 3, 3, 3, 3}).Model();
  AllocCache cache;
  ASSERT_TRUE(cache.Pick(a, a.all_gpus(), {4, {}}).ok());
  ASSERT_TRUE(cache.Pick(b, b.all_gpus(), {4, {}}).ok());
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().layouts, 1u);
}

// Many threads, lazy and table modes mixed: every answer equals the direct one.
TEST(AllocCache, ConcurrentPicksAgreeWithDirect) {
  const NodeModel dgx = testing::NamedModel("dgx1");
  const NodeModel pcie = testing::NamedModel("pcie8");
  AllocCache cache;
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int k = 0; k < 2000; ++k) {
        const NodeModel& m = (k + t) % 2 ? dgx : pcie;
        if (t == 3 && k == 500) cache.BuildTable(m);
        const GpuSet free(rng() & 0xff);
        if (free.empty()) continue;
        const int count = 1 + static_cast<int>(rng() % free.size());
        Result<GpuSet> got = cache.Pick(m, free, {count, {}});
        Result<Choice> want = HachiPolicy().Choose(m, free, {count, {}});
        if (!got.ok() || !want.ok() || *got != want->gpus) ++mismatches;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(PolicyRegistry, FindsByName) {
  EXPECT_EQ(PolicyNames(), (std::vector<std::string_view>{"hachi", "besteffort"}));
  ASSERT_NE(FindPolicy("besteffort"), nullptr);
  EXPECT_EQ(FindPolicy("besteffort")->name(), "besteffort");
  EXPECT_EQ(FindPolicy("nope"), nullptr);
  EXPECT_EQ(DefaultPolicy().name(), "hachi");
}

}  // namespace
}  // namespace hachi::alloc
