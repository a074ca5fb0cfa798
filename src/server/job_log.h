// The tail of a job's output file, for the dashboard's job page
// (GET /api/v1/jobs/ID/log, docs/api.md). The server reads the file itself, so only
// for jobs whose first node is one of `local_nodes` (hachi dev's in-process agents);
// anywhere else the log is on that node's disk and the answer says so (kNotFound).
//
// Only the job's own output file is ever opened: the path comes from the job record
// (its stdout pattern expanded exactly as the agent expands it, agent/environment.h),
// never from the request. It is looked up as the job's user (the server's fsuid and
// fsgid on the calling thread, when the server is root), the last component is not
// followed if it is a symlink, and only a regular file owned by the job's uid is opened
// for reading (first a path-only descriptor to check it, then the reopen, O_NOCTTY):
// no device, FIFO or terminal is ever opened, so a job's "-o /dev/pts/N" cannot become
// the server's controlling terminal. Every refusal gives the same answer, so
// the endpoint tells no one whether a path exists in a directory they cannot list.
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
// local ("the log is on node n3"), or no regular file of the job's uid that the job's
// user may open is there (missing, a symlink, a FIFO or device, another uid's, a
// directory the job's user cannot search): then always "job N has no log readable
// here".
Result<LogTail> ReadJobLogTail(const state::JobRecord& job,
                               const std::vector<std::string>& local_nodes,
                               int64_t max_bytes, int lines);

}  // namespace hachi::server
