// LeaderLease: the lease row of several controllers on one PostgreSQL database
// (docs/ha.md): hachi_leader(epoch, holder, address, expires_at, writes), one row. All
// its times are the database's (clock_timestamp()), never a controller's, so the
// controllers' clocks cannot matter. Each operation is one statement, on a connection
// of its own (a renewal must not wait behind the store's long commit), reconnected when
// lost; the election itself is server/leadership.h's.
//
// Thread-compatible: one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"

namespace hachi::state {

class PgDb;

struct LeaderInfo {
  int64_t epoch = 0;
  std::string holder;        // who holds or last held it ("" before anyone)
  std::string address;       // the URL clients are sent to
  int64_t remaining_ms = 0;  // by the database's clock; <= 0: lapsed
};

class LeaderLease {
 public:
  // `holder`: this process, unique (host:pid:random). Creates the tables when missing.
  static Result<std::unique_ptr<LeaderLease>> Open(const std::string& conninfo,
                                                   std::string holder);
  ~LeaderLease();
  LeaderLease(const LeaderLease&) = delete;
  LeaderLease& operator=(const LeaderLease&) = delete;

  // Takes the lease when it has lapsed (or was never held): epoch + 1, this holder and
  // address, expires = now + lease_ms. The new epoch, or nullopt while another's lease
  // runs (*current says whose).
  Result<std::optional<int64_t>> TryAcquire(const std::string& address, int lease_ms,
                                            LeaderInfo* current);
  // Extends `epoch`'s lease to now + lease_ms: false when the row holds another epoch or
  // the lease had already lapsed (lost: step down).
  Result<bool> Renew(int64_t epoch, int lease_ms);
  Result<LeaderInfo> Current();
  // Lapses `epoch`'s lease now (a clean stop: a standby takes over at its next try).
  Status Release(int64_t epoch);
  // Bounds every statement of this connection, so a renewal never hangs past the
  // lease; default 2000.
  Status SetStatementTimeout(int ms);
  const std::string& holder() const { return holder_; }

 private:
  LeaderLease(std::unique_ptr<PgDb> db, std::string holder);
  // Runs one statement returning at most one row of `columns` integers/texts.
  const std::unique_ptr<PgDb> db_;
  const std::string holder_;
};

}  // namespace hachi::state
