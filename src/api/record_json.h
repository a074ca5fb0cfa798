// JSON text of the state records as the API carries them: the wire format of jobs and
// nodes (docs/api.md, "Job and node objects", lists every field). The SQLite store keeps
// its rows in a format of its own, versioned apart (state/row_codec.h). This header is
// light on purpose (no nlohmann); code that builds bigger documents around these objects
// uses api/record_json_nlohmann.h.
//
// Encoding writes every field. Decoding is strict: a wrong type, an unknown field, a
// value out of its type's range or an unknown enum name is an error naming the field
// path ("job.req.gpus: expected an integer, got string"); a missing field keeps the
// struct's default. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "state/records.h"

namespace hachi::api {

// Compact JSON (one line). Strings that are not valid UTF-8 have the bad bytes
// replaced by U+FFFD: the only lossy case.
std::string JobRecordToJson(const state::JobRecord& job);
std::string NodeRecordToJson(const state::NodeRecord& node);
// A NodeStatus is one flat object: the NodeRecord's fields plus the derived ones.
std::string NodeStatusToJson(const state::NodeStatus& node);

// Error paths start at "job" / "node".
Result<state::JobRecord> JobRecordFromJson(std::string_view text);
Result<state::NodeRecord> NodeRecordFromJson(std::string_view text);
Result<state::NodeStatus> NodeStatusFromJson(std::string_view text);

}  // namespace hachi::api
