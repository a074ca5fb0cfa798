#include "state/sqlite_store.h"

#include <sys/stat.h>

#include <utility>

#include "state/db.h"
#include "state/sql_store.h"

namespace hachi::state {
namespace {

// The tables as a new database gets them. An older layout's tables are completed by
// kColumns and kSchemaTail (CREATE TABLE IF NOT EXISTS leaves an existing table alone).
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS jobs (
  id INTEGER PRIMARY KEY,
  state TEXT NOT NULL,
  record TEXT NOT NULL,
  payload INTEGER,
  sum INTEGER
) STRICT;
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state);
CREATE TABLE IF NOT EXISTS nodes (
  name TEXT PRIMARY KEY,
  record TEXT NOT NULL,
  sum INTEGER
) STRICT;
CREATE TABLE IF NOT EXISTS meta (
  key TEXT PRIMARY KEY,
  value ANY
) STRICT;
CREATE TABLE IF NOT EXISTS tokens (
  id TEXT PRIMARY KEY,
  record TEXT NOT NULL,
  sum INTEGER
) STRICT;
CREATE TABLE IF NOT EXISTS payloads (
  id INTEGER PRIMARY KEY,
  record TEXT NOT NULL,
  sum INTEGER
) STRICT;
CREATE TABLE IF NOT EXISTS steps (
  job INTEGER NOT NULL,
  job_start INTEGER NOT NULL,
  step INTEGER NOT NULL,
  record TEXT NOT NULL,
  sum INTEGER,
  PRIMARY KEY (job, job_start, step)
) STRICT;
CREATE TABLE IF NOT EXISTS usage (
  job INTEGER NOT NULL,
  job_start INTEGER NOT NULL,
  record TEXT NOT NULL,
  sum INTEGER,
  PRIMARY KEY (job, job_start)
) STRICT;
CREATE TABLE IF NOT EXISTS power (
  node TEXT NOT NULL,
  since INTEGER NOT NULL,
  until INTEGER NOT NULL,
  open INTEGER NOT NULL,
  record TEXT NOT NULL,
  sum INTEGER,
  PRIMARY KEY (node, since)
) STRICT;
CREATE INDEX IF NOT EXISTS power_by_until ON power(until);
)sql";

// Columns layout 4 added to tables of older layouts: {table, column}.
constexpr std::pair<const char*, const char*> kColumns[] = {
    {"jobs", "payload"}, {"jobs", "sum"}, {"nodes", "sum"}, {"tokens", "sum"}};

// min_reader_schema stays 4 at layouts 5, 6 and 7: they only add the steps, usage and
// power tables, which a layout-4 binary never reads; the other tables are layout 4's.
constexpr const char* kSchemaTail = R"sql(
CREATE INDEX IF NOT EXISTS jobs_by_payload ON jobs(payload) WHERE payload IS NOT NULL;
INSERT INTO meta (key, value) VALUES ('min_reader_schema', 4)
  ON CONFLICT (key) DO UPDATE SET value = excluded.value;
PRAGMA user_version = 7;
)sql";

// The tables whose rows carry a checksum: {table, the key's text as SQL}. A step's key
// is StepRowKey's text.
constexpr std::pair<const char*, const char*> kSummed[] = {
    {"jobs", "id"},
    {"nodes", "name"},
    {"tokens", "id"},
    {"payloads", "id"},
    {"steps", "job || '.' || step || '@' || job_start"},
    {"usage", "job || '@' || job_start"},
    {"power", "node || '@' || since"}};

