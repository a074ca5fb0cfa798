// The SQLite store's commit rate (state/sqlite_store.h): every commit is durable
// (WAL, synchronous=FULL), so one commit costs an fsync and concurrent commits share
// one through group commit. The database lives in $TMPDIR (default /tmp); the figures
// only mean something on a real disk, not tmpfs. Run build-*/bench/store_bench.
// With $HACHI_BENCH_POSTGRES (a libpq connection string, e.g. what scripts/pg-scratch.sh
// prints) the same benchmarks run on the PostgreSQL store instead, its tables dropped
// before each: a commit there is a round trip per statement and the server's fsync.
//
//   BM_SubmitOneThread          one JobSubmitted per commit, one caller (also exactly
//                               1,000 commits: /iterations:1000)
//   BM_SubmitThreads/threads:N  N callers (8, 16), each committing one JobSubmitted (ids
//   from
//                               a shared counter, so they reach the store slightly
//                               out of order) in a loop
//   BM_UpdateThreads/threads:N  N callers, each committing one small UPDATE (a hold
//                               toggle on its own job) in a loop
// The threaded ones report commits_per_txn, the grouping achieved.
//   BM_Load100k                 Load() of 100,000 jobs (a server restart at DESIGN.md
//                               §4.8 scale)
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "state/pg_db.h"
#include "state/pg_follow.h"
#include "state/store.h"

