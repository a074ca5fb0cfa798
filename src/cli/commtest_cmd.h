// `hachi commtest`: what this node's interconnect delivers, measured through the CUDA
// driver and compared with what each link should give (diag/commtest.h). Registration
// and handler; single-threaded.
#pragma once

#include <CLI/CLI.hpp>

namespace hachi::cli {

// Adds `commtest` to `app`; its handler sets *exit_code (0 good, 1 warnings, 2 a figure
// below the threshold, a failed copy, or bad input).
void AddCommtestCommand(CLI::App& app, int* exit_code);

}  // namespace hachi::cli
