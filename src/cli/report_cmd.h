// `hachi report` (docs/efficiency.md): GPU-hours allocated and used per
// account, user, partition or node group over a period, and the idlest jobs, from
// GET /report; as sreport's table, CSV or the server's JSON.
#pragma once

#include <CLI/CLI.hpp>

namespace hachi::cli {

void AddReportCommand(CLI::App& app, int* exit_code);

}  // namespace hachi::cli
