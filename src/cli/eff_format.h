// `hachi eff JOB` and `seff JOB` (docs/efficiency.md): what a job did with
// what it was given, as Slurm's seff prints it (CPU and memory efficiency), then per GPU
// its utilisation (mean, p50, p95, max), memory peak and power, and the findings in
// plain words. Pure: the server's GET /jobs/ID/usage reply in, text out.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "core/time.h"

namespace hachi::cli {

// The reply's text (docs/api.md, "Job usage") as `hachi eff` prints it; `now` for a
// running job's wall-clock time. kInvalidArgument naming the field of a reply it cannot
// read.
Result<std::string> FormatEff(std::string_view reply, Time now);

}  // namespace hachi::cli
