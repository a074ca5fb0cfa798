// hachi token create / list / revoke (docs/cli.md): API tokens for the TCP API. Admins
// only on the server's side; root on the local Unix socket is an admin.
#pragma once

#include <CLI/CLI.hpp>

namespace hachi::cli {

void AddTokenCommands(CLI::App& app, int* exit_code);

}  // namespace hachi::cli
