// `hachi eff JOB` (docs/efficiency.md): what a job did with its GPUs, CPUs
// and memory, with findings; seff under Slurm's name (cli/slurm/slurm_cmds.h).
#pragma once

#include <CLI/CLI.hpp>

namespace hachi::cli {

void AddEffCommand(CLI::App& app, int* exit_code);

}  // namespace hachi::cli
