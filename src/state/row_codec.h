// How the SQLite store keeps a record in a row (sqlite_store.h): JSON text of the store's
// own, versioned apart from the API's wire format (api/record_json.h). The two start out
// with the same field names, but renaming an API field no longer touches the database,
// and a database is no longer refused by an older binary for fields it does not know.
// The rules (docs/storage.md):
//
//  - Every row holds "_v", the row format version it was written in, and "_min_reader",
//    the oldest reader version that can read it. A row without "_v" is version 1 (what
//    Hachi wrote before rows were versioned: the API's JSON of that time).
//  - A row whose "_min_reader" is above this binary's version is refused, naming the
//    versions (the store adds the table and the row's key).
//  - A row of a newer version this binary may read (a newer binary only added fields)
//    loads: fields this binary does not know are tolerated and returned in
//    Row::unknown, so that a rewrite of the row (EncodeJobRow(job, row.unknown)) carries
//    them over. Unknown fields inside array elements (allocations, dependencies) are
//    tolerated but not carried over.
//  - A row of an older version is upgraded on read, one explicit step per version
//    (row_codec.cc, kJobSteps and friends), then read as the current version.
//  - A known field with a wrong type or an unknown enum name is an error naming the
//    field ("job.req.gpus: expected an integer, got string"); a missing field keeps the
//    struct's default, so a field may be added without a step.
//
// This header is light on purpose (no nlohmann). Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "state/records.h"

namespace hachi::state {

// The row formats this binary writes and reads, per table. Bump `version` for any
// change; raise `min_reader` to `version` only when an older binary must not read the
// new rows (a field changes meaning, type or name; an enum gains a value).
struct RowFormat {
  int version;
  int min_reader;
};
// Jobs 4: an array task's script and environment may be a reference to a
// payloads row ("spec.payload"), which a reader of version 3 would read as no script,
// and any string of the spec or request may be {"base64": ...} (bytes that are not
// UTF-8), which version 3 cannot read.
// Jobs 5: the spec's optional ntasks, ntasks_per_node, cpus_per_task,
// signal, signal_before, signal_batch_only, open_append (absent: 0 / false); the
// request's optional constraint, nodelist, exclude, begin_time, deadline, nice; and the
// dependency kinds afternotok and singleton. A version-4 reader would refuse the kinds
// and run a job that asked for -w/-C/--begin anywhere at once, so it must not read them.
// Jobs 6: the spec's optional batch_on_first_node and interactive (absent:
// false). A version-5 reader would run sbatch's script on every node of the job, and an
// allocation with no command as a failed launch, so it must not read them.
// Jobs 7: the request's optional mig_profile and an allocation's optional
// mig (the MIG devices' UUIDs). A version-6 reader would run such a job on whole GPUs:
// the rows that hold them say "_min_reader": 7; the others stay readable by 6.
// Jobs 8: an array task's argv too is in its payloads row (an array's argv was one
// copy per task: 500 tasks of 1 MB were 500 MB). A version-7 reader would run such a
// task with no command: a row naming a payloads row without an argv of its own says
// "_min_reader": 8; the others stay as they were.
inline constexpr RowFormat kJobRowFormat{9, 6};  // jobs.record
// Nodes 3: the state "burn-in" and the burn-in fields; a version-2 reader
// cannot parse the state, so it must not read them.
inline constexpr RowFormat kNodeRowFormat{3, 3};   // nodes.record
inline constexpr RowFormat kTokenRowFormat{2, 2};  // tokens.record
// Payloads 2: the optional "argv". A version-1 reader would drop it, but reads such a
// row only for job rows that it refuses (their "_min_reader" is 8).
inline constexpr RowFormat kPayloadRowFormat{2, 1};  // payloads.record (JobPayload)
inline constexpr RowFormat kStepRowFormat{1, 1};     // steps.record

// A decoded row.
template <typename Record>
struct Row {
  Record record;
  int version = 0;  // as stored (1: a row from before versioning)
  // The fields this binary does not know, as a JSON object of the same shape as the row
  // (nested objects by name); "" when there are none (the usual case).
  std::string unknown;
  // Jobs: the payloads row that holds the script, environment and argv; 0: they are
  // inline. When it is set, the spec's payload holds only what the row holds itself:
  // nothing, or in a row from before version 8 its argv, which the store joins with the
  // payloads row's script and environment, and a rewrite keeps in the row.
  JobId payload_ref = 0;
};

// Compact JSON (one line), every field written. A job's spec and request strings that
// are not valid UTF-8 are written {"base64": "..."} and read back exactly; in node and
// token rows, whose text never reaches a process or a path, bad bytes are replaced by
// U+FFFD. `unknown` (a Row's) is merged in.
// `payload_ref` != 0: the row names that payloads row instead of holding the spec's
// script, environment and argv (an array's tasks share one, written by
// EncodePayloadRow); the spec's payload must then hold only what stays in the row, as
// Row::payload_ref says (a new task: nothing).
std::string EncodeJobRow(const JobRecord& job, std::string_view unknown = "",
                         JobId payload_ref = 0);
std::string EncodeNodeRow(const NodeRecord& node, std::string_view unknown = "");
std::string EncodeTokenRow(const TokenRecord& token, std::string_view unknown = "");
std::string EncodePayloadRow(const JobPayload& payload);
// A step's name is bytes as a job's is; its other strings are text (bad bytes replaced).
std::string EncodeStepRow(const StepRecord& step, std::string_view unknown = "");

// kInvalidArgument for a row this binary must not read (its "_min_reader" is newer);
// kInternal for a row that is not what any version writes (bad JSON, wrong types).
// Error paths start at "job" / "node" / "token" / "payload" / "step".
Result<Row<JobRecord>> DecodeJobRow(std::string_view text);
Result<Row<NodeRecord>> DecodeNodeRow(std::string_view text);
Result<Row<TokenRecord>> DecodeTokenRow(std::string_view text);
Result<Row<JobPayload>> DecodePayloadRow(std::string_view text);
Result<Row<StepRecord>> DecodeStepRow(std::string_view text);

}  // namespace hachi::state
