#include "state/leader_lease.h"

#include <utility>

#include "state/pg_db.h"
#include "state/pg_store.h"

namespace hachi::state {
namespace {

// How long the lease has left, in ms, by the database's clock.
constexpr const char* kRemaining =
    "(extract(epoch FROM (expires_at - clock_timestamp())) * 1000)::bigint";

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
  return db_->Exec("SET statement_timeout = " + std::to_string(ms));
}

Result<std::optional<int64_t>> LeaderLease::TryAcquire(const std::string& address,
                                                       int lease_ms,
                                                       LeaderInfo* current) {
  HACHI_RETURN_IF_ERROR(db_->EnsureConnected());
  Result<Stmt> take = db_->Prepare(
      "UPDATE hachi_leader SET epoch = epoch + 1, holder = ?1, address = ?2, "
      "expires_at = clock_timestamp() + ?3::bigint * interval '1 millisecond' "
      "WHERE id = 1 AND expires_at <= clock_timestamp() RETURNING epoch");
  if (!take.ok()) return take.status();
  take->Bind(1, holder_).Bind(2, address).Bind(3, int64_t{lease_ms});
  Result<bool> won = take->Step();
  if (!won.ok()) return won.status();
  if (*won) {
    const int64_t epoch = take->ColumnInt(0);
    *current = LeaderInfo{epoch, holder_, address, lease_ms};
    return std::optional<int64_t>(epoch);
  }
  Result<LeaderInfo> now = Current();
  if (!now.ok()) return now.status();
  *current = *now;
  return std::optional<int64_t>();
}

Result<bool> LeaderLease::Renew(int64_t epoch, int lease_ms) {
  HACHI_RETURN_IF_ERROR(db_->EnsureConnected());
  Result<Stmt> renew = db_->Prepare(
      "UPDATE hachi_leader SET expires_at = clock_timestamp() + ?2::bigint * interval "
      "'1 millisecond' WHERE id = 1 AND epoch = ?1 AND expires_at > clock_timestamp() "
      "RETURNING epoch");
  if (!renew.ok()) return renew.status();
  renew->Bind(1, epoch).Bind(2, int64_t{lease_ms});
  return renew->Step();
}

Result<LeaderInfo> LeaderLease::Current() {
  HACHI_RETURN_IF_ERROR(db_->EnsureConnected());
  Result<Stmt> q = db_->Prepare(std::string("SELECT epoch, holder, address, ") +
                                kRemaining + " FROM hachi_leader WHERE id = 1");
  if (!q.ok()) return q.status();
  Result<bool> row = q->Step();
  if (!row.ok()) return row.status();
  if (!*row) return Internal(db_->path() + ": the lease row hachi_leader is missing");
  return LeaderInfo{q->ColumnInt(0), q->ColumnText(1), q->ColumnText(2), q->ColumnInt(3)};
}

Status LeaderLease::Release(int64_t epoch) {
  HACHI_RETURN_IF_ERROR(db_->EnsureConnected());
  Result<Stmt> q = db_->Prepare(
      "UPDATE hachi_leader SET expires_at = clock_timestamp() WHERE id = 1 AND epoch = "
      "?1");
  if (!q.ok()) return q.status();
  q->Bind(1, epoch);
  return q->Run();
}

}  // namespace hachi::state
