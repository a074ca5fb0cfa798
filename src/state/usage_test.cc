// Job usage: sums, percentiles and the bounded series; the findings `hachi
// eff` prints; the JSON both the store and the API use; both stores' usage rows.
#include "state/usage.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "state/pg_testing.h"
#include "state/sqlite_store.h"
#include "state/store.h"
#include "state/usage_json.h"

namespace hachi::state {
namespace {

constexpr Time kStart = 1700000000;

// A one-node job with `gpus` GPUs (0..gpus-1) and 16 CPUs, 64 GiB.
JobUsage EightGpuJob(int gpus = 8) {
  sched::Allocation a;
  a.gpus = GpuSet::FirstN(gpus);
  a.cpus = 16;
  a.memory_mib = 65536;
  return NewJobUsage(7, kStart, {"n1"}, {a});
}

// A sample at `at` with utilisation util[i] on GPU i.
JobUsageSample Sample(Time at, const std::vector<int>& util, int64_t mem_mib = 1000) {
  JobUsageSample s;
  s.job = 7;
  s.start_time = kStart;
  s.at = at;
  for (size_t i = 0; i < util.size(); ++i) {
    GpuSample g;
    g.gpu = static_cast<int>(i);
    g.util = util[i];
    g.mem_util = util[i] / 2;
    g.mem_mib = mem_mib + static_cast<int64_t>(i);
    g.power_w = 100 + util[i];
    g.sm_clock_mhz = 1980;
    g.pcie_kbs = 1000;
    g.nvlink_kbs = 5000;
    s.gpus.push_back(g);
  }
  return s;
}

TEST(Usage, SumsPercentilesAndPeaks) {
  JobUsage u = EightGpuJob(1);
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(AddSample(&u, "n1", Sample(kStart + 10 * i, {i + 1}, 100 * i)));
  }
  const GpuUsage& g = u.gpus[0];
  EXPECT_EQ(g.samples, 100);
  EXPECT_DOUBLE_EQ(g.UtilMean(), 50.5);
  EXPECT_EQ(g.UtilPercentile(0.5), 50);
  EXPECT_EQ(g.UtilPercentile(0.95), 95);
  EXPECT_EQ(g.util_max, 100);
  EXPECT_EQ(g.mem_peak_mib, 9900);
  EXPECT_EQ(g.power_max_w, 200);
  EXPECT_DOUBLE_EQ(g.SmClockMean(), 1980);
  EXPECT_DOUBLE_EQ(g.NvLinkMean(), 5000);
  EXPECT_EQ(u.last_at, kStart + 990);
}

TEST(Usage, SamplesOfAnotherRunOrNodeAreIgnored) {
  JobUsage u = EightGpuJob(2);
  JobUsageSample other = Sample(kStart + 5, {50, 50});
  other.start_time = kStart - 100;
  EXPECT_FALSE(AddSample(&u, "n1", other));
  EXPECT_FALSE(AddSample(&u, "n9", Sample(kStart + 5, {50, 50})));
  // GPU 5 is not the job's: ignored, the others counted.
  JobUsageSample s = Sample(kStart + 5, {50, 50});
  s.gpus.push_back(GpuSample{5, 99, -1, -1, -1, -1, -1, -1});
  EXPECT_TRUE(AddSample(&u, "n1", s));
  EXPECT_EQ(u.gpus.size(), 2u);
  EXPECT_EQ(u.gpus[0].samples + u.gpus[1].samples, 2);
}

// A week of samples every 5 s: the series stays within kUsagePoints, ascending, and its
// buckets' means still follow the phases.
TEST(Usage, TheSeriesStaysBoundedOverAWeek) {
  JobUsage u = EightGpuJob(1);
  const Duration week = 7 * 24 * 3600;
  for (Time t = 0; t < week; t += 5) {
    const int util = t < week / 2 ? 90 : 10;  // busy half, idle half
    AddSample(&u, "n1", Sample(kStart + t, {util}));
  }
  const GpuUsage& g = u.gpus[0];
  ASSERT_LE(g.series.size(), static_cast<size_t>(kUsagePoints));
  EXPECT_GE(g.series.size(), static_cast<size_t>(kUsagePoints / 2));
  for (size_t i = 1; i < g.series.size(); ++i)
    EXPECT_LT(g.series[i - 1].at, g.series[i].at);
  EXPECT_EQ(g.series.front().util, 90);
  EXPECT_EQ(g.series.back().util, 10);
  int64_t n = 0;
  for (const UsagePoint& p : g.series) n += p.samples;
  EXPECT_EQ(n, g.samples);
  EXPECT_GE(g.step * kUsagePoints, week);
}

TEST(Usage, CpuEfficiencyAndMemoryPeak) {
  JobUsage u = EightGpuJob(1);
  JobUsageSample s = Sample(kStart + 100, {50});
  s.cpu_usec = 800'000'000;  // 800 CPU seconds in 100 s on 16 CPUs: 50 %
  s.mem_mib = 30000;
  s.mem_peak_mib = 40000;
  AddSample(&u, "n1", s);
  EXPECT_DOUBLE_EQ(u.CpuSeconds(), 800);
  EXPECT_DOUBLE_EQ(u.CpuEfficiency(), 0.5);
  EXPECT_EQ(u.MemPeakMib(), 40000);
  const UsageSummary sum = Summarize(u);
  EXPECT_EQ(sum.samples, 1);
  EXPECT_DOUBLE_EQ(sum.gpu_util, 50);
  EXPECT_DOUBLE_EQ(sum.cpu_seconds, 800);
  EXPECT_EQ(sum.mem_peak_mib, 40000);
}

bool Has(const std::vector<UsageFinding>& f, const std::string& kind) {
  for (const UsageFinding& x : f) {
    if (x.kind == kind) return true;
  }
  return false;
}

std::string Text(const std::vector<UsageFinding>& f, const std::string& kind) {
  for (const UsageFinding& x : f) {
    if (x.kind == kind) return x.text;
  }
  return "";
}

// The issue's case: GPU 3 at 5 %, the other seven at 95 %.
TEST(UsageFindings, OneSlowGpuOfEightIsImbalance) {
  JobUsage u = EightGpuJob();
  for (int i = 0; i < 20; ++i) {
    AddSample(&u, "n1", Sample(kStart + 10 * i, {95, 95, 95, 5, 95, 95, 95, 95}));
  }
  const std::vector<UsageFinding> f = Findings(u, {});
  EXPECT_EQ(Text(f, "imbalance"),
            "GPU 3 averaged 5 % while the other 7 averaged 95 %: look at data loading or "
            "an uneven split of the work");
  EXPECT_FALSE(Has(f, "idle-gpu"));
  EXPECT_FALSE(Has(f, "low-utilisation"));
}

TEST(UsageFindings, AGpuNeverTouchedIsIdle) {
  JobUsage u = EightGpuJob(4);
  for (int i = 0; i < 20; ++i)
    AddSample(&u, "n1", Sample(kStart + 10 * i, {80, 0, 85, 90}));
  const std::vector<UsageFinding> f = Findings(u, {});
  EXPECT_EQ(
      Text(f, "idle-gpu"),
      "GPU 1 was never used (0 % in every sample) while the other 3 worked: ask for "
      "3 GPUs, or check that every rank gets a GPU of its own");
  EXPECT_FALSE(Has(f, "imbalance"));  // the idle GPU is not also "slow"
  EXPECT_EQ(Summarize(u).idle_gpus, 1);
}

TEST(UsageFindings, FewSamplesSayNothing) {
  JobUsage u = EightGpuJob(2);
  AddSample(&u, "n1", Sample(kStart + 10, {90, 0}));
  AddSample(&u, "n1", Sample(kStart + 20, {90, 0}));
  EXPECT_TRUE(Findings(u, {}).empty());
}

TEST(UsageFindings, CpuBoundOverAskedMemoryAndMemoryNearItsLimit) {
  JobUsage u = EightGpuJob(1);
  for (int i = 1; i <= 10; ++i) {
    JobUsageSample s = Sample(kStart + 10 * i, {12}, 11 * 1024);
    s.cpu_usec = int64_t{16} * 10 * i * 950'000;  // 95 % of 16 CPUs
    s.mem_mib = 61000;
    AddSample(&u, "n1", s);
  }
  const std::vector<UsageFinding> f = Findings(u, FindingInputs{40 * 1024});
  EXPECT_EQ(
      Text(f, "cpu-bound"),
      "its GPUs averaged 12 % while its 16 CPUs were 95 % busy: the job is CPU-bound "
      "(data loading, preprocessing); ask for more CPUs or move that work to the GPU");
  EXPECT_EQ(Text(f, "over-asked-memory"),
            "promised 40 GiB of GPU memory (--gpu-mem), peak 11 GiB: --gpu-mem=14G would "
            "leave room for other shares");
  EXPECT_EQ(
      Text(f, "memory-near-limit"),
      "memory peaked at 59.6 GiB of 64 GiB allowed: near the limit, where the job is "
      "killed (OUT_OF_MEMORY)");
}

TEST(UsageFindings, GangsNameTheNode) {
  sched::Allocation a;
  a.gpus = GpuSet::FirstN(2);
  a.cpus = 8;
  JobUsage u = NewJobUsage(7, kStart, {"n1", "n2"}, {a, a});
  for (int i = 0; i < 10; ++i) {
    AddSample(&u, "n1", Sample(kStart + 10 * i, {90, 92}));
    AddSample(&u, "n2", Sample(kStart + 10 * i, {91, 4}));
  }
  EXPECT_EQ(Text(Findings(u, {}), "imbalance"),
            "n2 GPU 1 averaged 4 % while the other 3 averaged 91 %: look at data loading "
            "or an uneven split of the work");
}

TEST(UsageJson, RoundTripsAndResumes) {
  JobUsage u = EightGpuJob(2);
  for (int i = 0; i < 300; ++i) {
    JobUsageSample s = Sample(kStart + 5 * i, {i % 101, 50});
    s.cpu_usec = 1000 * i;
    AddSample(&u, "n1", s);
  }
  Result<JobUsage> back = UsageFromJson(UsageToJson(u));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, u);
  // Samples after a restart continue the same sums.
  JobUsage resumed = *back;
  AddSample(&resumed, "n1", Sample(kStart + 2000, {100, 100}));
  AddSample(&u, "n1", Sample(kStart + 2000, {100, 100}));
  EXPECT_EQ(resumed, u);
}

