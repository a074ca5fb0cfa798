// The sbatch-style options as one table (docs/cli.md "hachi submit"): a row per option
// with its long name, short letter, argument kind, the commands that take it and the
// function that applies its value to the request. The flag parser and the #SBATCH /
// #HACHI directive parser (directives.h) look options up here, srun builds its getopt
// list from the rows it takes, salloc asks here which options take a value, and sbatch
// finds its own flags here: an option exists in exactly one row. Slurm's
// src/common/slurm_opt.c (a slurm_cli_opt_t with a set_func per option) is the model.
//
// The table is a constexpr array of plain records (no static constructors: it costs
// nothing at process start). Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "cli/directives.h"
#include "core/status.h"

namespace hachi::cli {

// Which commands take an option (a row's `commands`, a mask).
enum SubmitCommand : uint8_t {
  kCmdSbatch = 1 << 0,
  kCmdSrun = 1 << 1,
  kCmdSalloc = 1 << 2,
  kCmdSubmit = 1 << 3,  // hachi submit
  kCmdRun = 1 << 4,     // hachi run
  // srun outside an allocation passes the option on to the allocation it makes
  // (sbatch's reading of it): it shapes the allocation, not the step.
  kSrunShapesAllocation = 1 << 5,
};
// The commands whose options BuildSubmitOptions reads (flags and directives alike).
inline constexpr uint8_t kCmdBatchLike = kCmdSbatch | kCmdSalloc | kCmdSubmit | kCmdRun;

// How an option is treated. Ignored options are Slurm options that change nothing
// harmful when dropped (mail, task counts for one-task jobs); refused ones would change
// the job's meaning if dropped, so they are errors with a pointer to what to use.
// kOptionalValue (--nice[=N]): a value only with '=', never the next word. kFrontEnd:
// read by a command's own front-end (sbatch --wait, srun --label), never by
// BuildSubmitOptions; `value` says whether it takes one.
enum class OptionKind : uint8_t {
  kValue,
  kFlag,
  kIgnoredValue,
  kIgnoredFlag,
  kRefused,
  kOptionalValue,
  kFrontEnd,
};

struct SubmitBuild;  // what the set functions fill (submit_options.cc)
using OptionSetter = Status (*)(const OptionOccurrence&, SubmitBuild*);

struct OptionRow {
  std::string_view name;  // the long name, canonical
  char short_name;        // 0: none
  OptionKind kind;
  uint8_t commands;       // SubmitCommand bits
  OptionSetter set;       // applies the value (null: ignored, refused or a front-end's)
  std::string_view note;  // ignored: why it is harmless; refused: what to use instead
  std::string_view alias = {};   // a second long name Slurm accepts
  bool front_end_value = false;  // kFrontEnd: takes a value
};

// Every row, in the order docs/cli.md lists them.
std::span<const OptionRow> SubmitOptionTable();
// The row for a long name (or alias) / short letter among `commands`; null if none.
const OptionRow* FindOption(std::string_view name, uint8_t commands = kCmdBatchLike);
const OptionRow* FindShortOption(char c, uint8_t commands = kCmdBatchLike);
// Whether the option's value may be the next word ("-N 2", "--time 10").
bool TakesValue(const OptionRow& row);

// A count as the options take one: at most 9 decimal digits, nothing else.
std::optional<long long> ParseCount(std::string_view s);

}  // namespace hachi::cli
