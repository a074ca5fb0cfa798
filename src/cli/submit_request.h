// The request `hachi submit` / `hachi run` build from sbatch/srun-style arguments: the
// batch script read and its directives folded with the flags (cli/directives.h), the
// working directory and environment filled in. Shared with the Slurm front-ends
// (cli/slurm/: sbatch, srun). Reads the script, cwd and environ; not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "api/protocol.h"
#include "cli/directives.h"
#include "core/status.h"

namespace hachi::cli {

// `run`: the command after "--" (or the first positional) is wrapped instead of a
// script read. Warnings (options accepted and ignored) go to `warnings_out` when given,
// else to stderr as "hachi: warning: ...".
// `stdin_script`: the batch script when no script file is named and there is no
// --wrap (sbatch reads its standard input then); null: none, an error as before.
// `bad_option`, when given, says whether an error came from the options (the command
// line's or the script's #SBATCH lines) rather than from reading the script: sbatch
// exits 255 for the first, 1 for the second, as Slurm's does.
Result<api::SubmitRequest> BuildRequest(std::vector<std::string> args, bool run,
                                        SubmitOptions* parsed_out,
                                        std::vector<std::string>* warnings_out,
                                        const std::string* stdin_script = nullptr,
                                        bool* bad_option = nullptr);

}  // namespace hachi::cli
