// Job traces for `hachi sim`: the Philly CSV (ATC'19, Pollux's processed list) and a
// small generic CSV (docs/sim.md). Readers return the jobs sorted by submit time
// (stable by row), with time zero at the earliest submit. Pure functions of their
// input (the file variants only read the file); thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time.h"

namespace hachi::sim {

// Every GPU server in the simulated clusters has at most this many GPUs; a bigger job
// becomes a gang of ceil(gpus / 8) nodes (GangShape).
inline constexpr int kGpusPerServer = 8;

struct TraceJob {
  int64_t id = 0;         // 1, 2, ... in submit order (after sorting)
  Time submit = 0;        // seconds since the earliest submit of the trace
  Duration duration = 0;  // true run time, whole seconds (≥ 1), rounded up
  int gpus = 0;           // total GPUs requested
  std::string account, user, partition;  // empty when the trace has none
  Duration time_limit = 0;  // the user's limit when the trace has one; 0: derived
  int64_t row = 0;          // 1-based data line in the file (for messages)
};

enum class TraceFormat : uint8_t { kPhilly, kCsv };
std::string_view TraceFormatName(TraceFormat f);  // "philly", "csv"
// "philly" / "csv"; kInvalidArgument otherwise.
Result<TraceFormat> ParseTraceFormat(std::string_view name);
// The format told from the header line (the first line of `text`): the Philly header
// starts with "timestamp,duration,num_gpus"; the generic one has a duration_s column.
Result<TraceFormat> DetectTraceFormat(std::string_view text, std::string_view file);

// How a request of `gpus` GPUs is laid out: one node when it fits a server, else a gang
// of ceil(gpus/8) nodes with gpus/nodes each. kInvalidArgument when that does not split
// evenly (e.g. 9 GPUs) or gpus < 1.
struct GangShape {
  int nodes = 1;
  int gpus_per_node = 0;
};
Result<GangShape> ShapeOf(int gpus);

// `file` only names the source in messages ("philly.csv:17: num_gpus: ...").
Result<std::vector<TraceJob>> ParsePhillyTrace(std::string_view text,
                                               std::string_view file);
Result<std::vector<TraceJob>> ParseCsvTrace(std::string_view text, std::string_view file);
Result<std::vector<TraceJob>> ParseTrace(std::string_view text, std::string_view file,
                                         TraceFormat format);

// Reads `path`; `format` null: detected from the header.
Result<std::vector<TraceJob>> ReadTrace(const std::string& path,
                                        const TraceFormat* format = nullptr);

// "2017-10-09 07:01:55" -> seconds since 1970-01-01 00:00:00 (no time zone: the trace
// has none, only differences matter). nullopt-like error when malformed.
Result<int64_t> ParseDateTime(std::string_view s);

}  // namespace hachi::sim
