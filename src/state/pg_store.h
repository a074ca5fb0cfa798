// The PostgreSQL layout (docs/storage.md, "PostgreSQL"): what the store and the lease row
// both need before they run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "state/sql_store.h"
#include "state/store.h"

namespace hachi::state {

class Db;

// 1: the tables of SQLite's layout 6, BIGINT and TEXT, and hachi_leader.
// 2: each row's last writing transaction (tx) and hachi_gone, for a standby to follow
//    the changes (state/pg_follow.h); readers of layout 1 still read and write it.
// 3: power (burst nodes' powered spells); readers of layout 2 leave it alone.
inline constexpr int64_t kPostgresSchemaVersion = 3;

// Creates the tables and the lease row when missing (idempotent, safe when several
// servers start at once: one transaction under an advisory lock) and checks the
// layout's version. kInvalidArgument for a newer layout than this binary can use.
Status EnsurePostgresSchema(Db* db);

// OpenPostgresStore's store as what it is (tests reach under the Store interface).
Result<std::unique_ptr<SqlStore>> OpenPostgresSqlStore(const std::string& conninfo,
                                                       const PostgresOptions& options);

}  // namespace hachi::state
