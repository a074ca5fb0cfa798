// The checks a submit request passes that need no cluster and no caller: one pipeline,
// run by the client before it sends a request (cli/client.cc) and by the server before
// it looks at the cluster (server::Controller::CheckSubmit), so that both refuse the
// same requests with the same words. In order:
//   - sizes and ranges (request_limits.h: no 10^9 GPUs, at most kMaxArrayTasks tasks);
//   - what the spec means (CheckJobSpec: paths, the name as a file name, the
//     environment's names, the container image).
// Who may submit (server::Authorizer) and whether the job fits the cluster
// (sched::ValidateRequest) come after, on the server.
//
// Pure functions; thread-safe.
#pragma once

#include "api/protocol.h"
#include "core/status.h"
#include "state/records.h"

namespace hachi::api {

// A job's spec as submitted (kInvalidArgument naming the field): the working directory
// absolute, output paths absolute or relative to it, no ".." component in either (a
// job's output must land where its path says, not be walked elsewhere through a pattern
// or a link in the name), no NUL or newline in a path, the job name usable in a file
// name (%x), environment names that are names, and sizes a real job has. The agent opens
// the output files after it became the job's user (agent/spawn.cc), so the checks here
// are about meaning, not about privileges. Also what `scontrol update` may change.
Status CheckJobSpec(const state::JobSpec& spec);

// Every check above, in order; the first refusal.
Status CheckSubmitRequest(const SubmitRequest& request);

}  // namespace hachi::api
