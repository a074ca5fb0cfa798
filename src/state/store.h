// Store: durable state (DESIGN.md §2 state/). The server holds the StateImage in memory;
// the store keeps the same records on disk, changed by small typed edits. A Commit that
// returns OK means the edits are on disk (SQLite WAL, synchronous=FULL): the server
// acknowledges a submit only after it. On start the server calls Load once.
//
// Thread-safety: Commit may be called from many threads at once. Implementations group
// concurrent commits into one transaction (one fsync for a burst of submits); each
// caller's edits stay in order and atomic (all or none), and a caller returns only when
// its own edits are durable — or with the error that stopped them (disk full, database
// busy past the timeout: kUnavailable), in which case none of its edits are stored.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "state/edits.h"
#include "state/power_spells.h"
#include "state/records.h"

namespace hachi::state {

// How commits were grouped, for tests and benchmarks: `transactions` < `commits` when
// concurrent callers shared a transaction.
struct StoreStats {
  int64_t commits = 0;       // Commit calls
  int64_t transactions = 0;  // write transactions begun (group and retries)
};

class Store {
 public:
  virtual ~Store() = default;
  // Everything stored, as the image the edits built.
  virtual Result<StateImage> Load() = 0;
  // Makes `edits` durable, atomically and in order (see above).
  virtual Status Commit(const std::vector<Edit>& edits) = 0;
  // Counters since the store was opened; thread-safe.
  virtual StoreStats stats() const { return {}; }
  // The file it keeps its state in, for messages (its disk's free space); "" for none.
  virtual std::string path() const { return ""; }
  // Job `id`'s script and environment as stored (the server drops a finished job's
  // environment from memory; requeueing it needs them back). kNotFound when
  // there is no such job; kUnavailable for a store that cannot say.
  virtual Result<std::shared_ptr<const JobPayload>> LoadPayload(JobId id) {
    return Unavailable("this store cannot load job " + std::to_string(id) +
                       "'s script and environment");
  }

  // (state/usage.h): what each run did with its GPUs, CPUs and memory. These
  // are measurements, not state changes, so they are not edits: the server writes them
  // in batches (every minute for running jobs, and at a run's end), one row per run
  // (job, start time) that each write replaces, all of a batch in one transaction. A
  // crash loses at most the figures since the last write. Load never reads them (a
  // long history would fill memory); LoadUsage reads one job's.
  virtual Status SaveUsage(const std::vector<JobUsage>& usage) {
    (void)usage;
    return Unavailable("this store keeps no job usage");
  }
  // The stored runs of `job`, ascending by start time; empty when none.
  virtual Result<std::vector<JobUsage>> LoadUsage(JobId job) {
    (void)job;
    return Unavailable("this store keeps no job usage");
  }

  // (state/power_spells.h): burst nodes' powered spells, measurements like the usage:
  // written in batches, each row (node, since) replaced by its next write.
  virtual Status SavePowerSpells(const std::vector<PowerSpell>& spells) {
    (void)spells;
    return Unavailable("this store keeps no powered spells");
  }
  // The spells that began before `to` and were powered after `from` (every open one
  // among them, whatever its `until`), ordered by start then node.
  virtual Result<std::vector<PowerSpell>> LoadPowerSpells(Time from, Time to) {
    (void)from;
    (void)to;
    return Unavailable("this store keeps no powered spells");
  }

  // Called after each non-empty Commit with how long it took, in seconds — what the
  // caller waited, group commit included — whatever its outcome (the server's
  // hachi_store_commit_seconds; the store knows nothing of metrics). Set it before the
  // store is shared between threads; it is called from the committing threads.
  void SetCommitObserver(std::function<void(double seconds)> observer) {
    commit_observer_ = std::move(observer);
  }

 protected:
  // Times one Commit for the observer: construct at its start.
  class CommitTimer {
   public:
    explicit CommitTimer(const Store* store)
        : store_(store), start_(std::chrono::steady_clock::now()) {}
    ~CommitTimer() {
      if (!store_->commit_observer_) return;
      store_->commit_observer_(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
              .count());
    }
    CommitTimer(const CommitTimer&) = delete;
    CommitTimer& operator=(const CommitTimer&) = delete;

