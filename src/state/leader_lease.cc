#include "state/leader_lease.h"

#include <utility>

#include "state/pg_db.h"
#include "state/pg_store.h"

namespace hachi::state {
namespace {

// How long the lease has left, in ms, by the database's clock.
constexpr const char* kRemaining =
    "(extract(epoch FROM (expires_at - clock_timestamp())) * 1000)::bigint";

// Runs `op`, one statement; once more on a new connection when the old one was lost
// (a restart, a switchover: the statement's answer was lost with it, so each statement
// is one that may run twice).
template <typename T, typename F>
Result<T> OnceMore(PgDb* db, F op) {
  HACHI_RETURN_IF_ERROR(db->EnsureConnected());
  Result<T> r = op();
  if (!r.ok() && db->MayRetryRead()) r = op();
  return r;
}

}  // namespace

Result<std::unique_ptr<LeaderLease>> LeaderLease::Open(const std::string& conninfo,
                                                       std::string holder) {
  PgDbOptions o;
  o.conninfo = conninfo;
  o.reconnect_ms = 0;  // one try per call: the election's round is the retry
  o.statement_timeout_ms = 2000;
  Result<std::unique_ptr<PgDb>> db = PgDb::Open(std::move(o));
  if (!db.ok()) return db.status();
  HACHI_RETURN_IF_ERROR(EnsurePostgresSchema(db->get()));
  return std::unique_ptr<LeaderLease>(new LeaderLease(std::move(*db), std::move(holder)));
}

LeaderLease::LeaderLease(std::unique_ptr<PgDb> db, std::string holder)
    : db_(std::move(db)), holder_(std::move(holder)) {}

LeaderLease::~LeaderLease() = default;

Status LeaderLease::SetStatementTimeout(int ms) {
  HACHI_RETURN_IF_ERROR(db_->EnsureConnected());
  return db_->SetStatementTimeout(ms);
}

Result<std::optional<int64_t>> LeaderLease::TryAcquire(const std::string& address,
                                                       int lease_ms,
                                                       LeaderInfo* current) {
  PgDb* db = db_.get();
  Result<std::optional<int64_t>> won =
      OnceMore<std::optional<int64_t>>(db, [&]() -> Result<std::optional<int64_t>> {
        Result<Stmt> take = db->Prepare(
            "UPDATE hachi_leader SET epoch = epoch + 1, holder = ?1, address = ?2, "
            "expires_at = clock_timestamp() + ?3::bigint * interval '1 millisecond' "
            "WHERE id = 1 AND expires_at <= clock_timestamp() RETURNING epoch");
        if (!take.ok()) return take.status();
        take->Bind(1, holder_).Bind(2, address).Bind(3, int64_t{lease_ms});
        Result<bool> row = take->Step();
        if (!row.ok()) return row.status();
        if (!*row) return std::optional<int64_t>();
        return std::optional<int64_t>(take->ColumnInt(0));
      });
  if (!won.ok()) return won.status();
  if (won->has_value()) {
    *current = LeaderInfo{**won, holder_, address, lease_ms};
    return won;
  }
  Result<LeaderInfo> now = Current();
  if (!now.ok()) return now.status();
  *current = *now;
  // Ours already: a first try took it and its answer was lost with the connection.
  if (now->holder == holder_ && now->remaining_ms > 0) {
    return std::optional<int64_t>(now->epoch);
  }
  return std::optional<int64_t>();
}

Result<bool> LeaderLease::Renew(int64_t epoch, int lease_ms) {
  PgDb* db = db_.get();
  return OnceMore<bool>(db, [&]() -> Result<bool> {
    Result<Stmt> renew = db->Prepare(
        "UPDATE hachi_leader SET expires_at = clock_timestamp() + ?2::bigint * "
        "interval '1 millisecond' WHERE id = 1 AND epoch = ?1 AND "
        "expires_at > clock_timestamp() RETURNING epoch");
    if (!renew.ok()) return renew.status();
    renew->Bind(1, epoch).Bind(2, int64_t{lease_ms});
    return renew->Step();
  });
}

Result<LeaderInfo> LeaderLease::Current() {
  PgDb* db = db_.get();
  return OnceMore<LeaderInfo>(db, [&]() -> Result<LeaderInfo> {
    Result<Stmt> q = db->Prepare(std::string("SELECT epoch, holder, address, ") +
                                 kRemaining + " FROM hachi_leader WHERE id = 1");
    if (!q.ok()) return q.status();
    Result<bool> row = q->Step();
    if (!row.ok()) return row.status();
    if (!*row) return Internal(db->path() + ": the lease row hachi_leader is missing");
    return LeaderInfo{q->ColumnInt(0), q->ColumnText(1), q->ColumnText(2),
                      q->ColumnInt(3)};
  });
}

Status LeaderLease::Release(int64_t epoch) {
  PgDb* db = db_.get();
  Result<bool> done = OnceMore<bool>(db, [&]() -> Result<bool> {
    Result<Stmt> q = db->Prepare(
        "UPDATE hachi_leader SET expires_at = clock_timestamp() WHERE id = 1 AND "
        "epoch = ?1");
    if (!q.ok()) return q.status();
    q->Bind(1, epoch);
    HACHI_RETURN_IF_ERROR(q->Run());
    return true;
  });
  return done.ok() ? Status::Ok() : done.status();
}

}  // namespace hachi::state
