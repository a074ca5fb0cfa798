// The scheduler's speed at DESIGN.md §4.8 scale: 1,000 nodes x 8 GPUs (hgx-h100, one
// shared NodeModel) and 100,000 queued jobs with a Philly-like mix (~93 % 1-GPU, then
// 2/4/8 GPUs and a few gangs of 2-4 nodes x 8). Figures are quoted in
// docs/scheduler.md; run with `make bench` or build-*/bench/sched_bench.
//
//   BM_FullCycle/<policy>   every GPU busy: one full cycle with backfill (p50/p99 in
//                           the counters, targets p99 < 50 ms)
//   BM_Place/<policy>       empty cluster: a cycle that places jobs until it is full
//                           (jobs_per_s counter, target >= 50,000)
//   BM_IdleCycle/<policy>   full cluster, 2,000 pending: what the simulator pays per
//                           event when nothing can start
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "sched/scheduler.h"
#include "sched/testing.h"

namespace hachi::sched {
namespace {

constexpr int kNodes = 1000;

ClusterState EmptyCluster(int nodes = kNodes) {
  testing::ClusterBuilder b;
  for (int i = 0; i < nodes; ++i) b.Nodes(1, "hgx-h100", "b" + std::to_string(i / 32));
  b.Partition("gpu");
  return b.Build();
}

// Philly-like request mix.
void AddPending(ClusterState* s, int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  s->pending.reserve(count);
  for (int i = 0; i < count; ++i) {
    Job j;
    j.id = 1000000 + i;
    j.partition = 0;
    j.submit_time = i;
    j.req.partition = "gpu";
    j.req.user = "u" + std::to_string(rng() % 200);
    j.req.account = "a" + std::to_string(rng() % 14);
    j.req.time_limit = (1 + static_cast<Duration>(rng() % 24)) * kHour;
    const double x = u(rng);
    if (x < 0.93) {
      j.req.gpus = 1;
    } else if (x < 0.96) {
      j.req.gpus = 2;
    } else if (x < 0.98) {
      j.req.gpus = 4;
    } else if (x < 0.995) {
      j.req.gpus = 8;
    } else {
      j.req.nodes = 2 + static_cast<int>(rng() % 3);
      j.req.gpus_per_node = 8;
      j.req.gpus = 8 * j.req.nodes;
    }
    s->pending.push_back(std::move(j));
  }
}

// Every GPU busy with a mix of 1-GPU and 8-GPU jobs ending over the next day.
void FillRunning(ClusterState* s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  JobId id = 1;
  for (int n = 0; n < static_cast<int>(s->nodes.size()); ++n) {
    Node& node = s->nodes[n];
    const bool whole = n % 4 == 0;
    for (int g = 0; g < 8; g += whole ? 8 : 1) {
      Job j;
      j.id = id++;
      j.partition = 0;
      j.req.gpus = whole ? 8 : 1;
      j.req.user = "u" + std::to_string(rng() % 200);
      j.req.account = "a" + std::to_string(rng() % 14);
      j.req.time_limit = (1 + static_cast<Duration>(rng() % 24)) * kHour;
      j.start_time = -static_cast<Time>(rng() % kHour);
      Allocation a;
      a.node = n;
      a.gpus = whole ? GpuSet::FirstN(8) : GpuSet(uint64_t{1} << g);
      j.allocations.push_back(a);
      node.free_gpus = node.free_gpus - a.gpus;
      ++node.shared_jobs;
      s->running.push_back(std::move(j));
    }
  }
}

std::unique_ptr<Scheduler> Make(const char* policy, bool explain = true) {
  SchedConfig c;
  c.policy = policy;
  c.explain = explain;
  return std::move(Scheduler::Create(c).value());
}

void ReportPercentiles(benchmark::State& state, std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  if (ms.empty()) return;
  state.counters["p50_ms"] = ms[ms.size() / 2];
  state.counters["p99_ms"] = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  state.counters["max_ms"] = ms.back();
}

void BM_FullCycle(benchmark::State& state, const char* policy) {
  ClusterState s = EmptyCluster();
  FillRunning(&s, 1);
  AddPending(&s, 100000, 2);
  auto sched = Make(policy);
  std::vector<double> ms;
  Time now = 0;
  size_t reservations = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    Plan plan = sched->Schedule(s, now);
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    reservations = plan.reservations.size();
    benchmark::DoNotOptimize(plan);
    now += 1;  // new cycle, same priority period (memo stays valid)
  }
  state.counters["reservations"] = static_cast<double>(reservations);
  ReportPercentiles(state, std::move(ms));
}

void BM_FullCycleNewPeriod(benchmark::State& state, const char* policy) {
  ClusterState s = EmptyCluster();
  FillRunning(&s, 1);
  AddPending(&s, 100000, 2);
  auto sched = Make(policy);
  std::vector<double> ms;
  Time now = 0;
  for (auto _ : state) {
    now += sched->config().priority_period;  // the order is recomputed every cycle
    const auto t0 = std::chrono::steady_clock::now();
    Plan plan = sched->Schedule(s, now);
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    benchmark::DoNotOptimize(plan);
  }
  ReportPercentiles(state, std::move(ms));
}

// An empty cluster and `pending` jobs (5,000: all fit; 100,000: the cluster fills).
void BM_Place(benchmark::State& state, const char* policy) {
  ClusterState s = EmptyCluster();
  AddPending(&s, static_cast<int>(state.range(0)), 3);
  auto sched = Make(policy);
  double placed = 0, seconds = 0;
  Time now = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    Plan plan = sched->Schedule(s, now);
    const auto t1 = std::chrono::steady_clock::now();
    placed += static_cast<double>(plan.starts.size());
    seconds += std::chrono::duration<double>(t1 - t0).count();
    benchmark::DoNotOptimize(plan);
    now += 1;
  }
  state.counters["starts_per_cycle"] = placed / static_cast<double>(state.iterations());
  state.counters["jobs_per_s"] = placed / seconds;
}

