// The refusal of an action on a job that already ended, in one wording: the server says
// it (cancel, signal) and a client tells it from other refusals by it (Slurm's scancel is
// silent and exits 0 for such a job).
#pragma once

#include <cstddef>
#include <string>

#include "core/status.h"
#include "state/records.h"

namespace hachi::api {

// "job 12 already ended (COMPLETED)".
inline Status JobAlreadyEnded(const state::JobRecord& job) {
  return InvalidArgument("job " + std::to_string(job.id) + " already ended (" +
                         std::string(state::JobStateName(job.state)) + ")");
}

// "array 12: all its 3 tasks already ended".
inline Status ArrayAlreadyEnded(state::JobId array, size_t tasks) {
  return InvalidArgument("array " + std::to_string(array) + ": all its " +
                         std::to_string(tasks) + " tasks already ended");
}

// Whether `s` is one of the two above (as the HTTP client hands it back).
inline bool IsAlreadyEnded(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument &&
         s.message().find(" already ended") != std::string::npos;
}

}  // namespace hachi::api