   private:
    const Store* store_;
    std::chrono::steady_clock::time_point start_;
  };

 private:
  std::function<void(double)> commit_observer_;  // constant once shared
};

struct SqliteOptions {
  int busy_timeout_ms = 5000;
  // Longest a commit waits for others to join its group (0: commit at once; a group
  // still forms from the callers that arrive while a transaction is being written).
  int group_window_us = 0;
  // A file that exists but holds no Hachi tables (0 bytes, its schema lost) is refused
  // unless this is set (`--init`): then it gets a new, empty schema. A file that does
  // not exist is created either way (the first start).
  bool initialize = false;
  // PRAGMA quick_check at open; a failure refuses the file.
  bool quick_check = true;
  // Rows whose checksum does not match their record (edited outside Hachi) are refused
  // by Load, naming the row; with this set they are given the checksum of what they
  // hold at open instead (`--accept-edited-rows`), each named through `warn`.
  bool accept_edited_rows = false;
  std::function<void(const std::string&)> warn;  // may be empty
};

// Opens (creating if needed) the SQLite database at `path` (WAL mode, STRICT tables,
// schema versioned in PRAGMA user_version; an unknown newer version is refused).
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               const SqliteOptions& options = {});

// Several controllers on one PostgreSQL database (docs/ha.md, docs/storage.md).
struct PostgresOptions {
  // The leader's epoch (state/leader_lease.h): every write transaction commits only
  // while the lease row still holds this epoch and has not lapsed by the database's
  // clock. 0: no fence (hachi admin migrate, tests of the store alone).
  int64_t epoch = 0;
  // Called once per store, from the committing thread, when a write was refused because
  // the epoch moved on or the lease lapsed: the server steps down. The commit itself
  // returns kUnavailable, naming the epochs.
  std::function<void(const Status&)> on_deposed;
  // How long a commit keeps reconnecting when the database cannot be reached (a
  // PostgreSQL restart, a primary switchover) before it returns kUnavailable.
  int reconnect_ms = 15000;
  // The database ends a transaction this controller left idle this long (a frozen
  // process): its row locks cannot hold up the next leader. 0: never.
  int idle_in_transaction_ms = 0;
  // As SqliteOptions::initialize; a database without Hachi's tables is a first start
  // anyway (PostgreSQL has no "0-byte file" to tell a lost schema by), so nothing reads
  // it yet.
  bool initialize = false;
  // When set, the store's first Load returns what this returns instead of reading every
  // row: a standby's image of the state, followed while it waited (state/pg_follow.h)
  // and brought up to date once it holds the lease. An error: every row is read.
  std::function<Result<StateImage>()> first_load;
  std::function<void(const std::string&)> warn;  // may be empty
};

// Opens the PostgreSQL store at `conninfo` (libpq's URI or key=value string; several
// hosts with target_session_attrs=read-write follow a switchover), creating its tables
// on first use. kUnavailable when the server cannot be reached or libpq is missing;
// kInvalidArgument for a newer layout than this binary knows.
Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& conninfo,
                                                 const PostgresOptions& options = {});

// Whether a store's write failed for lack of space: SQLite's SQLITE_FULL ("database or
// disk is full"; a write's ENOSPC), or an I/O error whose cause was ENOSPC (an fsync, the
// WAL's index), which the store's message says in kNoSpaceLeft's words.
inline constexpr std::string_view kNoSpaceLeft = "no space left on device";
inline bool IsNoSpace(const Status& s) {
  if (s.code() != StatusCode::kUnavailable) return false;
  const std::string& m = s.message();
  return m.find("database or disk is full") != std::string::npos ||
         m.find(kNoSpaceLeft) != std::string::npos;
}

// In-memory store for tests and `hachi sim`-like uses: the same contract, nothing on
// disk. `fail_after`: commits after this many succeed return kUnavailable (fault
// injection); -1 = never.
std::unique_ptr<Store> NewMemoryStore(int fail_after = -1);

}  // namespace hachi::state
