#include "state/pg_follow.h"

#include <cstdlib>
#include <utility>

#include "state/db.h"
#include "state/pg_db.h"
#include "state/pg_store.h"

namespace hachi::state {

Result<std::unique_ptr<PgFollower>> PgFollower::Open(const std::string& conninfo) {
  PgDbOptions o;
  o.conninfo = conninfo;
  Result<std::unique_ptr<PgDb>> db = PgDb::Open(std::move(o));
  if (!db.ok()) return db.status();
  HACHI_RETURN_IF_ERROR(EnsurePostgresSchema(db->get()));
  return std::unique_ptr<PgFollower>(new PgFollower(std::move(*db)));
}

PgFollower::PgFollower(std::unique_ptr<PgDb> db) : db_(std::move(db)) {}

PgFollower::~PgFollower() = default;

Status PgFollower::CatchUp() {
  MutexLock lock(&mu_);
  return CatchUpLocked();
}

Status PgFollower::CatchUpLocked() {
  Status s = ReadChanges();
  if (!s.ok()) {
    // Half an update is no image: start again from every row.
    have_ = false;
    image_ = StateImage{};
    payloads_.clear();
  }
  return s;
}

Status PgFollower::ReadChanges() {
  Db* db = db_.get();
  Txn txn(db, Txn::Kind::kRead);
  HACHI_RETURN_IF_ERROR(txn.Begin());
  // The snapshot's first statement fixes it; its xmin is where the next catch-up
  // starts.
  Result<int64_t> xmin =
      db->QueryInt("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint");
  if (!xmin.ok()) return xmin.status();
  int64_t rows = 0;
  if (!have_) {
    image_ = StateImage{};
    payloads_.clear();
  } else {
    // Deletions first: a key deleted and written again since is in its table now.
    Result<Stmt> gone = db->Prepare("SELECT tbl, key FROM hachi_gone WHERE tx >= ?1");
    if (!gone.ok()) return gone.status();
    gone->Bind(1, since_);
    for (;;) {
      Result<bool> row = gone->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      ++rows;
      const std::string table = gone->ColumnText(0);
      const std::string key = gone->ColumnText(1);
      if (table == "jobs") image_.jobs.erase(std::strtoll(key.c_str(), nullptr, 10));
      if (table == "nodes") image_.nodes.erase(key);
      if (table == "tokens") image_.tokens.erase(key);
    }
  }
  Result<int64_t> read = ReadImageRows(db, have_ ? since_ : -1, &image_, &payloads_);
  if (!read.ok()) return read.status();
  rows += *read;
  HACHI_RETURN_IF_ERROR(txn.Commit());
  if (!have_) ++stats_.full_reads;
  have_ = true;
  since_ = *xmin;
  ++stats_.catch_ups;
  stats_.rows_last = rows;
  stats_.jobs = static_cast<int64_t>(image_.jobs.size());
  return Status::Ok();
}

Result<StateImage> PgFollower::Take() {
  MutexLock lock(&mu_);
  HACHI_RETURN_IF_ERROR(CatchUpLocked());
  StateImage out = std::move(image_);
  image_ = StateImage{};
  payloads_.clear();
  have_ = false;
  return out;
}

FollowStats PgFollower::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

}  // namespace hachi::state
