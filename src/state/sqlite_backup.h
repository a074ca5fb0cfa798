// An online backup of the SQLite state (docs/storage.md, "Backups"): SQLite's backup API
// copies the database page by page while the server keeps running, in steps that hold
// the read lock briefly, so commits go on between them; a step that sees the source
// changed by another connection starts again (bounded). The copy is a consistent
// snapshot, written to a new file beside the target and renamed onto it once complete
// and checked (PRAGMA quick_check), so a crash leaves the old backup or the new one,
// never half of one. 0600 from its first byte.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace hachi::state {

struct SqliteBackupResult {
  int64_t pages = 0;  // copied
  int64_t bytes = 0;  // the backup's size
  int restarts = 0;   // times the copy began again because the source changed
};

// Copies the SQLite database at `from` into `to` (replaced if it exists). kNotFound when
// `from` does not exist; kUnavailable when the source stays busy or changes faster than
// the copy for too long.
Result<SqliteBackupResult> BackupSqlite(const std::string& from, const std::string& to);

}  // namespace hachi::state