// A full cluster of `nodes` nodes with `pending` jobs waiting: the cost of a cycle
// where nothing can start (the simulator calls one per event). range(2): explain.
void BM_IdleCycle(benchmark::State& state, const char* policy) {
  ClusterState s = EmptyCluster(static_cast<int>(state.range(0)));
  FillRunning(&s, 1);
  AddPending(&s, static_cast<int>(state.range(1)), 4);
  auto sched = Make(policy, state.range(2) != 0);
  Time now = 0;
  for (auto _ : state) {
    Plan plan = sched->Schedule(s, now);
    benchmark::DoNotOptimize(plan);
    now += 1;
  }
}

BENCHMARK_CAPTURE(BM_FullCycle, hachi, "hachi")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(50);
BENCHMARK_CAPTURE(BM_FullCycle, easy, "easy")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(50);
BENCHMARK_CAPTURE(BM_FullCycleNewPeriod, hachi, "hachi")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(20);
BENCHMARK_CAPTURE(BM_Place, hachi, "hachi")
    ->Arg(5000)
    ->Arg(100000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(10);
BENCHMARK_CAPTURE(BM_Place, easy, "easy")
    ->Arg(5000)
    ->Arg(100000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(10);
// {nodes, pending, explain}: the big cluster, and the simulator's 96 x 8 default.
BENCHMARK_CAPTURE(BM_IdleCycle, hachi, "hachi")
    ->Args({1000, 2000, 1})
    ->Args({1000, 2000, 0})
    ->Args({96, 1000, 0})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_IdleCycle, easy, "easy")
    ->Args({1000, 2000, 1})
    ->Args({1000, 2000, 0})
    ->Args({96, 1000, 0})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace hachi::sched

BENCHMARK_MAIN();
