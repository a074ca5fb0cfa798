// hachi admin backup / migrate.
#include "cli/admin_cmds.h"

#include <iostream>
#include <memory>
#include <string>

#include "cli/fail.h"
#include "state/db.h"
#include "state/migrate.h"
#include "state/pg_db.h"
#include "state/pg_store.h"
#include "state/sqlite_backup.h"
#include "state/sqlite_store.h"

namespace hachi::cli {
namespace {

struct BackupFlags {
  std::string state_dir = "/var/lib/hachi";
  std::string to;
};

int RunBackup(const BackupFlags& f) {
  const std::string from = f.state_dir + "/hachi.db";
  Result<state::SqliteBackupResult> b = state::BackupSqlite(from, f.to);
  if (!b.ok()) return Fail(b.status());
  std::cout << "backed up " << from << " to " << f.to << ": " << b->pages << " pages, "
            << b->bytes << " bytes";
  if (b->restarts > 0) std::cout << " (restarted " << b->restarts << "x: it was busy)";
  std::cout << "\n";
  return 0;
}

struct MigrateFlags {
  std::string from, to;
};

bool IsPostgresUri(const std::string& s) {
  return s.rfind("postgresql://", 0) == 0 || s.rfind("postgres://", 0) == 0;
}

// A store's database, its tables made when missing: PostgreSQL's URI, or a SQLite file
// ("sqlite:PATH" or PATH).
Result<std::unique_ptr<state::Db>> OpenForMigrate(const std::string& where) {
  if (IsPostgresUri(where)) {
    state::PgDbOptions o;
    o.conninfo = where;
    Result<std::unique_ptr<state::PgDb>> db = state::PgDb::Open(o);
    if (!db.ok()) return db.status();
    HACHI_RETURN_IF_ERROR(state::EnsurePostgresSchema(db->get()));
    return std::unique_ptr<state::Db>(std::move(*db));
  }
  const std::string path = where.rfind("sqlite:", 0) == 0 ? where.substr(7) : where;
  {
    // The layout made or checked (and upgraded) as the server would.
    Result<std::unique_ptr<state::SqlStore>> store = state::SqliteStore::Open(path, {});
    if (!store.ok()) return store.status();
  }
  return state::Db::Open(path, 5000);
}

int RunMigrate(const MigrateFlags& f) {
  Result<std::unique_ptr<state::Db>> from = OpenForMigrate(f.from);
  if (!from.ok()) return Fail(from.status());
  Result<std::unique_ptr<state::Db>> to = OpenForMigrate(f.to);
  if (!to.ok()) return Fail(to.status());
  Result<state::MigrateReport> r = state::CopyState(from->get(), to->get());
  if (!r.ok()) return Fail(r.status());
  std::cout << "migrated and verified row for row:";
  for (const auto& [table, rows] : r->rows) std::cout << " " << table << " " << rows;
  std::cout << "\n";
  return 0;
}

}  // namespace

void AddAdminCommands(CLI::App& app, int* exit_code) {
  CLI::App* admin =
      app.add_subcommand("admin", "The state store's maintenance: backup, migrate");
  admin->require_subcommand(1);

  auto bf = std::make_shared<BackupFlags>();
  CLI::App* backup = admin->add_subcommand(
      "backup",
      "Copy the SQLite state (STATE_DIR/hachi.db) to FILE while the server runs: a "
      "consistent snapshot, checked, 0600");
  backup->add_option("FILE", bf->to, "Where the copy goes (replaced)")->required();
  backup->add_option("--state-dir", bf->state_dir,
                     "The server's state directory (default /var/lib/hachi)");
  backup->callback([bf, exit_code] {
    const int rc = RunBackup(*bf);
    if (rc != 0) *exit_code = rc;
  });

  auto mf = std::make_shared<MigrateFlags>();
  CLI::App* migrate = admin->add_subcommand(
      "migrate",
      "Copy the whole state from one store into another, empty one, and compare every "
      "row: SQLite (a file) to PostgreSQL (postgresql://...) or back. Stop the servers "
      "first");
  migrate->add_option("--from", mf->from, "The store to copy: FILE or postgresql://...")
      ->required();
  migrate->add_option("--to", mf->to, "The empty store to fill: FILE or postgresql://...")
      ->required();
  migrate->callback([mf, exit_code] {
    const int rc = RunMigrate(*mf);
    if (rc != 0) *exit_code = rc;
  });
}

}  // namespace hachi::cli