TEST(UsageJson, ErrorsNameTheField) {
  Result<JobUsage> bad = UsageFromJson(
      R"({"job":1,"gpus":[{"node":"n1","gpu":0,"step":5,"series":[[1,2,3]]}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "usage.gpus[0].series[0]: expected an array of 4 integers");
  EXPECT_FALSE(UsageFromJson("{").ok());
}

class UsageStoreTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (kind() == "postgres") {
      if (testing::SkipPostgres()) GTEST_SKIP() << "HACHI_NO_POSTGRES=1";
      std::string why;
      pg_ = testing::FreshPostgresSchema(&why);
      ASSERT_FALSE(pg_.empty()) << why;
    }
    std::string tmpl = std::filesystem::temp_directory_path() / "hachi-usage-XXXXXX";
    dir_ = ::mkdtemp(tmpl.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string kind() const { return GetParam(); }
  std::unique_ptr<Store> Open() {
    if (kind() == "memory") {
      if (!memory_) memory_ = NewMemoryStore();
      return nullptr;
    }
    Result<std::unique_ptr<Store>> s = kind() == "postgres"
                                           ? OpenPostgresStore(pg_)
                                           : OpenSqliteStore(dir_ + "/state.db");
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(*s) : nullptr;
  }
  Store* Get(std::unique_ptr<Store>& s) { return s ? s.get() : memory_.get(); }
  std::string dir_;
  std::string pg_;  // the test's database
  std::unique_ptr<Store> memory_;
};

TEST_P(UsageStoreTest, RunsAreReplacedAndSurviveAReopen) {
  JobUsage first = EightGpuJob(1);
  AddSample(&first, "n1", Sample(kStart + 5, {40}));
  JobUsage second = first;
  second.start_time = kStart + 1000;
  second.gpus[0].util_max = 77;
  {
    std::unique_ptr<Store> s = Open();
    ASSERT_TRUE(Get(s)->SaveUsage({first}).ok());
    AddSample(&first, "n1", Sample(kStart + 10, {60}));
    ASSERT_TRUE(Get(s)->SaveUsage({first, second}).ok());  // replaces the first row
  }
  std::unique_ptr<Store> s = Open();
  Result<std::vector<JobUsage>> runs = Get(s)->LoadUsage(7);
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0], first);
  EXPECT_EQ((*runs)[1], second);
  Result<std::vector<JobUsage>> none = Get(s)->LoadUsage(8);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// The burst nodes' powered spells, the other measurement the stores keep: a spell is