Status Seal(Db* db, bool name_missing, std::vector<std::string>* resealed) {
  for (const auto& [table, key] : kSummed) {
    // Updated by rowid (every table has one): one b-tree step a row, not a scan.
    Result<Stmt> rows = db->Prepare(std::string("SELECT rowid, CAST(") + key +
                                    " AS TEXT), record, sum FROM " + table);
    if (!rows.ok()) return rows.status();
    std::vector<std::pair<int64_t, int64_t>> fix;  // rowid, sum
    for (;;) {
      Result<bool> row = rows->Step();
      if (!row.ok()) return row.status();
      if (!*row) break;
      const std::string k = rows->ColumnText(1);
      const int64_t sum = RowSum(k, rows->ColumnText(2));
      const bool missing = rows->ColumnIsNull(3);
      if (!missing && rows->ColumnInt(3) == sum) continue;
      if (resealed && (name_missing || !missing)) {
        resealed->push_back(std::string(table) + " row " + k);
      }
      fix.emplace_back(rows->ColumnInt(0), sum);
    }
    for (const auto& [rowid, sum] : fix) {
      Result<Stmt> update =
          db->Prepare(std::string("UPDATE ") + table + " SET sum = ?2 WHERE rowid = ?1");
      if (!update.ok()) return update.status();
      update->Bind(1, rowid).Bind(2, sum);
      HACHI_RETURN_IF_ERROR(update->Run());
    }
  }
  return Status::Ok();
}

Result<bool> HasColumn(Db* db, const char* table, const char* column) {
  Result<Stmt> stmt =
      db->Prepare("SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2");
  if (!stmt.ok()) return stmt.status();
  stmt->Bind(1, std::string_view(table)).Bind(2, std::string_view(column));
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  return *row && stmt->ColumnInt(0) > 0;
}

// Creates or completes the layout (in the caller's transaction).
Status CreateSchema(Db* db) {
  HACHI_RETURN_IF_ERROR(db->Exec(kSchema));
  for (const auto& [table, column] : kColumns) {
    Result<bool> has = HasColumn(db, table, column);
    if (!has.ok()) return has.status();
    if (!*has) {
      HACHI_RETURN_IF_ERROR(db->Exec(std::string("ALTER TABLE ") + table +
                                     " ADD COLUMN " + column + " INTEGER"));
    }
  }
  HACHI_RETURN_IF_ERROR(db->Exec(kSchemaTail));
  // Rows of an older layout get their checksums now, once.
  return Seal(db, /*name_missing=*/false, nullptr);
}

// How many of the tables every Hachi layout has (jobs, nodes, meta) the file holds.
Result<int64_t> CoreTables(Db* db) {
  return db->QueryInt(
      "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('jobs', "
      "'nodes', 'meta')");
}

// The oldest layout version that can use a database of this layout (meta
// 'min_reader_schema'; absent before version 3).
Result<int64_t> ReadMinReaderSchema(Db* db) {
  Result<Stmt> stmt =
      db->Prepare("SELECT value FROM meta WHERE key = 'min_reader_schema'");
  if (!stmt.ok()) return stmt.status();
  Result<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  return *row ? stmt->ColumnInt(0) : 0;
}

// "<db>: jobs row 17: <what the row codec said>". A row this binary must not read keeps
// its code (kInvalidArgument); anything else wrong with a row is kInternal.

}  // namespace

