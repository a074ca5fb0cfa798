// hachi admin backup / migrate.
#include "cli/admin_cmds.h"

#include <iostream>
#include <memory>
#include <string>

#include "cli/fail.h"
#include "state/sqlite_backup.h"

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
}

}  // namespace hachi::cli