// replaced by its later writes, a window returns what overlaps it (an open spell
// whatever its until), and all of it survives a reopen.
TEST_P(UsageStoreTest, PowerSpellsAreReplacedAndReadByWindow) {
  PowerSpell b1{"b1", kStart, kStart, true, "burst-a", 8, 2.5};
  const PowerSpell b2{"b2", kStart + 100, kStart + 400, false, "burst-a", 8, 2.5};
  const PowerSpell old{"b1", kStart - 9000, kStart - 5000, false, "burst-a", 8, 2.0};
  {
    std::unique_ptr<Store> s = Open();
    ASSERT_TRUE(Get(s)->SavePowerSpells({b1, b2, old}).ok());
    b1.until = kStart + 60;  // a minute on: the same row, moved on
    ASSERT_TRUE(Get(s)->SavePowerSpells({b1}).ok());
  }
  std::unique_ptr<Store> s = Open();
  Result<std::vector<PowerSpell>> all = Get(s)->LoadPowerSpells(0, kStart + 10000);
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(*all, (std::vector<PowerSpell>{old, b1, b2}));
  // After b2 ended: the open b1 only, though its until is before the window.
  Result<std::vector<PowerSpell>> later =
      Get(s)->LoadPowerSpells(kStart + 500, kStart + 600);
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(*later, (std::vector<PowerSpell>{b1}));
  // Before any began: none.
  Result<std::vector<PowerSpell>> before = Get(s)->LoadPowerSpells(0, kStart - 9000);
  ASSERT_TRUE(before.ok());
  EXPECT_TRUE(before->empty());
  b1.until = kStart + 200;
  b1.open = false;
  ASSERT_TRUE(Get(s)->SavePowerSpells({b1}).ok());
  later = Get(s)->LoadPowerSpells(kStart + 500, kStart + 600);
  ASSERT_TRUE(later.ok());
  EXPECT_TRUE(later->empty()) << "closed before the window";
}

INSTANTIATE_TEST_SUITE_P(Stores, UsageStoreTest,
                         ::testing::Values("memory", "sqlite", "postgres"),
                         [](const auto& p) { return std::string(p.param); });

}  // namespace
}  // namespace hachi::state
