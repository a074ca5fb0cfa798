// PgFollower: a standby controller's copy of the state on PostgreSQL, kept up to date
// while it waits, so that a takeover reads only what changed since it last looked
// instead of every row (docs/ha.md, "A warm standby").
//
// How it knows what changed (the store's layout 2, state/pg_store.h): a trigger writes
// into each row of jobs, nodes, tokens and steps the id of the transaction that last
// wrote it (`tx`), and a deletion leaves a note in hachi_gone. Each catch-up runs in one
// REPEATABLE READ snapshot S and reads the rows whose tx is at least the oldest
// transaction that was still running at the previous snapshot (its xmin): every
// transaction S did not see was running at S or began after it, so its id is at least
// that xmin, and nothing committed later is missed, whatever order transactions commit
// in. Rows read again (seen already) are replaced by themselves.
//
// At a takeover the new leader holds the lease; the old leader's transactions have
// either committed (the fence's row lock orders them before the takeover) or will be
// refused: the catch-up Take() makes then is complete.
//
// Every row read is checked as Load checks it (checksums, keys).
//
// Thread-safety: every method may be called from any thread; calls are serialised.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/mutex.h"
#include "core/status.h"
#include "state/sql_store.h"
#include "state/store.h"

namespace hachi::state {

class PgDb;

struct FollowStats {
  int64_t catch_ups = 0;   // successful catch-ups (the first reads every row)
  int64_t full_reads = 0;  // of them, how many read every row
  int64_t rows_last = 0;   // rows the last catch-up read (deletions included)
  int64_t jobs = 0;        // jobs the image holds now
};

class PgFollower {
 public:
  // Its own connection (reads only); creates or upgrades the layout like the store.
  static Result<std::unique_ptr<PgFollower>> Open(const std::string& conninfo);
  ~PgFollower();
  PgFollower(const PgFollower&) = delete;
  PgFollower& operator=(const PgFollower&) = delete;

  // Brings the image up to date: every row the first time (or after Take), then only
  // the rows written since the last catch-up. On an error the image is dropped (the
  // next call reads every row again).
  Status CatchUp() EXCLUDES(mu_);

  // The image, brought up to date, for a new term's store (PostgresOptions::first_load);
  // the follower starts again from nothing.
  Result<StateImage> Take() EXCLUDES(mu_);

  FollowStats stats() const EXCLUDES(mu_);

 private:
  explicit PgFollower(std::unique_ptr<PgDb> db);
  Status CatchUpLocked() REQUIRES(mu_);
  Status ReadChanges() REQUIRES(mu_);  // one catch-up; on an error, a half-updated image

  mutable Mutex mu_;
  std::unique_ptr<PgDb> db_ GUARDED_BY(mu_);
  bool have_ GUARDED_BY(mu_) = false;  // image_ holds the state as of since_
  int64_t since_ GUARDED_BY(mu_) = 0;  // the last snapshot's xmin
  StateImage image_ GUARDED_BY(mu_);
  PayloadCache payloads_ GUARDED_BY(mu_);
  FollowStats stats_ GUARDED_BY(mu_);
};

}  // namespace hachi::state
