// The allocator's speed: cached decisions, uncached decisions, whole decision tables,
// and the besteffort reference. Figures are quoted in docs/allocator.md; run with
// `make bench` or build-*/bench/alloc_bench.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "alloc/besteffort_policy.h"
#include "alloc/cache.h"
#include "alloc/hachi_policy.h"
#include "alloc/hachi_tables.h"
#include "alloc/testing.h"

namespace hachi::alloc {
namespace {

using testing::TopoBuilder;

// Two DGX-1 hybrid cube-meshes side by side, GPU i joined to i+8 by NV1: a 16-GPU
// partial NVLink mesh (the DGX-1-like case at 16), NUMA by half.
NodeModel Mesh16() {
  const topo::Topology dgx = TopoBuilder::Dgx1().Build();
  TopoBuilder b(16);
  for (int a = 0; a < 16; ++a) {
    for (int c = a + 1; c < 16; ++c) {
      if (a / 8 == c / 8) {
        b.Link(a, c, dgx.link(a % 8, c % 8).Label());
      } else {
        b.Link(a, c, c == a + 8 ? "NV1" : "SYS");
      }
    }
  }
  return b.Numa({0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}).Model();
}

NodeModel Layout(int which) {
  switch (which) {
    case 0:
      return testing::NamedModel("nvswitch8");
    case 1:
      return testing::NamedModel("dgx1");
    case 2:
      return testing::NamedModel("nvswitch16");
    default:
      return Mesh16();
  }
}
const char* LayoutName(int which) {
  static const char* kNames[] = {"nvswitch8", "dgx1", "nvswitch16", "mesh16"};
  return kNames[which];
}

// 1024 random (free, count) questions with at least `count` free GPUs.
struct Question {
  GpuSet free;
  int count;
};
std::vector<Question> Questions(int n) {
  std::mt19937 rng(42);
  std::vector<Question> out;
  while (out.size() < 1024) {
    const GpuSet free(rng() & ((1u << n) - 1));
    if (free.empty()) continue;
    out.push_back({free, 1 + static_cast<int>(rng() % free.size())});
  }
  return out;
}

// A decision from a full table: the scheduler's steady state.
void BM_CachedPickTable(benchmark::State& state) {
  const NodeModel m = Layout(static_cast<int>(state.range(0)));
  AllocCache cache;
  cache.BuildTable(m);
  const std::vector<Question> qs = Questions(m.gpu_count());
  size_t i = 0;
  for (auto _ : state) {
    const Question& q = qs[i++ & 1023];
    benchmark::DoNotOptimize(cache.Pick(m, q.free, {q.count, {}}));
  }
  state.SetLabel(LayoutName(static_cast<int>(state.range(0))));
}
BENCHMARK(BM_CachedPickTable)->Arg(0)->Arg(2);

// A decision answered from the lazy map (all 1024 questions seen once before).
void BM_CachedPickLazy(benchmark::State& state) {
  const NodeModel m = Layout(static_cast<int>(state.range(0)));
  AllocCache cache;
  const std::vector<Question> qs = Questions(m.gpu_count());
  for (const Question& q : qs)
    benchmark::DoNotOptimize(cache.Pick(m, q.free, {q.count, {}}));
  size_t i = 0;
  for (auto _ : state) {
    const Question& q = qs[i++ & 1023];
    benchmark::DoNotOptimize(cache.Pick(m, q.free, {q.count, {}}));
  }
  state.SetLabel(LayoutName(static_cast<int>(state.range(0))));
}
BENCHMARK(BM_CachedPickLazy)->Arg(0)->Arg(2);

// One uncached decision on a layout whose tables exist: the subset scan only.
void BM_UncachedDecide(benchmark::State& state) {
  const NodeModel m = Layout(static_cast<int>(state.range(0)));
  auto tables = HachiTables::Build(m);
  const std::vector<Question> qs = Questions(m.gpu_count());
  size_t i = 0;
  for (auto _ : state) {
    const Question& q = qs[i++ & 1023];
    benchmark::DoNotOptimize(
        tables->Decide(static_cast<uint32_t>(q.free.mask()), q.count, 0));
  }
  state.SetLabel(LayoutName(static_cast<int>(state.range(0))));
}
BENCHMARK(BM_UncachedDecide)->Arg(0)->Arg(1)->Arg(2)->Arg(3);

// The worst uncached decision: a whole free node, half of it wanted (C(16, 8) = 12870
// candidates among 2^16 submasks).
void BM_UncachedDecideWorst(benchmark::State& state) {
  const NodeModel m = Layout(static_cast<int>(state.range(0)));
  auto tables = HachiTables::Build(m);
  const uint32_t all = static_cast<uint32_t>(m.all_gpus().mask());
  for (auto _ : state) {
    benchmark::DoNotOptimize(tables->Decide(all, m.gpu_count() / 2, 0));
  }
  state.SetLabel(LayoutName(static_cast<int>(state.range(0))));
}
BENCHMARK(BM_UncachedDecideWorst)->Arg(0)->Arg(2)->Unit(benchmark::kMicrosecond);

// HachiPolicy::Choose: checks, the decision and the explanation (DescribeChoice).
void BM_PolicyChooseExplained(benchmark::State& state) {
  const NodeModel m = Layout(static_cast<int>(state.range(0)));
  const Policy& p = DefaultPolicy();
  const std::vector<Question> qs = Questions(m.gpu_count());
  size_t i = 0;
  for (auto _ : state) {
    const Question& q = qs[i++ & 1023];
    benchmark::DoNotOptimize(p.Choose(m, q.free, {q.count, {}}));
  }
  state.SetLabel(LayoutName(static_cast<int>(state.range(0))));
}
BENCHMARK(BM_PolicyChooseExplained)->Arg(0)->Arg(2);

// First use of a layout: the per-mask tables (conn, best m-sets, Q ranks).
void BM_BuildTables(benchmark::State& state) {
  const NodeModel m = Layout(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(HachiTables::Build(m));
  state.SetLabel(LayoutName(static_cast<int>(state.range(0))));
}
BENCHMARK(BM_BuildTables)->Arg(0)->Arg(1)->Arg(2)->Arg(3)->Unit(benchmark::kMillisecond);

// AllocCache::BuildTable from nothing: the tables plus every (free, count) decision.
void BM_BuildWholeTable(benchmark::State& state) {
  const NodeModel m = Layout(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto tables = HachiTables::Build(m);
    benchmark::DoNotOptimize(tables->DecisionTable());
  }
  state.SetLabel(LayoutName(static_cast<int>(state.range(0))));
}
BENCHMARK(BM_BuildWholeTable)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Arg(3)
    ->Unit(benchmark::kMillisecond);

// The besteffort reference on a whole free node, by request size.
void BM_BestEffort(benchmark::State& state) {
  const NodeModel m = Layout(static_cast<int>(state.range(0)));
  const int count = static_cast<int>(state.range(1));
  const Policy& p = *FindPolicy("besteffort");
  for (auto _ : state) benchmark::DoNotOptimize(p.Choose(m, m.all_gpus(), {count, {}}));
  state.SetLabel(std::string(LayoutName(static_cast<int>(state.range(0)))) + " count " +
                 std::to_string(count));
}
BENCHMARK(BM_BestEffort)
    ->Args({1, 1})
    ->Args({1, 2})
    ->Args({1, 3})
    ->Args({1, 4})
    ->Args({2, 8})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace hachi::alloc

BENCHMARK_MAIN();
