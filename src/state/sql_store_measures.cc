// SqlStore's measurements beside the records (sql_store.h): each run's usage and each
// burst node's powered spells, written in batches outside the edits' group commit.
#include <string>
#include <vector>

#include "state/db.h"
#include "state/power_spells.h"
#include "state/sql_rows.h"
#include "state/sql_store.h"
#include "state/usage_json.h"

namespace hachi::state {

using sql::CheckSum;
using sql::Reading;
using sql::RowError;
using sql::WriteTxn;

Status SqlStore::SaveUsage(const std::vector<JobUsage>& usage) {
  if (usage.empty()) return Status::Ok();
  MutexLock lock(&db_mu_);
  Db* db = db_.get();
  return WriteTxn(db, &transactions_, [db, &usage]() -> Status {
    for (const JobUsage& u : usage) {
      Result<Stmt> stmt = db->Prepare(
          "INSERT INTO usage (job, job_start, record, sum) VALUES (?1, ?2, ?3, ?4) "
          "ON CONFLICT (job, job_start) DO UPDATE SET record = excluded.record, "
          "sum = excluded.sum");
      if (!stmt.ok()) return stmt.status();
      const std::string record = UsageToJson(u);
      const std::string key = std::to_string(u.job) + "@" + std::to_string(u.start_time);
      stmt->Bind(1, u.job)
          .Bind(2, u.start_time)
          .Bind(3, record)
          .Bind(4, RowSum(key, record));
      HACHI_RETURN_IF_ERROR(stmt->Run());
    }
    return Status::Ok();
  });
}

Result<std::vector<JobUsage>> SqlStore::LoadUsage(JobId job) {
  MutexLock lock(&db_mu_);
  Db* db = db_.get();
  return Reading<std::vector<JobUsage>>(db, [db, job]() -> Result<std::vector<JobUsage>> {
    Result<Stmt> stmt = db->Prepare(
        "SELECT job_start, record, sum FROM usage WHERE job = ?1 ORDER BY job_start");
    if (!stmt.ok()) return stmt.status();
    stmt->Bind(1, job);
    std::vector<JobUsage> out;
    for (;;) {
      Result<bool> row = stmt->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      const std::string key =
          std::to_string(job) + "@" + std::to_string(stmt->ColumnInt(0));
      const std::string record = stmt->ColumnText(1);
      HACHI_RETURN_IF_ERROR(CheckSum(db, *stmt, 2, "usage", key, record));
      Result<JobUsage> u = UsageFromJson(record);
      if (!u.ok()) return RowError(db, "usage", key, u.status());
      out.push_back(std::move(*u));
    }
    return out;
  });
}

Status SqlStore::SavePowerSpells(const std::vector<PowerSpell>& spells) {
  if (spells.empty()) return Status::Ok();
  MutexLock lock(&db_mu_);
  Db* db = db_.get();
  return WriteTxn(db, &transactions_, [db, &spells]() -> Status {
    for (const PowerSpell& p : spells) {
      Result<Stmt> stmt = db->Prepare(
          "INSERT INTO power (node, since, until, open, record, sum) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (node, since) DO UPDATE SET "
          "until = excluded.until, open = excluded.open, record = excluded.record, "
          "sum = excluded.sum");
      if (!stmt.ok()) return stmt.status();
      const std::string record = PowerSpellToJson(p);
      stmt->Bind(1, std::string_view(p.node))
          .Bind(2, p.since)
          .Bind(3, p.until)
          .Bind(4, int64_t{p.open ? 1 : 0})
          .Bind(5, record)
          .Bind(6, RowSum(PowerSpellKey(p), record));
      HACHI_RETURN_IF_ERROR(stmt->Run());
    }
    return Status::Ok();
  });
}

Result<std::vector<PowerSpell>> SqlStore::LoadPowerSpells(Time from, Time to) {
  MutexLock lock(&db_mu_);
  Db* db = db_.get();
  return Reading<std::vector<PowerSpell>>(
      db, [db, from, to]() -> Result<std::vector<PowerSpell>> {
        Result<Stmt> stmt = db->Prepare(
            "SELECT node, since, record, sum FROM power WHERE since < ?2 AND "
            "(until > ?1 OR open = 1) ORDER BY since, node");
        if (!stmt.ok()) return stmt.status();
        stmt->Bind(1, from).Bind(2, to);
        std::vector<PowerSpell> out;
        for (;;) {
          Result<bool> row = stmt->Step();
          if (!row.ok()) return row.status();
          if (!*row) break;
          const std::string key =
              stmt->ColumnText(0) + "@" + std::to_string(stmt->ColumnInt(1));
          const std::string record = stmt->ColumnText(2);
          HACHI_RETURN_IF_ERROR(CheckSum(db, *stmt, 3, "power", key, record));
          Result<PowerSpell> p = PowerSpellFromJson(record);
          if (!p.ok()) return RowError(db, "power", key, p.status());
          // The key's columns are the record's own (the checksum covers the key the
          // columns make, the record what it says).
          if (PowerSpellKey(*p) != key) {
            return RowError(db, "power", key,
                            InvalidArgument("the record says " + PowerSpellKey(*p)));
          }
          out.push_back(std::move(*p));
        }
        return out;
      });
}

}  // namespace hachi::state
