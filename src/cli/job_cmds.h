// The user commands (docs/cli.md): submit, run, queue, show, cancel, hold, release,
// nodes, drain, resume, stats — Slurm's sbatch/srun/squeue/scontrol/scancel/sinfo with
// Hachi's names. Each talks to the server through ApiClient; errors are one line on
// stderr and a non-zero exit. Registration only; the handlers run from CLI11 callbacks.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "state/records.h"

namespace hachi::cli {

// `hachi submit ARGS` / `hachi run ARGS`: sbatch/srun-style arguments (options, then a
// script or "--" and a command) are not CLI11's to parse; main() hands them over raw.
int SubmitMain(const std::vector<std::string>& args);
int RunMain(const std::vector<std::string>& args);

// Job ids as typed ("12"); kInvalidArgument naming the first that is not one.
Result<std::vector<state::JobId>> ParseIds(const std::vector<std::string>& words);

void AddJobCommands(CLI::App& app,
                    int* exit_code);  // submit run queue show cancel hold release
void AddNodeCommands(CLI::App& app, int* exit_code);    // nodes drain resume stats
void AddDaemonCommands(CLI::App& app, int* exit_code);  // server agent dev

}  // namespace hachi::cli
