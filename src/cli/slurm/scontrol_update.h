// scontrol update (docs/cli.md "scontrol update"): Slurm's Field=Value words
// as the body of POST /jobs/ID/update (docs/api.md "Update"). Each field's value is read
// as the sbatch option it stands for reads it (cli/directives.h), so TimeLimit takes
// what --time takes and Features what -C takes. Pure functions; thread-safe.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cli/slurm/slurm_text.h"
#include "core/status.h"
#include "core/time.h"
#include "state/records.h"

namespace hachi::cli::slurm {

struct UpdateWords {
  std::vector<JobSelector> jobs;  // JobId=12,13_2 (Slurm also takes Job=)
  // The other fields, in order: the name as given ("TimeLimit") and the value.
  std::vector<std::pair<std::string, std::string>> fields;
};
// `words`: what follows "update". kInvalidArgument naming the word for one without
// "=" (but Nice), no JobId, or a field Hachi cannot change ("Update of this parameter
// is not supported: Shared=yes").
Result<UpdateWords> ParseUpdateWords(const std::vector<std::string>& words);

// The update's body for `job` as it is now: TimeLimit=+30 / -30 count from its
// limit, NumNodes alone keeps its GPUs per node and Gres alone its node count.
// Times (StartTime, Deadline) are read at `now` in the zone `utc_offset`. Errors name
// the field ("TimeLimit=9x: '9x' is not a time limit ...").
Result<std::string> UpdateBody(
    const std::vector<std::pair<std::string, std::string>>& fields,
    const state::JobRecord& job, Time now, int64_t utc_offset);

// scontrol update NodeName=LIST State=STATE [Reason=WHY]: what to ask of each node.
// DRAIN and FAIL drain it (POST /nodes/N/drain; Slurm requires a reason), RESUME, UNDRAIN
// and IDLE put it back (POST /nodes/N/resume). A state Slurm knows that Hachi cannot set
// by hand (DOWN: an agent's silence makes a node down; POWER_*, FUTURE, ...) is refused
// naming it; an unknown one gets Slurm's lines ("Invalid input: State=X\nRequest
// aborted\nValid states are: ..."). Errors are the lines scontrol prints, without a
// prefix.
struct NodeUpdate {
  std::vector<std::string> nodes;  // the list expanded
  bool drain = false;              // else resume
  std::string reason;
};
bool IsNodeUpdate(const std::vector<std::string>& words);  // NodeName= first
Result<NodeUpdate> ParseNodeUpdate(const std::vector<std::string>& words);

}  // namespace hachi::cli::slurm
