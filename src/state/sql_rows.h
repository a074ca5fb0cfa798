// What the SQL store's files share (sql_store.cc: the records, Load, group commit;
// sql_store_measures.cc: the usage and powered-spell rows beside them): a row's checks
// and the transactions that run again after a lost connection. Internal to state/.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

#include "core/status.h"
#include "state/db.h"

namespace hachi::state::sql {

// Checks column `sum` (at `sum_index`) of the current row against `key` and `record`.
Status CheckSum(Db* db, const Stmt& stmt, int sum_index, std::string_view table,
                std::string_view key, std::string_view record);
// `s` about row `key` of `table`, naming the file: kInvalidArgument stays so (a row
// this binary refuses), anything else is kInternal.
Status RowError(Db* db, std::string_view table, std::string_view key, const Status& s);

// A connection lost before COMMIT (PostgreSQL's): nothing happened and the Db has a new
// one, so the same work runs again, a bounded number of times.
constexpr int kTries = 3;

// `body` in one write transaction of its own; again after a connection lost before its
// COMMIT. `transactions`: the store's counter.
template <typename F>
Status WriteTxn(Db* db, std::atomic<int64_t>* transactions, F body) {
  Status s;
  for (int i = 0; i < kTries; ++i) {
    Txn txn(db);
    transactions->fetch_add(1, std::memory_order_relaxed);
    s = txn.Begin();
    if (s.ok()) s = body();
    if (s.ok()) s = txn.Commit();
    if (s.ok() || !db->MayRetry()) return s;
  }
  return s;
}

// `read` again after a connection lost (PostgreSQL's restart, a switchover).
template <typename T, typename F>
Result<T> Reading(Db* db, F read) {
  Result<T> r = read();
  for (int i = 1; i < kTries && !r.ok() && db->MayRetryRead(); ++i) r = read();
  return r;
}

}  // namespace hachi::state::sql
