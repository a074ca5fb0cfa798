#include "state/pg_store.h"

#include <memory>
#include <string>
#include <utility>

#include "state/pg_db.h"
#include "state/sql_store.h"
#include "state/store.h"

namespace hachi::state {
namespace {

// SQLite's tables (sql_store.h) in PostgreSQL's types, the lease row, and the layout's
// version in meta. The advisory lock serialises two servers creating them at once.
constexpr const char* kSchema = R"sql(
BEGIN;
SELECT pg_advisory_xact_lock(7235046815);
CREATE TABLE IF NOT EXISTS jobs (
  id BIGINT PRIMARY KEY,
  state TEXT NOT NULL,
  record TEXT NOT NULL,
  payload BIGINT,
  sum BIGINT
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state);
CREATE INDEX IF NOT EXISTS jobs_by_payload ON jobs(payload) WHERE payload IS NOT NULL;
CREATE TABLE IF NOT EXISTS nodes (name TEXT PRIMARY KEY, record TEXT NOT NULL, sum BIGINT);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BIGINT);
CREATE TABLE IF NOT EXISTS tokens (id TEXT PRIMARY KEY, record TEXT NOT NULL, sum BIGINT);
CREATE TABLE IF NOT EXISTS payloads (id BIGINT PRIMARY KEY, record TEXT NOT NULL, sum BIGINT);
CREATE TABLE IF NOT EXISTS steps (
  job BIGINT NOT NULL,
  job_start BIGINT NOT NULL,
  step BIGINT NOT NULL,
  record TEXT NOT NULL,
  sum BIGINT,
  PRIMARY KEY (job, job_start, step)
);
CREATE TABLE IF NOT EXISTS usage (
  job BIGINT NOT NULL,
  job_start BIGINT NOT NULL,
  record TEXT NOT NULL,
  sum BIGINT,
  PRIMARY KEY (job, job_start)
);
CREATE TABLE IF NOT EXISTS hachi_leader (
  id INT PRIMARY KEY CHECK (id = 1),
  epoch BIGINT NOT NULL,
  holder TEXT NOT NULL,
  address TEXT NOT NULL,
  expires_at TIMESTAMPTZ NOT NULL,
  writes BIGINT NOT NULL
);
INSERT INTO hachi_leader VALUES (1, 0, '', '', '1970-01-01 00:00:00+00', 0)
  ON CONFLICT (id) DO NOTHING;
INSERT INTO meta (key, value) VALUES ('schema_version', 1), ('min_reader_schema', 1)
  ON CONFLICT (key) DO NOTHING;
COMMIT;
)sql";

}  // namespace

Status EnsurePostgresSchema(Db* db) {
  // A layout of a newer binary is refused before anything is written to it.
  Result<int64_t> present = db->QueryInt(
      "SELECT count(*) FROM pg_catalog.pg_tables WHERE tablename = 'meta' AND "
      "schemaname = ANY (current_schemas(false))");
  if (!present.ok()) return present.status();
  if (*present > 0) {
    Result<int64_t> min_reader = db->QueryInt(
        "SELECT COALESCE((SELECT value FROM meta WHERE key = 'min_reader_schema'), 0)");
    if (!min_reader.ok()) return min_reader.status();
    if (*min_reader > kPostgresSchemaVersion) {
      Result<int64_t> version = db->QueryInt(
          "SELECT COALESCE((SELECT value FROM meta WHERE key = 'schema_version'), 0)");
      return InvalidArgument(
          db->path() + ": state database schema version " +
          (version.ok() ? std::to_string(*version) : std::string("?")) +
          " is newer than this hachi knows (" + std::to_string(kPostgresSchemaVersion) +
          "); run a newer hachi, or point it at another database");
    }
  }
  Status s = db->Exec(kSchema);
  if (!s.ok()) (void)db->Exec("ROLLBACK");
  return s;
}

Result<std::unique_ptr<SqlStore>> OpenPostgresSqlStore(const std::string& conninfo,
                                                       const PostgresOptions& options) {
  PgDbOptions o;
  o.conninfo = conninfo;
  o.epoch = options.epoch;
  o.on_deposed = options.on_deposed;
  o.reconnect_ms = options.reconnect_ms;
  o.idle_in_transaction_ms = options.idle_in_transaction_ms;
  Result<std::unique_ptr<PgDb>> db = PgDb::Open(std::move(o));
  if (!db.ok()) return db.status();
  HACHI_RETURN_IF_ERROR(EnsurePostgresSchema(db->get()));
  return std::make_unique<SqlStore>(std::move(*db), "");
}

Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& conninfo,
                                                 const PostgresOptions& options) {
  Result<std::unique_ptr<SqlStore>> store = OpenPostgresSqlStore(conninfo, options);
  if (!store.ok()) return store.status();
  return std::unique_ptr<Store>(std::move(*store));
}

}  // namespace hachi::state
