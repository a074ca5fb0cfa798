// Diagnosis: why a job is still pending, as a reason code and numbers (plan.h). The
// hot path only fills numbers; Diagnosis::Format (diagnose.cc) makes the text when
// someone asks. Functions of the cycle context; per cycle.
#pragma once

#include "sched/context.h"
#include "sched/filter.h"
#include "sched/plan.h"

namespace hachi::sched {

// Reason and numbers for a job that passed the job-level checks but could not start
// now, from the verdicts of the nodes the placement looked at (`tally`; empty when the
// placement was skipped because no node had enough free GPUs).
void DiagnoseBlocked(CycleContext& ctx, const JobShape& job, const VerdictTally& tally,
                     Diagnosis* d);

}  // namespace hachi::sched
