// `hachi explain ID` (and the "Explain:" block of `hachi show job ID` for a pending
// job): the server's explanation (report/explain.h) as text — the queue position, the
// largest free GPU set now against what the job needs, the nodes by why they refuse
// it, the earliest estimated start from the backfill timeline, and the job's history.
// Times print in the local time zone (tests set TZ=UTC). Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "report/explain.h"

namespace hachi::cli {

// Every line starts with `indent`. `title`: first a line naming the job, its state and
// reason, and the scheduler's sentence (show job prints those itself).
std::string FormatExplain(const report::JobExplain& e, std::string_view indent,
                          bool title);

}  // namespace hachi::cli