Result<std::unique_ptr<SqlStore>> SqliteStore::Open(const std::string& path,
                                                    const SqliteOptions& options) {
  // A file that is there but holds no Hachi tables lost them (truncated to 0 bytes,
  // replaced): starting on it would begin a new cluster whose job ids start again at 1.
  // Only a file that does not exist yet is a first start.
  auto refuse = [&](const std::string& what) {
    return InvalidArgument(
        path + ": the state database " + what +
        "; refusing to start a new cluster on it (job ids would start again at 1). "
        "Restore it from a backup, or start with --init to make a new, empty one");
  };
  struct stat st {};
  struct stat wal {};
  const bool existed = ::stat(path.c_str(), &st) == 0;
  const bool has_wal = ::stat((path + "-wal").c_str(), &wal) == 0 && wal.st_size > 0;
  // Refused before SQLite opens it: opening writes a header into an empty file.
  if (existed && st.st_size == 0 && !has_wal && !options.initialize) {
    return refuse("is empty (0 bytes)");
  }
  Result<std::unique_ptr<Db>> opened = Db::Open(path, options.busy_timeout_ms);
  if (!opened.ok()) return opened.status();
  std::unique_ptr<Db> db = std::move(*opened);
  HACHI_RETURN_IF_ERROR(db->Exec("PRAGMA synchronous = FULL"));
  // A newer layout opens when its min_reader_schema says this one can use it.
  auto check_version = [&](int64_t version) -> Status {
    if (version <= kSchemaVersion) return Status::Ok();
    // No meta table, or no key: a layout from before the key, or not Hachi's.
    Result<int64_t> min_reader = ReadMinReaderSchema(db.get());
    if (!min_reader.ok() || *min_reader == 0 || *min_reader > kSchemaVersion) {
      return InvalidArgument(
          path + ": state database schema version " + std::to_string(version) +
          " is newer than this hachi knows (" + std::to_string(kSchemaVersion) +
          "); run a newer hachi, or point it at another file");
    }
    return Status::Ok();
  };
  Result<int64_t> version = db->QueryInt("PRAGMA user_version");
  if (!version.ok()) return version.status();
  HACHI_RETURN_IF_ERROR(check_version(*version));
  Result<int64_t> core_tables = CoreTables(db.get());
  if (!core_tables.ok()) return core_tables.status();
  if (existed && *core_tables < 3 && !options.initialize) {
    return refuse(*core_tables == 0
                      ? "holds no Hachi tables"
                      : "lost some of its tables (" + std::to_string(*core_tables) +
                            " of jobs, nodes, meta are there)");
  }
  if (options.quick_check) {
    // SQLite's own structural check: pages, b-trees, free lists, not-null and STRICT
    // types (docs/storage.md measures its time).
    Result<Stmt> check = db->Prepare("PRAGMA quick_check");
    if (!check.ok()) return check.status();
    Result<bool> row = check->Step();
    const std::string verdict = !row.ok() ? row.status().message()
                                : *row    ? check->ColumnText(0)
                                          : "no answer";
    if (verdict != "ok") {
      return Internal(path + ": the state database fails SQLite's quick_check: " +
                      verdict + "; restore it from a backup");
    }
  }
  if (*version < kSchemaVersion) {
    Txn txn(db.get());
    HACHI_RETURN_IF_ERROR(txn.Begin());
    // Another process may have created the schema while we waited for the lock.
    version = db->QueryInt("PRAGMA user_version");
    if (!version.ok()) return version.status();
    HACHI_RETURN_IF_ERROR(check_version(*version));
    if (*version < kSchemaVersion) HACHI_RETURN_IF_ERROR(CreateSchema(db.get()));
    HACHI_RETURN_IF_ERROR(txn.Commit());
  } else if (*core_tables < 3) {  // --init on a file that lost tables, of any layout
    Txn txn(db.get());
    HACHI_RETURN_IF_ERROR(txn.Begin());
    HACHI_RETURN_IF_ERROR(CreateSchema(db.get()));
    HACHI_RETURN_IF_ERROR(txn.Commit());
  }
  if (options.accept_edited_rows) {
    Txn txn(db.get());
    HACHI_RETURN_IF_ERROR(txn.Begin());
    std::vector<std::string> resealed;
    HACHI_RETURN_IF_ERROR(Seal(db.get(), /*name_missing=*/true, &resealed));
    HACHI_RETURN_IF_ERROR(txn.Commit());
    if (options.warn) {
      for (const std::string& row : resealed) {
        options.warn(
            path + ": " + row +
            ": its checksum did not match; kept as it is (--accept-edited-rows)");
      }
    }
  }
  {
    // Payloads no job names any more (none, as jobs are kept: a safety net for rows
    // removed by hand).
    Txn txn(db.get());
    HACHI_RETURN_IF_ERROR(txn.Begin());
    HACHI_RETURN_IF_ERROR(
        db->Exec("DELETE FROM payloads WHERE id NOT IN "
                 "(SELECT payload FROM jobs WHERE payload IS NOT NULL)"));
    HACHI_RETURN_IF_ERROR(txn.Commit());
  }
  return std::make_unique<SqlStore>(std::move(db), path, options.group_window_us);
}

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               const SqliteOptions& options) {
  Result<std::unique_ptr<SqlStore>> store = SqliteStore::Open(path, options);
  if (!store.ok()) return store.status();
  return std::unique_ptr<Store>(std::move(*store));
}

}  // namespace hachi::state
