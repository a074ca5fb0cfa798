// sshare and sprio under Slurm's names (docs/slurm.md "Fair share and priority"): the
// server's fair share and its pending jobs' priority terms (GET /api/v1/priority,
// report/priority_report.h) as Slurm 22.05 prints them.
//
// Hachi's fair share is Slurm's classic multifactor one (PriorityFlags=NO_FAIR_TREE):
// an account's factor is 2^(-EffectvUsage/NormShares), and its users' jobs get the
// account's factor. So sshare shows each account's FairShare, and a user's row shows
// RawShares "parent" and the factor its jobs get. Usage is decayed GPU-seconds (Slurm's
// RawUsage is CPU-seconds): GPUs are what a Hachi cluster shares.
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "cli/slurm/print_fields.h"
#include "cli/slurm/slurm_text.h"
#include "core/status.h"
#include "report/priority_report.h"

namespace hachi::cli::slurm {

struct SshareOptions {
  bool help = false, usage = false;
  bool all_users = false;             // -a: every user's rows
  std::vector<std::string> accounts;  // -A: only these accounts
  std::vector<std::string> users;     // -u (default: the caller)
  bool users_only = false;            // -U: no account rows
  bool long_list = false;             // -l
  FieldOutput out;                    // -p/-P, -n/-h
  std::string format;                 // -o (empty: the default for -l or not)
  std::string server;
};
// `me`: the caller, whose rows are shown unless -a or -u.
Result<SshareOptions> ParseSshareArgs(const std::vector<std::string>& args,
                                      const std::string& me);
Result<std::string> RenderSshare(const SshareOptions& o, const report::PriorityReport& r);

struct SprioOptions {
  bool help = false, usage = false;
  std::vector<state::JobId> jobs;  // -j (empty: every pending job)
  bool jobs_given = false;
  std::vector<std::string> users;       // -u
  std::vector<std::string> partitions;  // -p
  bool long_list = false;               // -l
  bool normalized = false;              // -n
  bool weights = false;                 // -w
  bool noheader = false;                // -h
  std::string format;                   // -o
  std::string sort;                     // -S (default "i": job id)
  std::string server;
};
Result<SprioOptions> ParseSprioArgs(const std::vector<std::string>& args);
// kUnsatisfiable, with Slurm's words, when the server orders by submit time (Slurm's
// priority/basic).
Result<std::string> RenderSprio(const SprioOptions& o, const report::PriorityReport& r);

}  // namespace hachi::cli::slurm
