// JSON text of the state records: how the SQLite store keeps a job or node (one JSON
// document per row) and how the API carries them (docs/api.md, "Job and node objects",
// lists every field). This header is light on purpose (no nlohmann); code that builds
// bigger documents around these objects uses record_json_nlohmann.h.
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

namespace hachi::state {

// Compact JSON (one line). Strings that are not valid UTF-8 have the bad bytes
// replaced by U+FFFD: the only lossy case.
std::string JobRecordToJson(const JobRecord& job);
std::string NodeRecordToJson(const NodeRecord& node);
// A NodeStatus is one flat object: the NodeRecord's fields plus the derived ones.
std::string NodeStatusToJson(const NodeStatus& node);

// Error paths start at "job" / "node".
Result<JobRecord> JobRecordFromJson(std::string_view text);
Result<NodeRecord> NodeRecordFromJson(std::string_view text);
Result<NodeStatus> NodeStatusFromJson(std::string_view text);

}  // namespace hachi::state
