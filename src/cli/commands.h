// The `hachi` command's CLI11 tree, built for the command invoked only.
//
// Building the whole tree (every command's options, validators and help text) cost a
// process as much as ld.so and libc together, and every `hachi` call, every Slurm name
// and every job's start paid it. So the tree is built per group: the first word of the
// command line picks the group whose Add* function registers it, and only that group is
// built. Help without a command, a word no group knows and errors build them all, so
// `hachi --help` and CLI11's messages are what they were; `--version` alone builds none.
//
// Free functions over a constant table; no state.
#pragma once

#include <CLI/CLI.hpp>
#include <span>
#include <string_view>

namespace hachi::cli {

// One Add* function and the top-level commands it registers.
struct CommandGroup {
  void (*add)(CLI::App& app, int* exit_code);
  std::span<const std::string_view> names;
};

// Every group, in the order `hachi --help` lists them.
std::span<const CommandGroup> CommandGroups();

// The command word of a `hachi` command line (argv[1..]): the first argument that is not
// a top-level option or an option's value; "" when there is none.
std::string_view CommandWord(std::span<char* const> args);

// Adds to `app` the groups the command line `args` (argv[1..]) needs: the group of its
// command word, else every group, or none for `--version` alone.
void AddCommandsFor(CLI::App& app, int* exit_code, std::span<char* const> args);

}  // namespace hachi::cli
