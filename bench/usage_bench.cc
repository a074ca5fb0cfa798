// What sampling running jobs' GPUs costs (docs/efficiency.md, figures in
// docs/benchmarks.md "Job usage"). At --usage-interval 10, 1,000 running jobs send 100
// samples a second; each costs the agent a sampling round share and the server a parse
// and a sum, and each run keeps a bounded summary. Run build-*/bench/usage_bench.
//
//   BM_AgentRound/8/1      one agent's round with 8 one-GPU jobs: NVML (the fake
//                          libnvidia-ml.so.1, 8 GPUs, which re-reads its events file on
//                          every call: not the driver's time), 8 cgroups' files (a
//                          temporary tree), the report's JSON; /8/0 without NVML
//   BM_ServerReport/8      the server's side of that report: JSON parse and 8 sums
//                          (state::AddSample), per report; items = samples
//   BM_ServerSample8Gpus   one sample of an 8-GPU job summed
//   BM_SaveUsage/1000      the minute's write of 1,000 running runs (one transaction)
// Counters: bytes_per_run (the stored JSON of a run after a day of samples every 10 s,
// one GPU and eight), samples/s.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "agent/gpu_sampler.h"
#include "agent/job_usage.h"
#include "api/protocol.h"
#include "api/protocol_json.h"
#include "core/testing/paths.h"
#include "state/store.h"
#include "state/usage.h"
#include "state/usage_json.h"
#include "topo/presets.h"
#include "topo/topology_file.h"

