// `scontrol show assoc_mgr` (docs/slurm.md "Accounts: sacctmgr"): the association
// manager's users, associations and QoS with their limits and what is in use against
// them, in Slurm 22.05's layout (src/scontrol/info_assoc_mgr.c).
//
// The tree is the one `sacctmgr show assoc` prints (root, each account, each of its
// users); the limits are the config's GPU limits ([limits] account_gpus on an account,
// user_gpus on each of the user's associations: Hachi counts that one across the user's
// accounts). In use: the running jobs' TRES and their time left (GrpTRESRunMins), the
// jobs running, pending and accruing age. Hachi meters decayed GPU time only, so
// GrpTRESMins lists gres/gpu alone and GrpWall's figure is 0.
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "report/priority_report.h"
#include "state/records.h"

namespace hachi::cli::slurm {

struct AssocMgrOptions {
  bool users = true, assoc = true, qos = true;  // flags=; all three when not given
  std::vector<std::string> accounts, user_names, qos_names;  // filters; empty: all
};

// The words after `show assoc_mgr`: accounts=, flags=, qos=, users= (any prefix of
// the tag), each a comma list. Errors in scontrol's words.
Result<AssocMgrOptions> ParseAssocMgrArgs(const std::vector<std::string>& words);

// `jobs`: the pending and running jobs (others are ignored). `uid_of`: a user's uid,
// nullopt when the name has none here (printed as Slurm's NO_VAL, 4294967294).
std::string RenderAssocMgr(
    const AssocMgrOptions& o, const report::PriorityReport& r,
    const std::vector<state::JobRecord>& jobs, Time now,
    const std::function<std::optional<uint32_t>(const std::string&)>& uid_of);

}  // namespace hachi::cli::slurm
