#include "state/db.h"

#include <sqlite3.h>

#include <cerrno>
#include <utility>

#include "state/store.h"

namespace hachi::state {

// ---- Stmt ----

Stmt::Stmt(Stmt&& other) noexcept
    : db_(other.db_),
      stmt_(std::exchange(other.stmt_, nullptr)),
      bind_rc_(other.bind_rc_) {}

Stmt::~Stmt() {
  if (stmt_ != nullptr) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
}

Stmt& Stmt::Bind(int index, int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

Stmt& Stmt::Bind(int index, std::string_view text) {
  const int rc = sqlite3_bind_text64(stmt_, index, text.data(), text.size(),
                                     SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

Stmt& Stmt::BindNull(int index) {
  const int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

Result<bool> Stmt::Step() {
  if (bind_rc_ != SQLITE_OK) return db_->Error(bind_rc_, sqlite3_sql(stmt_));
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->Error(rc, sqlite3_sql(stmt_));
}

Status Stmt::Run() {
  Result<bool> row = Step();
  if (!row.ok()) return row.status();
  return Status::Ok();
}

int64_t Stmt::ColumnInt(int index) const { return sqlite3_column_int64(stmt_, index); }

std::string Stmt::ColumnText(int index) const {
  const unsigned char* text = sqlite3_column_text(stmt_, index);
  const int size = sqlite3_column_bytes(stmt_, index);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(size));
}

bool Stmt::ColumnIsNull(int index) const {
  return sqlite3_column_type(stmt_, index) == SQLITE_NULL;
}

// ---- Db ----

Result<std::unique_ptr<Db>> Db::Open(const std::string& path, int busy_timeout_ms) {
  sqlite3* raw = nullptr;
  // NOMUTEX: the store serialises access itself (one thread at a time per Db).
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close_v2(raw);
    return Unavailable(path + ": cannot open: " + msg);
  }
  std::unique_ptr<Db> db(new Db(raw, path));
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, busy_timeout_ms);
  // WAL: readers never block the writer, and a commit is one append + fsync.
  Result<bool> wal = [&]() -> Result<bool> {
    Result<Stmt> stmt = db->Prepare("PRAGMA journal_mode=WAL");
    if (!stmt.ok()) return stmt.status();
    Result<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    return *row && stmt->ColumnText(0) == "wal";
  }();
  if (!wal.ok()) return wal.status();
  if (!*wal) return Unavailable(path + ": cannot switch to WAL journal mode");
  return db;
}

Db::~Db() {
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  sqlite3_close_v2(db_);
}

Status Db::Exec(std::string_view sql) {
  char* err = nullptr;
  const std::string text(sql);
  const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return Status::Ok();
  std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  Status s = Error(rc, text);
  return Status(s.code(), path_ + ": " + text + ": " + msg);
}

Result<Stmt> Db::Prepare(std::string_view sql) {
  std::string key(sql);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    sqlite3_stmt* stmt = nullptr;
    const int rc = sqlite3_prepare_v3(db_, key.data(), static_cast<int>(key.size()),
                                      SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) return Error(rc, key);
    it = cache_.emplace(std::move(key), stmt).first;
  }
  return Stmt(this, it->second);
}

Result<int64_t> Db::QueryInt(std::string_view sql) {
  Result<Stmt> stmt = Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return Internal(path_ + ": " + std::string(sql) + ": no row");
  return stmt->ColumnInt(0);
}

bool Db::InTransaction() const { return sqlite3_get_autocommit(db_) == 0; }

Status Db::Error(int rc, std::string_view what) const {
  std::string msg = path_ + ": " + std::string(what) + ": " + sqlite3_errmsg(db_);
  // SQLite says SQLITE_FULL for a write's ENOSPC but only "disk I/O error" for an
  // fsync's or the WAL index's: the cause is named so that IsNoSpace (store.h) sees it.
  if ((rc & 0xff) == SQLITE_IOERR && sqlite3_system_errno(db_) == ENOSPC) {
    msg += std::string(" (") + std::string(kNoSpaceLeft) + ")";
  }
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_NOMEM:
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
      return Unavailable(std::move(msg));
    default:
      return Internal(std::move(msg));
  }
}

// ---- Txn ----

Txn::~Txn() { Rollback(); }

Status Txn::Begin() {
  HACHI_RETURN_IF_ERROR(db_->Exec("BEGIN IMMEDIATE"));
  open_ = true;
  return Status::Ok();
}

Status Txn::Commit() {
  Status s = db_->Exec("COMMIT");
  // A failed COMMIT may leave the transaction open (busy) or rolled back (I/O error);
  // the destructor or Rollback() cleans up either way.
  if (s.ok()) open_ = false;
  return s;
}

void Txn::Rollback() {
  if (open_ && db_->InTransaction()) {
    // Cannot usefully fail: if ROLLBACK errs the connection is unusable anyway and the
    // next BEGIN reports it.
    (void)db_->Exec("ROLLBACK");
  }
  open_ = false;
}

}  // namespace hachi::state
