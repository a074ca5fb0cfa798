// Moving the state between engines (hachi admin migrate, docs/storage.md "Moving"): every
// row of every table copied as it is stored — the record's JSON, its checksum, the
// payload references, rows of a newer format this binary would not decode — in one
// transaction on the destination, then read back from both and compared row for row.
// Meta keys of the layout itself (versions) are each engine's; only last_job_id moves.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/status.h"

namespace hachi::state {

class Db;

struct MigrateReport {
  std::map<std::string, int64_t> rows;  // per table, copied and verified
};

// Copies everything from `from` into `to`, whose tables must exist and hold no job,
// node, token, step or usage row (kInvalidArgument naming the first table that does),
// then verifies. Nothing is left in `to` on an error of the copy; a verification that
// finds a difference names the table and key (kInternal).
Result<MigrateReport> CopyState(Db* from, Db* to);

}  // namespace hachi::state
