// `hachi sim`: replay a job trace on a simulated cluster with the real scheduler and
// report waits, completion times, utilisation and cycle times (docs/sim.md).
// Registration and handler; single-threaded.
#pragma once

#include <CLI/CLI.hpp>

namespace hachi::cli {

// Adds the `sim` subcommand to `app`. Its handler runs from a CLI11 callback and sets
// *exit_code: 0 done, 1 the simulation failed (stuck, inconsistent plan), 2 bad input.
void AddSimCommands(CLI::App& app, int* exit_code);

}  // namespace hachi::cli
