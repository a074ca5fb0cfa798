// The SQLite store: the SqlStore (state/sql_store.h, the layout and group commit) on a
// SQLite file. Exposed for tests that need to reach under the interface (a full disk is
// simulated with PRAGMA max_page_count); other code uses OpenSqliteStore.
//
// STRICT tables; the layout's version is PRAGMA user_version (schema version 7), and a
// newer layout opens when its meta 'min_reader_schema' is at most this binary's
// kSchemaVersion (docs/storage.md). Opening an older layout upgrades it in place
// (idempotent CREATE ... IF NOT EXISTS); its rows are upgraded when read, and written in
// the current row format when next rewritten. journal_mode=WAL, synchronous=FULL: a
// committed transaction survives a crash or a power cut.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "state/sql_store.h"
#include "state/store.h"

namespace hachi::state {

struct SqliteStore {
  // 2: tokens. 3: rows versioned apart from the API (row_codec.h); min_reader_schema.
  // 4: payloads (an array's script and environment once), row checksums.
  // 5: steps; min_reader_schema stays 4 (a layout-4 binary leaves the table
  // alone). 6: usage, likewise. 7: power (burst nodes' powered spells), likewise.
  static constexpr int64_t kSchemaVersion = 7;

  static Result<std::unique_ptr<SqlStore>> Open(const std::string& path,
                                                const SqliteOptions& options);
};

}  // namespace hachi::state
