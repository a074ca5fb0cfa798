// `hachi topo show / check / alloc`: topology of one node, its health, and which GPUs a
// k-GPU job should get. Registration and handlers; single-threaded.
#pragma once

#include <CLI/CLI.hpp>

namespace hachi::cli {

// Adds the `topo` subcommand tree to `app`. Its handlers run from CLI11 callbacks and
// set *exit_code.
void AddTopoCommands(CLI::App& app, int* exit_code);

}  // namespace hachi::cli
