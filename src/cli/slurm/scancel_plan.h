// scancel and scontrol under Slurm's names (docs/cli.md): what to ask the server for,
// from the arguments and (with filters) the queue; and the text of scontrol's show
// partition / node / config. Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "api/launch_spec.h"
#include "cli/slurm/sinfo_format.h"
#include "cli/slurm/slurm_text.h"
#include "core/status.h"
#include "core/time.h"
#include "state/records.h"

namespace hachi::cli::slurm {

struct ScancelOptions {
  bool help = false, usage = false;
  std::vector<JobSelector> jobs;
  std::vector<std::string> users, names, partitions, accounts;
  std::vector<state::JobState> states;
  std::string signal;  // "" cancel; else a name without SIG ("USR1") or a number
  // Whom a signal is for, as Slurm's scancel: the steps' tasks; -b the batch shell;
  // --full (or KILL, which Slurm sends to the batch step too) every process.
  api::SignalScope scope = api::SignalScope::kSteps;
  bool quiet = false;
  bool verbose = false;
  std::string server;
  bool HasFilters() const {
    return !users.empty() || !names.empty() || !partitions.empty() || !accounts.empty() ||
           !states.empty();
  }
};
Result<ScancelOptions> ParseScancelArgs(const std::vector<std::string>& args,
                                        const std::string& me);

// One request: `target` as the API takes it ("12", "12_3"), and for a signal the body
// of POST /jobs/{target}/signal ({"signal": "USR1" or 10, "scope": "steps"}).
struct ScancelAction {
  std::string target;
  std::string path;  // after the API prefix: "/jobs/12/cancel", "/jobs/12_3/signal"
  std::string body;
};
// Without filters the selectors go as they are (an array's id cancels every task);
// with filters each unfinished job that matches both the selectors (if any) and every
// filter.
std::vector<ScancelAction> PlanScancel(const ScancelOptions& o,
                                       const std::vector<state::JobRecord>& jobs);

// scontrol show partition / node (Slurm's key=value blocks) and show config.
std::string FormatShowPartition(const PartitionInfo& p,
                                const std::vector<state::NodeStatus>& nodes);
std::string FormatShowNode(const state::NodeStatus& n);
std::string FormatShowConfig(Time now, const std::string& server,
                             const std::vector<PartitionInfo>& partitions);

}  // namespace hachi::cli::slurm
