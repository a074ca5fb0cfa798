// What `hachi submit` was asked for: the #SBATCH / #HACHI directive lines of a batch
// script and the command-line flags, parsed into a sched::JobRequest and a
// state::JobSpec with Slurm's semantics (docs/cli.md "hachi submit").
//
// Both sources are parsed into a list of option occurrences first (ParseFlags,
// ParseDirectives, both reading the option table of submit_options.h), each with the
// place it came from, then folded into SubmitOptions by BuildSubmitOptions (each
// occurrence through its row's set function): directives first (#SBATCH, then #HACHI),
// then flags, the last occurrence of an option winning. So a flag overrides a directive,
// as in sbatch, and the caller can read the script only after the flags have named it.
//
// Pure functions; no I/O, no environment. Thread-safe.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "sched/cluster.h"
#include "state/records.h"

namespace hachi::cli {

// A job array: `--array=1-100%10`, `1,3,5`, `0-15:4`, or a mix "1-3,8,10-20:5%2".
struct ArraySpec {
  struct Range {
    int first = 0;
    int last = 0;
    int step = 1;
  };
  std::vector<Range> ranges;  // empty: not an array
  int max_running = 0;        // the %N suffix; 0 = no limit
  bool empty() const { return ranges.empty(); }
};
// Parses an --array value, within api::kMaxArrayTasks tasks and ids up to
// api::kMaxArrayTaskId. Errors name the bad piece ("--array" is not prepended).
Result<ArraySpec> ParseArraySpec(std::string_view text);
// The task ids, ascending, without duplicates.
std::vector<int> ExpandArray(const ArraySpec& spec);

// Parses a Slurm time limit: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS. Sets
// *unlimited (and returns 0) for "UNLIMITED" / "infinite" (any case).
Result<Duration> ParseTimeLimit(std::string_view text, bool* unlimited);
// Parses a size: a number with an optional K/M/G/T suffix (binary units), `default_unit`
// when bare ('M' for --mem). Returns MiB, rounding KiB up.
Result<int64_t> ParseSizeMib(std::string_view text, char default_unit = 'M');

// --export (Slurm 22.05): ALL (the default) = the submitter's environment; NONE = none
// of it; ALL,X=1 = all and X; a plain list A,B=2 = only those. The job gets Slurm's and
// Hachi's own variables in every case (agent/environment.h).
struct ExportSpec {
  struct Var {
    std::string name;
    std::optional<std::string> value;  // nullopt: the submitter's value
  };
  bool all = true;
  bool none = false;
  std::vector<Var> vars;
};
// The environment a job inherits from `submitter` under `spec`.
state::EnvList ExportEnvironment(const ExportSpec& spec, state::EnvList submitter);

struct SubmitOptions {
  sched::JobRequest req;
  state::JobSpec spec;
  bool hold = false;
  ArraySpec array;
  // --time=UNLIMITED: req.time_limit stays 0; the caller asks for the partition's
  // maximum (Slurm: "no limit beyond the partition's").
  bool time_unlimited = false;
  std::string wrap;       // --wrap: a command line run by /bin/sh -c instead of a script
  bool parsable = false;  // --parsable: print only the job id
  ExportSpec export_env;  // --export: apply with ExportEnvironment
  // --begin / --deadline as written; ResolveSubmitTimes turns
  // them into req.begin_time / req.deadline against the clock.
  std::string begin_text;
  std::string deadline_text;
  // Options set explicitly, by their long name ("time", "gres", "job-name", ...): the
  // caller fills defaults (name from the script, workdir from cwd) for the others.
  std::set<std::string, std::less<>> explicitly_set;
  // Options that were accepted and ignored, one line each, located like errors.
  std::vector<std::string> warnings;

  bool IsSet(std::string_view long_name) const {
    return explicitly_set.find(long_name) != explicitly_set.end();
  }
};

// One option as found in argv or a directive line, before its value is interpreted.
struct OptionOccurrence {
  std::string name;   // the long name, canonical ("time" for -t)
  std::string value;  // "" for options without a value
  std::string where;  // "--time '9x'" or "job.sh:4: #SBATCH --time=9x"
  int source = 0;     // precedence: 0 #SBATCH, 1 #HACHI, 2 flags
};

struct ParsedOptions {
  std::vector<OptionOccurrence> options;
  std::vector<std::string> positional;  // flags: the script and its arguments
  std::vector<std::string> warnings;    // e.g. a directive after the first command
};

// sbatch-style argv (without the program and subcommand names): options up to the
// first non-option argument or "--"; that argument and all after it are positional
// (the script and its arguments). Both "--opt=value" and "--opt value", "-p value" and
// "-pvalue". Unknown options are errors; values are checked by BuildSubmitOptions.
Result<ParsedOptions> ParseFlags(const std::vector<std::string>& args);
// The directive lines of a batch script. `file_name` names it in messages. Directives
// are read after the shebang, up to the first line that is neither blank nor a comment
// (Slurm's rule); a later #SBATCH line is reported in `warnings`.
Result<ParsedOptions> ParseDirectives(std::string_view script,
                                      std::string_view file_name);
// Folds directives then flags into SubmitOptions and resolves the GPU request:
// --gres=gpu:N and --gpus-per-node=N are per node, --gpus=N is the total.
Result<SubmitOptions> BuildSubmitOptions(const ParsedOptions& directives,
                                         const ParsedOptions& flags);

// Resolves --begin / --deadline (core/slurm_time.h) at `now` in
// the submitter's time zone (`utc_offset`, LocalUtcOffset). A begin time already past
// is no limit; a deadline already past is an error.
Status ResolveSubmitTimes(Time now, int64_t utc_offset, SubmitOptions* o);

}  // namespace hachi::cli
