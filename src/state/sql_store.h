// SqlStore: the Store (store.h) on a SQL database — SQLite's file or PostgreSQL — through
// the SQL layer of state/db.h, so the two engines share one implementation of the
// contract. Each engine's Open (sqlite_store.h, pg_store.cc) makes or checks its layout
// and hands the connection here.
//
// Layout (the same tables on both engines; types are each engine's):
//   jobs(id PRIMARY KEY, state, record, payload, sum)
//                                           record: EncodeJobRow; payload: the payloads
//                                           row of an array task (NULL: inline)
//   nodes(name PRIMARY KEY, record, sum)    record: EncodeNodeRow
//   tokens(id PRIMARY KEY, record, sum)     record: EncodeTokenRow
//   payloads(id PRIMARY KEY, record, sum)   an array's script, environment and argv,
//                                           once, keyed by the array's job id
//   steps(job, job_start, step, record, sum, PRIMARY KEY (job, job_start, step))
//                                           record: EncodeStepRow; job steps, by run
//                                           (job_start: its start_time)
//   usage(job, job_start, record, sum, PRIMARY KEY (job, job_start))
//   power(node, since, until, open, record, sum, PRIMARY KEY (node, since))
//                                           burst nodes' powered spells
//                                           (power_spells.h); until and open repeat
//                                           the record's, for the window's query
//   meta(key PRIMARY KEY, value)            'last_job_id', 'min_reader_schema', ...
// `sum`: each row's checksum over its key and record (RowSum), checked by Load: a row
// edited outside Hachi is refused by name. The records are the store's own JSON, each
// row versioned (state/row_codec.h).
//
// Group commit: a Commit caller that finds no transaction being written becomes the
// leader; it takes every batch queued so far (its own included), writes them in one
// write transaction, each batch inside a savepoint, and hands each caller its own
// status. Callers that arrive meanwhile queue for the next group. A batch whose edit is
// refused (CheckEdit) is rolled back to its savepoint alone; if the group's transaction
// itself fails (disk full, I/O error, busy, a lost connection), every batch is retried
// in a transaction of its own, so one bad batch cannot fail the others — unless the
// group's COMMIT was sent and its outcome could not be learned (Db::OutcomeUnknown):
// then each caller gets that error, since its batch may be stored. A transaction (or a
// read) that lost its connection before COMMIT runs again once the Db has a new one
// (Db::MayRetry, Db::MayRetryRead).
//
// Thread-safety: Load, Commit and stats may be called from any thread at any time.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/mutex.h"
#include "state/store.h"

namespace hachi::state {

class Db;

// A row's checksum (the `sum` column): 64-bit FNV-1a over its key and its record, so a
// record edited, or moved to another key, outside Hachi is found at the next start. Not
// a signature: whoever may write the database may compute it too (docs/storage.md).
int64_t RowSum(std::string_view key, std::string_view record);
// A steps row's key as its checksum covers it and errors name it: "12.3@1700000100"
// (step 3 of job 12's run that started then).
std::string StepRowKey(const StepKey& k);

// The payload rows read so far, by id: each array's payload once, shared by its tasks.
struct PayloadCache {
  std::map<JobId, std::shared_ptr<const JobPayload>>
      rows;  // as the payloads rows hold them
  // Joined with the argv that tasks' rows from before jobs version 8 hold themselves
  // (row_codec.h): the same for every task of an array, so shared too.
  std::map<JobId, std::shared_ptr<const JobPayload>> joined;
  void clear() {
    rows.clear();
    joined.clear();
  }
};
// Reads rows into *image, each checked (checksum, key) as Load checks it: every row when
// `since_tx` < 0; otherwise only the rows whose `tx` column (PostgreSQL's layout 2: the
// id of the transaction that last wrote the row) is at least `since_tx`, replacing what
// the image holds for their keys. In the caller's read transaction. Returns how many
// rows it read.
Result<int64_t> ReadImageRows(Db* db, int64_t since_tx, StateImage* image,
                              PayloadCache* payloads);

class SqlStore final : public Store {
 public:
  // `file`: what path() reports ("" for a database that is not a file).
  // `group_window_us`: SqliteOptions::group_window_us.
  // `first_load`: PostgresOptions::first_load.
  SqlStore(std::unique_ptr<Db> db, std::string file, int group_window_us = 0,
           std::function<Result<StateImage>()> first_load = {},
           std::function<void(const std::string&)> warn = {});
  ~SqlStore() override;

  Result<StateImage> Load() override EXCLUDES(db_mu_);
  Result<std::shared_ptr<const JobPayload>> LoadPayload(JobId id) override
      EXCLUDES(db_mu_);
  Status Commit(const std::vector<Edit>& edits) override EXCLUDES(mu_, db_mu_);
  Status SaveUsage(const std::vector<JobUsage>& usage) override EXCLUDES(db_mu_);
  Result<std::vector<JobUsage>> LoadUsage(JobId job) override EXCLUDES(db_mu_);
  Status SavePowerSpells(const std::vector<PowerSpell>& spells) override EXCLUDES(db_mu_);
  Result<std::vector<PowerSpell>> LoadPowerSpells(Time from, Time to) override
      EXCLUDES(db_mu_);
  StoreStats stats() const override;
  std::string path() const override { return file_; }

  // SQLite: caps the database at `pages` pages (a full disk for tests); 0 lifts the
  // cap. The cap cannot go below the current size (SQLite ignores that).
  Status SetMaxPageCountForTesting(int64_t pages) EXCLUDES(db_mu_);
  // How many Commit callers wait for the next group now: a test that orders callers
  // around a group waits for this instead of sleeping.
  size_t QueuedForTesting() EXCLUDES(mu_);

 private:
  struct Waiter;

  // Writes one group; sets each waiter's status. Called by the leader only.
  void WriteGroup(const std::vector<Waiter*>& group) EXCLUDES(db_mu_);

  // Constant after construction.
  const std::string file_;
  const int group_window_us_;

  const std::function<void(const std::string&)> warn_;

  // Held by the leader writing, or a read (Load).
  Mutex db_mu_;
  std::unique_ptr<Db> db_ GUARDED_BY(db_mu_);
  std::function<Result<StateImage>()> first_load_ GUARDED_BY(db_mu_);  // until used

  // The queue of commits waiting for the next group. Never held across a write.
  Mutex mu_;
  CondVar cv_{&mu_};
  std::vector<Waiter*> queue_ GUARDED_BY(mu_);
  bool writing_ GUARDED_BY(mu_) = false;  // a leader is writing a group

  std::atomic<int64_t> commits_{0};
  std::atomic<int64_t> transactions_{0};
};

}  // namespace hachi::state