namespace hachi {
namespace {

constexpr Time kStart = 1700000000;

std::string TempDir() {
  std::string tmpl = std::filesystem::temp_directory_path() / "hachi-ubench-XXXXXX";
  return mkdtemp(tmpl.data());
}

state::JobUsageSample Sample(state::JobId job, Time at, int gpus, int util) {
  state::JobUsageSample s;
  s.job = job;
  s.start_time = kStart;
  s.at = at;
  s.cpu_usec = (at - kStart) * 4'000'000;
  s.mem_mib = 30000;
  s.mem_peak_mib = 31000;
  for (int g = 0; g < gpus; ++g) {
    s.gpus.push_back(
        state::GpuSample{g, util, util / 2, 40000 + g, 500, 1980, 100000, 5000000});
  }
  return s;
}

state::JobUsage Run(state::JobId job, int gpus) {
  sched::Allocation a;
  a.gpus = GpuSet::FirstN(gpus);
  a.cpus = 16;
  a.memory_mib = 65536;
  return state::NewJobUsage(job, kStart, {"n1"}, {a});
}

// A day of samples every 10 s.
state::JobUsage DayOf(state::JobId job, int gpus) {
  state::JobUsage u = Run(job, gpus);
  for (Time t = 0; t < 86400; t += 10) {
    state::AddSample(&u, "n1",
                     Sample(job, kStart + t, gpus, static_cast<int>(t / 10 % 101)));
  }
  return u;
}

void BM_AgentRound(benchmark::State& st) {
  const int jobs = static_cast<int>(st.range(0));
  const std::string dir = TempDir();
  {
    std::ofstream(dir + "/topo.json")
        << topo::TopologyToJson(*topo::LoadPreset("hgx-h100"));
    std::ofstream(dir + "/events") << "util 0 95\nutil 3 5\nnvlinktput 1 1000\n";
  }
  setenv("HACHI_FAKE_NVML_TOPOLOGY", (dir + "/topo.json").c_str(), 1);
  setenv("HACHI_FAKE_NVML_EVENTS", (dir + "/events").c_str(), 1);
  Result<std::unique_ptr<agent::GpuSampler>> sampler =
      agent::GpuSampler::Open(FakeNvmlLibrary());
  if (!sampler.ok()) {
    st.SkipWithError(sampler.status().message().c_str());
    return;
  }
  std::vector<std::vector<std::string>> procs;
  for (int j = 0; j < jobs; ++j) {
    const std::string cg = dir + "/job-" + std::to_string(j);
    std::filesystem::create_directories(cg);
    std::ofstream(cg + "/cgroup.procs") << "1\n";
    std::ofstream(cg + "/cpu.stat")
        << "usage_usec 123456789\nuser_usec 1\nsystem_usec 2\n";
    std::ofstream(cg + "/memory.current") << "32212254720\n";
    std::ofstream(cg + "/memory.peak") << "34359738368\n";
    procs.push_back({cg + "/cgroup.procs"});
  }
  const bool nvml = st.range(1) != 0;
  const std::vector<state::GpuSample> fixed = (*sampler)->Sample();
  size_t bytes = 0;
  for (auto _ : st) {
    const std::vector<state::GpuSample> gpus = nvml ? (*sampler)->Sample() : fixed;
    api::AgentHealth h;
    h.instance = "bench";
    for (int j = 0; j < jobs; ++j) {
      h.usage.push_back(
          agent::JobSample(j + 1, kStart, kStart + 10, {j % 8}, gpus,
                           agent::ReadCgroupUse(procs[static_cast<size_t>(j)])));
    }
    const std::string text = api::AgentHealthToJson(h);
    bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  st.counters["report_bytes"] = static_cast<double>(bytes);
  st.SetItemsProcessed(st.iterations() * jobs);
  sampler->reset();
  std::filesystem::remove_all(dir);
}
// {8, 1}: with the fake NVML's calls (it re-reads its events file on each, so this is an
// upper bound of our side); {8, 0}: the cgroup files and the JSON alone.
BENCHMARK(BM_AgentRound)->Args({8, 1})->Args({8, 0});

void BM_ServerReport(benchmark::State& st) {
  const int jobs = static_cast<int>(st.range(0));
  api::AgentHealth h;
  h.instance = "bench";
  std::vector<state::JobUsage> runs;
  for (int j = 0; j < jobs; ++j) {
    h.usage.push_back(Sample(j + 1, kStart + 10, 1, 90));
    runs.push_back(Run(j + 1, 1));
  }
  const std::string text = api::AgentHealthToJson(h);
  Time at = kStart;
  for (auto _ : st) {
    Result<api::AgentHealth> parsed = api::AgentHealthFromJson(text);
    at += 10;
    for (size_t j = 0; j < parsed->usage.size(); ++j) {
      parsed->usage[j].at = at;
      state::AddSample(&runs[j], "n1", parsed->usage[j]);
    }
  }
  st.SetItemsProcessed(st.iterations() * jobs);
}
BENCHMARK(BM_ServerReport)->Arg(8);

void BM_ServerSample8Gpus(benchmark::State& st) {
  state::JobUsage u = Run(1, 8);
  Time at = kStart;
  for (auto _ : st) {
    at += 10;
    state::AddSample(&u, "n1", Sample(1, at, 8, static_cast<int>(at % 101)));
  }
  st.SetItemsProcessed(st.iterations());
  st.counters["bytes_per_run_1gpu_day"] =
      static_cast<double>(state::UsageToJson(DayOf(2, 1)).size());
  st.counters["bytes_per_run_8gpu_day"] =
      static_cast<double>(state::UsageToJson(DayOf(3, 8)).size());
  // In memory: a GPU's sums, histogram and series after a day (the series at its bound).
  const state::JobUsage day = DayOf(4, 1);
  st.counters["bytes_per_gpu_in_memory"] =
      static_cast<double>(sizeof(state::GpuUsage) +
                          day.gpus[0].series.capacity() * sizeof(state::UsagePoint));
}
BENCHMARK(BM_ServerSample8Gpus);

void BM_SaveUsage(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  const std::string dir = TempDir();
  Result<std::unique_ptr<state::Store>> store = state::OpenSqliteStore(dir + "/state.db");
  if (!store.ok()) {
    st.SkipWithError(store.status().message().c_str());
    return;
  }
  std::vector<state::JobUsage> runs;
  const state::JobUsage day = DayOf(1, 1);
  for (int j = 0; j < n; ++j) {
    runs.push_back(day);
    runs.back().job = j + 1;
  }
  for (auto _ : st) {
    Status s = (*store)->SaveUsage(runs);
    if (!s.ok()) st.SkipWithError(s.message().c_str());
  }
  st.SetItemsProcessed(st.iterations() * n);
  store->reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_SaveUsage)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace hachi

BENCHMARK_MAIN();
