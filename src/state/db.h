// A thin RAII layer over the SQLite C API for the state store (notes: raw sqlite3
// behind an in-house wrapper): Db owns a connection (WAL, busy timeout) and a cache of
// prepared statements; Stmt is one borrowed cached statement with bound parameters;
// Txn is a transaction rolled back unless committed. SQLite's error codes become
// Status: busy, locked, disk full and I/O errors are kUnavailable (the caller may try
// again later), everything else kInternal; messages carry SQLite's own text.
//
// Thread-compatible: one thread at a time per Db (the store serialises its callers).
// A Stmt borrows from its Db's cache: at most one live Stmt per SQL text at a time,
// and no Stmt outlives its Db.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "core/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace hachi::state {

class Db;

class Stmt {
 public:
  Stmt(Stmt&& other) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt& operator=(Stmt&&) = delete;
  ~Stmt();  // resets the statement and clears its bindings for the next borrower

  // Parameters are numbered from 1, as in SQL's ?1, ?2. A binding error is reported
  // by the next Step().
  Stmt& Bind(int index, int64_t value);
  Stmt& Bind(int index, std::string_view text);  // copied
  Stmt& BindNull(int index);

  // Advances: true when a row is ready, false when done.
  Result<bool> Step();
  // Runs a statement that returns no row (INSERT, UPDATE, ...).
  Status Run();

  // Columns of the current row, numbered from 0.
  int64_t ColumnInt(int index) const;
  std::string ColumnText(int index) const;
  bool ColumnIsNull(int index) const;

 private:
  friend class Db;
  Stmt(Db* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}

  Db* db_;
  sqlite3_stmt* stmt_;
  int bind_rc_ = 0;  // first failing sqlite3_bind_* code, 0 (SQLITE_OK) if none
};

class Db {
 public:
  // Opens (creating if needed) the database at `path`, sets the busy timeout, turns
  // on WAL and foreign keys. kUnavailable when the file cannot be opened.
  static Result<std::unique_ptr<Db>> Open(const std::string& path, int busy_timeout_ms);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Runs one or more statements without parameters or results.
  Status Exec(std::string_view sql);
  // The cached prepared statement for `sql` (prepared on first use).
  Result<Stmt> Prepare(std::string_view sql);
  // Runs a query that returns one integer (PRAGMA user_version, SELECT count(*), ...).
  Result<int64_t> QueryInt(std::string_view sql);

  // True while a transaction is open (SQLite may roll one back by itself on disk full
  // or I/O errors).
  bool InTransaction() const;
  const std::string& path() const { return path_; }
  sqlite3* raw() const { return db_; }

  // The Status for SQLite result code `rc`, naming what was being done.
  Status Error(int rc, std::string_view what) const;

 private:
  Db(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_;
  std::string path_;
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
};

// A transaction: Begin, then Commit; destroyed uncommitted it rolls back.
class Txn {
 public:
  explicit Txn(Db* db) : db_(db) {}
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;
  ~Txn();

  // BEGIN IMMEDIATE: takes the write lock now, so a busy database fails here (after the
  // busy timeout) rather than halfway through.
  Status Begin();
  Status Commit();
  // Rolls back now; a no-op when SQLite already did or nothing is open.
  void Rollback();

 private:
  Db* db_;
  bool open_ = false;
};

}  // namespace hachi::state
