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
#include <vector>

#include "core/status.h"
#include "state/records.h"

namespace hachi::api {

// Compact JSON (one line). A job's script, argv, environment, workdir, output paths,
// name and comment are bytes: a value that is not UTF-8 is written {"base64": "..."}
// and read back exactly. Request fields that must be text (partition, qos, user,
// account, gpu_model, container_image) are written the same way and refused by the
// decoder when not UTF-8 ("submit.req.partition: not valid UTF-8 (4 bytes)"). Display
// text (a job's reason, node texts) has bad bytes replaced by U+FFFD: nothing acts on it.
std::string JobRecordToJson(const state::JobRecord& job);
std::string NodeRecordToJson(const state::NodeRecord& node);
// A NodeStatus is one flat object: the NodeRecord's fields plus the derived ones.
std::string NodeStatusToJson(const state::NodeStatus& node);

// Error paths start at "job" / "node".
Result<state::JobRecord> JobRecordFromJson(std::string_view text);
Result<state::NodeRecord> NodeRecordFromJson(std::string_view text);
Result<state::NodeStatus> NodeStatusFromJson(std::string_view text);

// A job step: the StepRecord's fields plus "id", "12.0" (job.step), which the
// decoder checks against them when present. The name is bytes as a job's is; the
// reason is display text. Error paths start at "step".
std::string StepRecordToJson(const state::StepRecord& step);
Result<state::StepRecord> StepRecordFromJson(std::string_view text);
// {"steps": [...]}, in the order given. The decoder reads "steps" (each step strictly,
// paths "steps[0].job") and leaves other fields of the reply to its other readers.
std::string StepRecordsToJson(const std::vector<state::StepRecord>& steps);
Result<std::vector<state::StepRecord>> StepRecordsFromJson(std::string_view text);

}  // namespace hachi::api
