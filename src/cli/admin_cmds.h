// hachi admin backup / migrate (docs/cli.md, docs/storage.md): the state store's
// maintenance, run on the controller's host by whoever may read its state directory.
#pragma once

#include <CLI/CLI.hpp>

namespace hachi::cli {

void AddAdminCommands(CLI::App& app, int* exit_code);

}  // namespace hachi::cli
