// sacct under Slurm's name (docs/cli.md "sacct"): accounting of running and finished
// jobs from the server's records, as sacct 22.05 prints it: Slurm's field names and
// widths (`-o JobID,JobName%30`), its state words, its time window (-S/-E, since
// midnight by default unless -j), `ID.batch` lines without -X, -P/-p/-n.
//
// Pure functions of their arguments and TZ; thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/slurm/slurm_text.h"
#include "core/status.h"
#include "core/time.h"
#include "state/records.h"

namespace hachi::cli::slurm {

inline constexpr std::string_view kSacctDefaultFields =
    "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode";

struct SacctOptions {
  bool help = false, usage = false;
  std::vector<JobSelector> jobs;  // -j
  std::vector<std::string> users, accounts, names, partitions;
  bool all_users = false;  // -a
  std::vector<state::JobState> states;
  bool allocations = false;  // -X: no step lines
  bool parsable = false;     // -p: "a|b|"
  bool parsable2 = false;    // -P: "a|b"
  bool noheader = false;     // -n
  std::string fields;        // -o / --format; empty: kSacctDefaultFields
  Time start = 0;            // -S (0: none)
  Time end = 0;              // -E (0: now)
  std::string server;
};
// `now` resolves the default window and relative times; `me` is the caller (sacct shows
// only the caller's jobs unless -a, -u or root: `root`).
Result<SacctOptions> ParseSacctArgs(const std::vector<std::string>& args, Time now,
                                    const std::string& me, bool root);

// sacct's -S/-E times: "now", "today", "midnight", "now-2hours" (seconds, minutes,
// hours, days, weeks), "YYYY-MM-DD[THH:MM[:SS]]", "MM/DD[/YY]", "HH:MM[:SS]" (today).
Result<Time> ParseSacctTime(std::string_view text, Time now);

// A usage field of sacct and sstat ("avecpu", "maxrss", "totalcpu", "tresusageinave",
// "tresusageinmax", "tresusageintot"; lowercase) from the job's usage summary (a running
// job's so far), in Slurm's forms; "" when not measured or not such a field.
std::string UsageFieldValue(const state::JobRecord& j, std::string_view lower_name);

using UidOf = std::function<std::optional<uint32_t>(const std::string&)>;
// `steps`: job steps, shown after their job's ID.batch line without -X, those
// of each job's latest run, as "ID.N".
Result<std::string> RenderSacct(const SacctOptions& o,
                                const std::vector<state::JobRecord>& jobs, Time now,
                                const UidOf& uid_of = nullptr,
                                const std::vector<state::StepRecord>& steps = {});

}  // namespace hachi::cli::slurm
