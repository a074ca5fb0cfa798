// The SQL layer under the state store (notes: raw sqlite3 and libpq behind an in-house
// wrapper): Db is one connection to a database — SQLite's file (sqlite_db.cc) or a
// PostgreSQL server (pg_db.h) — Stmt one statement with bound parameters, Txn a
// transaction rolled back unless committed. The store's logic (sql_store.cc) is written
// once against these; what differs between the two engines stays behind them.
//
// SQL text uses SQLite's numbered parameters (?1, ?2, ...); PostgreSQL's Db rewrites them
// to $1, $2. Errors become Status: busy, locked, disk full, I/O errors, a lost
// connection are kUnavailable (the caller may try again later), everything else
// kInternal; messages carry the engine's own text.
//
// Thread-compatible: one thread at a time per Db (the store serialises its callers).
// At most one live Stmt per SQL text at a time, and no Stmt outlives its Db.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "core/status.h"

namespace hachi::state {

class Stmt {
 public:
  // What each engine implements.
  class Impl {
   public:
    virtual ~Impl() = default;
    virtual void Bind(int index, int64_t value) = 0;
    virtual void Bind(int index, std::string_view text) = 0;
    virtual void BindNull(int index) = 0;
    virtual Result<bool> Step() = 0;
    virtual int64_t ColumnInt(int index) const = 0;
    virtual std::string ColumnText(int index) const = 0;
    virtual bool ColumnIsNull(int index) const = 0;
  };

  explicit Stmt(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Stmt(Stmt&& other) noexcept = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt& operator=(Stmt&&) = delete;
  ~Stmt() = default;  // SQLite's: resets the statement for the next borrower

  // Parameters are numbered from 1, as in SQL's ?1, ?2. A binding error is reported
  // by the next Step().
  Stmt& Bind(int index, int64_t value) {
    impl_->Bind(index, value);
    return *this;
  }
  Stmt& Bind(int index, std::string_view text) {  // copied
    impl_->Bind(index, text);
    return *this;
  }
  Stmt& BindNull(int index) {
    impl_->BindNull(index);
    return *this;
  }

  // Advances: true when a row is ready, false when done.
  Result<bool> Step() { return impl_->Step(); }
  // Runs a statement that returns no row (INSERT, UPDATE, ...).
  Status Run() {
    Result<bool> row = Step();
    return row.ok() ? Status::Ok() : row.status();
  }

  // Columns of the current row, numbered from 0.
  int64_t ColumnInt(int index) const { return impl_->ColumnInt(index); }
  std::string ColumnText(int index) const { return impl_->ColumnText(index); }
  bool ColumnIsNull(int index) const { return impl_->ColumnIsNull(index); }

 private:
  std::unique_ptr<Impl> impl_;
};

class Db {
 public:
  // Opens (creating if needed) the SQLite database at `path`, sets the busy timeout,
  // turns on WAL. kUnavailable when the file cannot be opened.
  static Result<std::unique_ptr<Db>> Open(const std::string& path, int busy_timeout_ms);

  virtual ~Db() = default;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Runs one or more statements without parameters or results.
  virtual Status Exec(std::string_view sql) = 0;
  // The statement for `sql` (SQLite's prepared once and cached).
  virtual Result<Stmt> Prepare(std::string_view sql) = 0;
  // Runs a query that returns one integer (PRAGMA user_version, SELECT count(*), ...).
  Result<int64_t> QueryInt(std::string_view sql);

  // True while a transaction is open (SQLite may roll one back by itself on disk full
  // or I/O errors).
  virtual bool InTransaction() const = 0;
  // The database, for messages: SQLite's file, PostgreSQL's host and database name.
  const std::string& path() const { return path_; }

  // Transactions (Txn calls these). A write transaction takes the write lock at once
  // (SQLite: BEGIN IMMEDIATE, so a busy database fails here rather than halfway), and
  // on a fenced PostgreSQL store first checks that this controller still leads.
  virtual Status BeginWrite() = 0;
  // A consistent read of every table (Load).
  virtual Status BeginRead() = 0;
  // Reports OK only when the transaction is durable; a commit whose outcome the
  // connection lost is resolved from the database, never guessed.
  virtual Status CommitTxn() = 0;
  virtual void RollbackTxn() = 0;
  // After a failed write transaction: whether it failed because the connection was
  // lost before COMMIT (nothing of it happened) and a new one is up, so the same
  // transaction may run again. False when the COMMIT's outcome is unknown: whatever
  // CommitTxn reported then, the transaction may have happened.
  virtual bool MayRetry() { return false; }
  // After a failed CommitTxn: true when whether the transaction committed is not known
  // (the connection went during COMMIT and the database could not be asked in time).
  // Its work must not run again: it may be stored already.
  virtual bool OutcomeUnknown() const { return false; }
  // After a failed read: whether the connection was lost and a new one is up, so the
  // read may run again.
  virtual bool MayRetryRead() { return false; }

 protected:
  explicit Db(std::string path) : path_(std::move(path)) {}

 private:
  const std::string path_;
};

// A transaction: Begin, then Commit; destroyed uncommitted it rolls back.
class Txn {
 public:
  enum class Kind { kWrite, kRead };
  explicit Txn(Db* db, Kind kind = Kind::kWrite) : db_(db), kind_(kind) {}
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;
  ~Txn();

  Status Begin();
  Status Commit();
  // Rolls back now; a no-op when the engine already did or nothing is open.
  void Rollback();

 private:
  Db* db_;
  Kind kind_;
  bool open_ = false;
};

}  // namespace hachi::state
