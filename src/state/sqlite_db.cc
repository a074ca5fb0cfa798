// Db over SQLite's C API: one connection, WAL, a cache of prepared statements.
#include <sqlite3.h>

#include <cerrno>
#include <unordered_map>
#include <utility>

#include "state/db.h"
#include "state/store.h"

namespace hachi::state {
namespace {

class SqliteDb;

// A cached statement, borrowed: reset and cleared for the next borrower when done.
class SqliteStmt final : public Stmt::Impl {
 public:
  SqliteStmt(const SqliteDb* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~SqliteStmt() override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  void Bind(int index, int64_t value) override {
    Keep(sqlite3_bind_int64(stmt_, index, value));
  }
  void Bind(int index, std::string_view text) override {
    Keep(sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT,
                             SQLITE_UTF8));
  }
  void BindNull(int index) override { Keep(sqlite3_bind_null(stmt_, index)); }
  Result<bool> Step() override;
  int64_t ColumnInt(int index) const override {
    return sqlite3_column_int64(stmt_, index);
  }
  std::string ColumnText(int index) const override {
    const unsigned char* text = sqlite3_column_text(stmt_, index);
    const int size = sqlite3_column_bytes(stmt_, index);
    if (text == nullptr) return "";
    return std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(size));
  }
  bool ColumnIsNull(int index) const override {
    return sqlite3_column_type(stmt_, index) == SQLITE_NULL;
  }

 private:
  void Keep(int rc) {
    if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  }
  const SqliteDb* db_;
  sqlite3_stmt* stmt_;
  int bind_rc_ = SQLITE_OK;  // the first failing sqlite3_bind_* code
};

class SqliteDb final : public Db {
 public:
  SqliteDb(sqlite3* db, std::string path) : Db(std::move(path)), db_(db) {}
  ~SqliteDb() override {
    for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
    sqlite3_close_v2(db_);
  }

  Status Exec(std::string_view sql) override {
    char* err = nullptr;
    const std::string text(sql);
    const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
    if (rc == SQLITE_OK) return Status::Ok();
    std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    Status s = Error(rc, text);
    return Status(s.code(), path() + ": " + text + ": " + msg);
  }

  Result<Stmt> Prepare(std::string_view sql) override {
    std::string key(sql);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      sqlite3_stmt* stmt = nullptr;
      const int rc = sqlite3_prepare_v3(db_, key.data(), static_cast<int>(key.size()),
                                        SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
      if (rc != SQLITE_OK) return Error(rc, key);
      it = cache_.emplace(std::move(key), stmt).first;
    }
    return Stmt(std::make_unique<SqliteStmt>(this, it->second));
  }

  bool InTransaction() const override { return sqlite3_get_autocommit(db_) == 0; }
  Status BeginWrite() override { return Exec("BEGIN IMMEDIATE"); }
  // WAL: a deferred transaction reads one snapshot and never blocks the writer.
  Status BeginRead() override { return Exec("BEGIN"); }
  Status CommitTxn() override { return Exec("COMMIT"); }
  void RollbackTxn() override {
    // Cannot usefully fail: if ROLLBACK errs the connection is unusable anyway and the
    // next BEGIN reports it.
    (void)Exec("ROLLBACK");
  }

  // The Status for SQLite result code `rc`, naming what was being done.
  Status Error(int rc, std::string_view what) const {
    std::string msg = path() + ": " + std::string(what) + ": " + sqlite3_errmsg(db_);
    // SQLite says SQLITE_FULL for a write's ENOSPC but only "disk I/O error" for an
    // fsync's or the WAL index's: the cause is named so that IsNoSpace (store.h) sees
    // it.
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

 private:
  sqlite3* const db_;
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
};

Result<bool> SqliteStmt::Step() {
  if (bind_rc_ != SQLITE_OK) return db_->Error(bind_rc_, sqlite3_sql(stmt_));
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->Error(rc, sqlite3_sql(stmt_));
}

}  // namespace

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
  auto db = std::make_unique<SqliteDb>(raw, path);
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
  return std::unique_ptr<Db>(std::move(db));
}

}  // namespace hachi::state
