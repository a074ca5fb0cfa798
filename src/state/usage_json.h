// JobUsage (state/usage.h) as JSON: the store's usage rows and the API's
// GET /jobs/ID/usage (docs/api.md, "Job usage"). One format for both: the raw sums
// and the histogram that let a run's summary go on growing after a server restart,
// and the figures derived from them (means, p50/p95) for readers that only display.
//
// UsageFromJson reads the raw fields and ignores the derived ones; an error names the
// field path ("usage.gpus[2].series[0]: expected an array of 4 integers"). Pure
// functions; thread-safe. nlohmann stays inside usage_json.cc.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "state/usage.h"

namespace hachi::state {

std::string UsageToJson(const JobUsage& u);
Result<JobUsage> UsageFromJson(std::string_view text);

}  // namespace hachi::state
