// The SQLite Store (store.h), exposed for tests that need to reach under the interface
// (a full disk is simulated with PRAGMA max_page_count). Other code uses
// OpenSqliteStore.
//
// Layout (schema version 5, PRAGMA user_version): STRICT tables
//   jobs(id INTEGER PRIMARY KEY, state TEXT, record TEXT, payload INTEGER, sum INTEGER)
//                                           record: EncodeJobRow; payload: the payloads
//                                           row of an array task (NULL: inline)
//   nodes(name TEXT PRIMARY KEY, record TEXT, sum INTEGER)  record: EncodeNodeRow
//   tokens(id TEXT PRIMARY KEY, record TEXT, sum INTEGER)   record: EncodeTokenRow
//   payloads(id INTEGER PRIMARY KEY, record TEXT, sum INTEGER)
//                                           an array's script and environment, once,
//                                           keyed by the array's job id
//   steps(job INTEGER, job_start INTEGER, step INTEGER, record TEXT, sum INTEGER,
//         PRIMARY KEY (job, job_start, step))
//                                           record: EncodeStepRow; job steps (issue
//                                           18), by run (job_start: its start_time)
//   meta(key TEXT PRIMARY KEY, value ANY)   'last_job_id', 'min_reader_schema'
// `sum`: each row's checksum over its key and record, checked by Load: a row edited
// outside Hachi is refused by name (SqliteOptions::accept_edited_rows).
// The records are the store's own JSON, each row versioned (state/row_codec.h); the
// layout's version is user_version, and a newer layout opens when its
// 'min_reader_schema' is at most this binary's kSchemaVersion (docs/storage.md).
// Opening an older layout upgrades it in place (kSchema: idempotent CREATE ... IF NOT
// EXISTS); its rows are upgraded when read, and written in the current row format when
// next rewritten.
// journal_mode=WAL, synchronous=FULL: a committed transaction survives a crash or a
// power cut.
//
// Group commit: a Commit caller that finds no transaction being written becomes the
// leader; it takes every batch queued so far (its own included), writes them in one
// BEGIN IMMEDIATE..COMMIT, each batch inside a savepoint, and hands each caller its
// own status. Callers that arrive meanwhile queue for the next group. A batch whose
// edit is refused (CheckEdit) is rolled back to its savepoint alone; if the group's
// transaction itself fails (disk full, I/O error, busy), every batch is retried in a
// transaction of its own, so one bad batch cannot fail the others.
//
// Thread-safety: Load, Commit and stats may be called from any thread at any time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "state/store.h"

namespace hachi::state {

class Db;

class SqliteStore final : public Store {
 public:
  // 2: tokens. 3: rows versioned apart from the API (row_codec.h); min_reader_schema.
  // 4: payloads (an array's script and environment once), row checksums.
  // 5: steps; min_reader_schema stays 4 (a layout-4 binary leaves the table
  // alone). 6: usage, likewise.
  static constexpr int64_t kSchemaVersion = 6;

  static Result<std::unique_ptr<SqliteStore>> Open(const std::string& path,
                                                   const SqliteOptions& options);
  ~SqliteStore() override;

  Result<StateImage> Load() override EXCLUDES(db_mu_);
  Result<std::shared_ptr<const JobPayload>> LoadPayload(JobId id) override
      EXCLUDES(db_mu_);
  Status Commit(const std::vector<Edit>& edits) override EXCLUDES(mu_, db_mu_);
  Status SaveUsage(const std::vector<JobUsage>& usage) override EXCLUDES(db_mu_);
  Result<std::vector<JobUsage>> LoadUsage(JobId job) override EXCLUDES(db_mu_);
  StoreStats stats() const override;
  std::string path() const override { return path_; }

  // Caps the database at `pages` pages (a full disk for tests); 0 lifts the cap. The
  // cap cannot go below the current size (SQLite ignores that).
  Status SetMaxPageCountForTesting(int64_t pages) EXCLUDES(db_mu_);
  // How many Commit callers wait for the next group now: a test that orders callers
  // around a group waits for this instead of sleeping.
  size_t QueuedForTesting() EXCLUDES(mu_);

 private:
  struct Waiter;

  SqliteStore(std::unique_ptr<Db> db, const SqliteOptions& options);

  // Writes one group; sets each waiter's status. Called by the leader only.
  void WriteGroup(const std::vector<Waiter*>& group) EXCLUDES(db_mu_);
  // One batch in a transaction of its own.
  Status WriteAlone(const std::vector<Edit>& edits) REQUIRES(db_mu_);
  Status WriteBatch(const std::vector<Edit>& edits) REQUIRES(db_mu_);
  Status WriteEdit(const Edit& edit) REQUIRES(db_mu_);

  // Constant after construction.
  const SqliteOptions options_;
  const std::string path_;  // the database's file

  // Held by the leader writing, or a read (Load).
  Mutex db_mu_;
  std::unique_ptr<Db> db_ GUARDED_BY(db_mu_);

  // The queue of commits waiting for the next group. Never held across a write.
  Mutex mu_;
  CondVar cv_{&mu_};
  std::vector<Waiter*> queue_ GUARDED_BY(mu_);
  bool writing_ GUARDED_BY(mu_) = false;  // a leader is writing a group

  std::atomic<int64_t> commits_{0};
  std::atomic<int64_t> transactions_{0};
};

}  // namespace hachi::state
