#include "state/db.h"

namespace hachi::state {

Result<int64_t> Db::QueryInt(std::string_view sql) {
  Result<Stmt> stmt = Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return Internal(path() + ": " + std::string(sql) + ": no row");
  return stmt->ColumnInt(0);
}

Txn::~Txn() { Rollback(); }

Status Txn::Begin() {
  HACHI_RETURN_IF_ERROR(kind_ == Kind::kWrite ? db_->BeginWrite() : db_->BeginRead());
  open_ = true;
  return Status::Ok();
}

Status Txn::Commit() {
  Status s = db_->CommitTxn();
  // A failed COMMIT may leave the transaction open (busy) or rolled back (I/O error);
  // the destructor or Rollback() cleans up either way.
  if (s.ok()) open_ = false;
  return s;
}

void Txn::Rollback() {
  if (open_ && db_->InTransaction()) db_->RollbackTxn();
  open_ = false;
}

}  // namespace hachi::state
