// The tail of a job's output file, for the dashboard's job page
// (GET /api/v1/jobs/ID/log, docs/api.md). The server reads the file itself, so only
// for jobs whose first node is one of `local_nodes` (hachi dev's in-process agents);
// anywhere else the log is on that node's disk and the answer says so (kNotFound).
//
// Only the job's own output file is ever opened: the path comes from the job record
// (its stdout pattern expanded exactly as the agent expands it, agent/environment.h),
// never from the request. The file must be a regular file owned by the job's uid, and
// the last path component must not be a symlink, so a job cannot point its "output" at
// a file of someone else's that the server could read.
//
// Pure functions of their arguments plus the file system; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "state/records.h"

namespace hachi::server {

struct LogTail {
  std::string node;    // where the job ran (its first node)
  std::string path;    // the output file, absolute
  int64_t size = 0;    // the file's size in bytes
  int64_t offset = 0;  // where `text` starts in the file
  std::string text;    // raw bytes (not necessarily UTF-8)
};

inline constexpr int64_t kMaxLogTailBytes = 1 << 20;

// The job's stdout path as its first node's agent wrote it; "" for a job that never ran.
std::string JobOutputPath(const state::JobRecord& job);

// The last `max_bytes` (1..kMaxLogTailBytes) of the job's output; with `lines` > 0 at
// most the last `lines` lines of those. kNotFound: the job never ran, its node is not
// local ("the log is on node n3"), or the file does not exist; kPermissionDenied: the
// file is not the job's (owner, type, symlink).
Result<LogTail> ReadJobLogTail(const state::JobRecord& job,
                               const std::vector<std::string>& local_nodes,
                               int64_t max_bytes, int lines);

}  // namespace hachi::server
