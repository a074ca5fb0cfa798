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
INSERT INTO meta (key, value) VALUES ('min_reader_schema', 1) ON CONFLICT (key) DO NOTHING;
-- Layout 2: each row of jobs, nodes, tokens and steps names the transaction that last
-- wrote it (tx), and deletions leave a note in hachi_gone, so a standby follows the
-- state by reading only what changed (state/pg_follow.h). Triggers write both: the SQL
-- of the store stays the same on both engines. Payload rows are written once, with
-- their array's first row, and never change.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS tx BIGINT NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN IF NOT EXISTS tx BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN IF NOT EXISTS tx BIGINT NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN IF NOT EXISTS tx BIGINT NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS jobs_by_tx ON jobs(tx);
CREATE INDEX IF NOT EXISTS steps_by_tx ON steps(tx);
CREATE TABLE IF NOT EXISTS hachi_gone (tbl TEXT NOT NULL, key TEXT NOT NULL, tx BIGINT NOT NULL);
CREATE INDEX IF NOT EXISTS hachi_gone_by_tx ON hachi_gone(tx);
CREATE OR REPLACE FUNCTION hachi_stamp() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  NEW.tx := pg_current_xact_id()::text::bigint;
  RETURN NEW;
END $f$;
CREATE OR REPLACE FUNCTION hachi_note_gone() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  INSERT INTO hachi_gone VALUES (TG_TABLE_NAME, to_jsonb(OLD) ->> TG_ARGV[0],
                                 pg_current_xact_id()::text::bigint);
  RETURN OLD;
END $f$;
CREATE OR REPLACE TRIGGER hachi_stamp BEFORE INSERT OR UPDATE ON jobs
  FOR EACH ROW EXECUTE FUNCTION hachi_stamp();
CREATE OR REPLACE TRIGGER hachi_stamp BEFORE INSERT OR UPDATE ON nodes
  FOR EACH ROW EXECUTE FUNCTION hachi_stamp();
CREATE OR REPLACE TRIGGER hachi_stamp BEFORE INSERT OR UPDATE ON tokens
  FOR EACH ROW EXECUTE FUNCTION hachi_stamp();
CREATE OR REPLACE TRIGGER hachi_stamp BEFORE INSERT OR UPDATE ON steps
  FOR EACH ROW EXECUTE FUNCTION hachi_stamp();
CREATE OR REPLACE TRIGGER hachi_note_gone AFTER DELETE ON jobs
  FOR EACH ROW EXECUTE FUNCTION hachi_note_gone('id');
CREATE OR REPLACE TRIGGER hachi_note_gone AFTER DELETE ON nodes
  FOR EACH ROW EXECUTE FUNCTION hachi_note_gone('name');
CREATE OR REPLACE TRIGGER hachi_note_gone AFTER DELETE ON tokens
  FOR EACH ROW EXECUTE FUNCTION hachi_note_gone('id');
-- Layout 3: burst nodes' powered spells (power_spells.h). A standby does not follow
-- them: a new leader reads the open ones at its start.
CREATE TABLE IF NOT EXISTS power (
  node TEXT NOT NULL,
  since BIGINT NOT NULL,
  until BIGINT NOT NULL,
  open BIGINT NOT NULL,
  record TEXT NOT NULL,
  sum BIGINT,
  PRIMARY KEY (node, since)
);
CREATE INDEX IF NOT EXISTS power_by_until ON power(until);
INSERT INTO meta (key, value) VALUES ('schema_version', 3)
  ON CONFLICT (key) DO UPDATE SET value = GREATEST(meta.value, excluded.value);
COMMIT;
)sql";

}  // namespace

Status EnsurePostgresSchema(Db* db) {
  // A layout of a newer binary is refused before anything is written to it.
  Result<int64_t> present = db->QueryInt(
      "SELECT count(*) FROM pg_catalog.pg_tables WHERE tablename = 'meta' AND "
      "schemaname = ANY (current_schemas(false))");
  if (!present.ok()) return present.status();
  int64_t version = 0;
  if (*present > 0) {
    Result<int64_t> stored = db->QueryInt(
        "SELECT COALESCE((SELECT value FROM meta WHERE key = 'schema_version'), 0)");
    if (!stored.ok()) return stored.status();
    version = *stored;
    Result<int64_t> min_reader = db->QueryInt(
        "SELECT COALESCE((SELECT value FROM meta WHERE key = 'min_reader_schema'), 0)");
    if (!min_reader.ok()) return min_reader.status();
    if (*min_reader > kPostgresSchemaVersion) {
      return InvalidArgument(
          db->path() + ": state database schema version " + std::to_string(version) +
          " is newer than this hachi knows (" + std::to_string(kPostgresSchemaVersion) +
          "); run a newer hachi, or point it at another database");
    }
  }
  // Nothing to make: no DDL, whose table locks would wait behind a write transaction
  // of the leader a takeover replaces (frozen, it holds its locks until the database
  // ends it).
  if (version >= kPostgresSchemaVersion) return Status::Ok();
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
  return std::make_unique<SqlStore>(std::move(*db), "", 0, options.first_load,
                                    options.warn);
}

Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& conninfo,
                                                 const PostgresOptions& options) {
  Result<std::unique_ptr<SqlStore>> store = OpenPostgresSqlStore(conninfo, options);
  if (!store.ok()) return store.status();
  return std::unique_ptr<Store>(std::move(*store));
}

}  // namespace hachi::state