namespace hachi::state {
namespace {

std::string NewDbPath() {
  std::string tmpl = std::filesystem::temp_directory_path() / "hachi-bench-XXXXXX";
  return std::string(mkdtemp(tmpl.data())) + "/state.db";
}

void RemoveDb(const std::string& path) {
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

// The PostgreSQL database to measure instead of SQLite, or null.
const char* PostgresTarget() {
  const char* c = std::getenv("HACHI_BENCH_POSTGRES");
  return c != nullptr && *c != '\0' ? c : nullptr;
}

// A new, empty store: a SQLite file in $TMPDIR (its path in *where, for RemoveStore), or
// the PostgreSQL database with its tables dropped (*where empty).
Result<std::unique_ptr<Store>> NewStore(std::string* where) {
  where->clear();
  if (const char* pg = PostgresTarget()) {
    PgDbOptions o;
    o.conninfo = pg;
    Result<std::unique_ptr<PgDb>> db = PgDb::Open(o);
    if (!db.ok()) return db.status();
    Status dropped = (*db)->Exec(
        "DROP TABLE IF EXISTS jobs, nodes, meta, tokens, payloads, steps, usage, "
        "hachi_gone");
    if (!dropped.ok()) return dropped;
    return OpenPostgresStore(pg);
  }
  *where = NewDbPath();
  return OpenSqliteStore(*where);
}

void RemoveStore(const std::string& where) {
  if (!where.empty()) RemoveDb(where);
}

JobRecord Job(JobId id) {
  JobRecord job;
  job.id = id;
  job.req.gpus = 1;
  job.req.user = "alice";
  job.req.partition = "gpu";
  job.req.time_limit = 3600;
  job.spec.name = "train";
  job.spec.set_argv({"python", "train.py", "--epochs", "10"});
  job.spec.workdir = "/home/alice";
  job.spec.set_env({{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/alice"}});
  job.submit_time = 1700000000 + id;
  return job;
}

void BM_SubmitOneThread(benchmark::State& state) {
  std::string path;
  auto store = NewStore(&path);
  if (!store.ok()) {
    state.SkipWithError(store.status().ToString().c_str());
    return;
  }
  JobId next = 1;
  for (auto _ : state) {
    Status s = (*store)->Commit({JobSubmitted{Job(next++)}});
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  store->reset();
  RemoveStore(path);
}
BENCHMARK(BM_SubmitOneThread)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SubmitOneThread)
    ->Iterations(1000)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Shared by the threads of one run; thread 0 sets it up before the loop and tears it
// down after (the benchmark library synchronises the threads at both points).
std::unique_ptr<Store> g_store;
std::string g_path;

std::atomic<JobId> g_next_id{1};

void BM_SubmitThreads(benchmark::State& state) {
  if (state.thread_index() == 0) {
    auto store = NewStore(&g_path);
    if (!store.ok()) {
      state.SkipWithError(store.status().ToString().c_str());
      return;
    }
    g_store = std::move(*store);
    g_next_id = 1;
  }
  for (auto _ : state) {
    Status s = g_store->Commit({JobSubmitted{Job(g_next_id.fetch_add(1))}});
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    const StoreStats stats = g_store->stats();
    state.counters["commits_per_txn"] =
        stats.transactions > 0
            ? static_cast<double>(stats.commits) / static_cast<double>(stats.transactions)
            : 0;
    g_store.reset();
    RemoveStore(g_path);
  }
}
BENCHMARK(BM_SubmitThreads)
    ->Threads(8)
    ->Threads(16)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

void BM_UpdateThreads(benchmark::State& state) {
  constexpr int kMaxThreads = 64;
  if (state.thread_index() == 0) {
    auto store = NewStore(&g_path);
    if (!store.ok()) {
      state.SkipWithError(store.status().ToString().c_str());
      return;
    }
    g_store = std::move(*store);
    std::vector<Edit> setup;
    for (int i = 1; i <= kMaxThreads; ++i) {
      setup.emplace_back(std::in_place_type<JobSubmitted>, Job(i));
    }
    if (!g_store->Commit(setup).ok()) state.SkipWithError("setup failed");
  }
  const JobId mine = state.thread_index() + 1;
  bool held = false;
  for (auto _ : state) {
    held = !held;
    Status s = g_store->Commit({JobHeld{mine, held}});
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    const StoreStats stats = g_store->stats();
    state.counters["commits_per_txn"] =
        stats.transactions > 0 ? static_cast<double>(stats.commits - 1) /
                                     static_cast<double>(stats.transactions - 1)
                               : 0;
    g_store.reset();
    RemoveStore(g_path);
  }
}
BENCHMARK(BM_UpdateThreads)
    ->Threads(1)
    ->Threads(16)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// A new store (NewStore) holding `jobs` pending jobs, a thousand per commit; on an error
// the benchmark is skipped, saying why.
Result<std::unique_ptr<Store>> FilledStore(benchmark::State& state, std::string* where,
                                           int jobs) {
  Result<std::unique_ptr<Store>> store = NewStore(where);
  for (int first = 1; store.ok() && first <= jobs; first += 1000) {
    std::vector<Edit> batch;
    for (int id = first; id < first + 1000 && id <= jobs; ++id) {
      batch.emplace_back(std::in_place_type<JobSubmitted>, Job(id));
    }
    if (Status s = (*store)->Commit(batch); !s.ok()) store = s;
  }
  if (!store.ok()) state.SkipWithError(store.status().ToString().c_str());
  return store;
}

void BM_Load100k(benchmark::State& state) {
  constexpr int kJobs = 100000;
  std::string path;
  Result<std::unique_ptr<Store>> store = FilledStore(state, &path, kJobs);
  if (!store.ok()) return;
  for (auto _ : state) {
    Result<StateImage> image = (*store)->Load();
    if (!image.ok() || image->jobs.size() != kJobs) {
      state.SkipWithError("load failed");
      break;
    }
    benchmark::DoNotOptimize(image);
  }
  state.SetItemsProcessed(state.iterations() * kJobs);
  store->reset();
  RemoveStore(path);
}
BENCHMARK(BM_Load100k)->Iterations(3)->Unit(benchmark::kMillisecond);

// PostgreSQL only: what a warm standby reads at a takeover (state/pg_follow.h) — the
// rows written since its last catch-up, here 100 jobs changed among 100,000 — against
// BM_Load100k, what a cold one reads.
void BM_FollowCatchUp100k(benchmark::State& state) {
  constexpr int kJobs = 100000;
  constexpr int kChanged = 100;
  const char* pg = PostgresTarget();
  if (pg == nullptr) {
    state.SkipWithError("PostgreSQL only: set HACHI_BENCH_POSTGRES");
    return;
  }
  std::string path;
  Result<std::unique_ptr<Store>> store = FilledStore(state, &path, kJobs);
  if (!store.ok()) return;
  Result<std::unique_ptr<PgFollower>> follower = PgFollower::Open(pg);
  if (!follower.ok() || !(*follower)->CatchUp().ok()) {
    state.SkipWithError("the follower's first read failed");
    return;
  }
  bool held = false;
  int64_t rows = 0;
  for (auto _ : state) {
    state.PauseTiming();
    held = !held;
    std::vector<Edit> change;
    for (JobId id = 1; id <= kChanged; ++id) change.emplace_back(JobHeld{id * 997, held});
    if (!(*store)->Commit(change).ok()) {
      state.SkipWithError("change failed");
      break;
    }
    state.ResumeTiming();
    if (!(*follower)->CatchUp().ok()) {
      state.SkipWithError("catch-up failed");
      break;
    }
    rows = (*follower)->stats().rows_last;
  }
  state.counters["rows_read"] = static_cast<double>(rows);
  store->reset();
}
BENCHMARK(BM_FollowCatchUp100k)->Iterations(10)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace hachi::state

BENCHMARK_MAIN();
