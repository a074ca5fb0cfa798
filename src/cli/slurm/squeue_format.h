// squeue under Slurm's name (docs/cli.md "squeue"): its flags parsed into a selection
// and a format, and the records rendered as squeue 22.05 prints them (default columns,
// -o codes, -O/--Format field names with "Field:width", -r, --start, --json).
//
// Pure functions; thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cli/slurm/slurm_text.h"
#include "core/status.h"
#include "core/time.h"
#include "state/records.h"

namespace hachi::cli::slurm {

// Slurm's default columns (squeue with no -o).
inline constexpr std::string_view kSqueueDefaultFormat =
    "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
inline constexpr std::string_view kSqueueStartFormat =
    "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R";

struct SqueueOptions {
  bool help = false, usage = false;
  bool noheader = false;    // -h
  bool array = false;       // -r: one line per pending array task
  bool start = false;       // --start
  bool json = false;        // --json
  std::string format;       // -o (codes)
  std::string long_format;  // -O (field names)
  std::vector<std::string> users, names, partitions, accounts;
  std::vector<state::JobState> states;  // empty: pending and running
  bool states_given = false;
  std::vector<JobSelector> jobs;  // -j
  std::string server;             // --server (Hachi's)
};
// `me`: the caller's user name (--me).
Result<SqueueOptions> ParseSqueueArgs(const std::vector<std::string>& args,
                                      const std::string& me);

// The backfill timeline's estimate for a pending job (the server's explain:
// earliest_start / earliest_node): squeue --start's START_TIME and SCHEDNODES.
struct StartEstimate {
  Time start = 0;
  std::string node;
};
using StartEstimates = std::map<state::JobId, StartEstimate>;

// Selects, sorts (partition, state, id) and renders. Pending tasks of an array share a
// line ("12_[3-9%2]") unless -r. A pending job without an estimate starts "N/A".
Result<std::string> RenderSqueue(const SqueueOptions& o,
                                 const std::vector<state::JobRecord>& jobs, Time now,
                                 const StartEstimates& starts = {});

}  // namespace hachi::cli::slurm
