// `hachi explain ID` (docs/cli.md): why a job waits, with numbers, or what happened to
// it — the "explain" object of GET /api/v1/jobs/ID rendered by FormatExplain.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/client.h"
#include "core/status.h"
#include "report/explain.h"

namespace hachi::cli {

void AddExplainCommand(CLI::App& app, int* exit_code);

// The server's explanation of job `id`. kInvalidArgument when the
// server's reply has none (a server older than the explain object).
Result<report::JobExplain> FetchExplain(ApiClient& client, state::JobId id);

}  // namespace hachi::cli
