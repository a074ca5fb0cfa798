// The pieces every Slurm front-end shares (sbatch, squeue, scancel, sinfo, scontrol,
// sacct, srun under their own names; docs/cli.md "Slurm's names"): getopt_long-style
// argument parsing with Slurm's wording, job-id lists ("A", "A_T", "A_[1-5,7]"),
// hostlists ("gpu[01-03]") and sacct's state words.
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "state/records.h"

namespace hachi::cli::slurm {

// One option a command takes: a short letter (0: none) and/or a long name.
struct OptDef {
  char short_name = 0;
  std::string_view long_name;
  bool has_arg = false;
};

// What ParseArgs found: options by their long name (or the letter when there is no long
// name), in order, and the positional words.
struct ParsedArgs {
  std::vector<std::pair<std::string, std::string>> opts;
  std::vector<std::string> positional;

  bool Has(std::string_view name) const;
  // The last value given ("" when absent).
  std::string Get(std::string_view name) const;
  // Every value given, each split at commas (`-j 1,2 -j 3` -> 1, 2, 3).
  std::vector<std::string> List(std::string_view name) const;
};

// getopt_long as Slurm's commands use it: "--name=value", "--name value", "-xvalue",
// "-x value", clustered flags ("-nu USER"), "--" ends the options. With
// `stop_at_positional` the first positional word and everything after it are positional
// (sbatch/srun: the script or command and its arguments). Errors are getopt's words:
// "unrecognized option '--foo'", "invalid option -- 'z'", "option '--name' requires an
// argument".
Result<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                             const std::vector<OptDef>& defs,
                             bool stop_at_positional = false);

// A job as scancel/squeue -j/sacct -j name it: `task` -1 is the job (or, for an array's
// id, every task).
struct JobSelector {
  state::JobId id = 0;
  int task = -1;
};
// "12", "12_3", "12_[1-5]", "12_[1,3]": one selector per task named. Error: "Invalid job
// id WORD" (Slurm's words).
Result<std::vector<JobSelector>> ParseJobSelectors(const std::vector<std::string>& words);
bool Matches(const JobSelector& s, const state::JobRecord& j);
// "12" or "12_3": the id the API takes for a selector.
std::string SelectorText(const JobSelector& s);

// A job's id as Slurm prints it: "12", or "A_T" for an array task.
std::string JobIdText(const state::JobRecord& j);

// sacct's State: COMPLETED, FAILED, "CANCELLED by UID", TIMEOUT, NODE_FAIL,
// OUT_OF_MEMORY, PREEMPTED, PENDING, RUNNING, REQUEUED (pending again after a run).
// `uid_of` maps the canceller's name to a uid (nullopt: unknown; the job's owner's uid
// is printed then when it was the owner, else the name).
std::string SacctState(
    const state::JobRecord& j,
    const std::function<std::optional<uint32_t>(const std::string&)>& uid_of = nullptr);
// "exit:signal" ("0:0", "1:0", "0:9").
std::string ExitCodeText(const state::JobRecord& j);

// One item of squeue's or sinfo's -O/--Format: NAME[:[.]WIDTH], its name lowercased and
// its width (20 without one; a leading '.', right-justify, is not kept).
struct LongFormatItem {
  std::string name;
  int width = 20;
};
Result<LongFormatItem> ParseFormatItem(std::string_view item);

// The first line of Slurm's answer to an unknown option, with the hint after it.
std::string UsageHint(std::string_view prog);

}  // namespace hachi::cli::slurm
