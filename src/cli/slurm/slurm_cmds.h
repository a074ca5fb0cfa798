// The Slurm front-ends (docs/cli.md "Slurm's names"): the `hachi` binary invoked as
// sbatch, squeue, scancel, sinfo, sacct, scontrol, srun, salloc, seff, sshare, sprio,
// sacctmgr, sstat, sreport or sattach (the base name of argv[0])
// behaves as that Slurm 22.05 command: its flags, output, exit codes and
// "prog: error: ..." wording. Each command is a thin shell over a pure core
// (squeue_format.h, sinfo_format.h, sacct_format.h, scancel_plan.h) and ApiClient.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hachi::cli {
class ApiClient;
}  // namespace hachi::cli

namespace hachi::cli::slurm {

inline constexpr std::string_view kSlurmNames[] = {
    "sbatch", "squeue", "scancel", "sinfo",    "sacct", "scontrol", "srun",   "salloc",
    "seff",   "sshare", "sprio",   "sacctmgr", "sstat", "sreport",  "sattach"};
bool IsSlurmName(std::string_view name);
// Runs command `name` with its arguments (argv after argv[0]); the exit code.
int SlurmMain(std::string_view name, const std::vector<std::string>& args);

int SbatchMain(const std::vector<std::string>& args);
int SqueueMain(const std::vector<std::string>& args);
int ScancelMain(const std::vector<std::string>& args);
int SinfoMain(const std::vector<std::string>& args);
int SacctMain(const std::vector<std::string>& args);
int ScontrolMain(const std::vector<std::string>& args);
int SrunMain(const std::vector<std::string>& args);      // srun.cc
int SallocMain(const std::vector<std::string>& args);    // srun.cc
int SeffMain(const std::vector<std::string>& args);      // eff_cmd.cc
int SshareMain(const std::vector<std::string>& args);    // share_cmds.cc
int SprioMain(const std::vector<std::string>& args);     // share_cmds.cc
int SacctmgrMain(const std::vector<std::string>& args);  // share_cmds.cc
int SstatMain(const std::vector<std::string>& args);     // query_cmds.cc
// scontrol show assoc_mgr WORDS... (the words after "assoc_mgr"); share_cmds.cc.
int ShowAssocMgr(ApiClient& c, const std::vector<std::string>& words);
// A user's uid on this host (the password database), nullopt when it has none.
std::optional<uint32_t> LocalUid(const std::string& name);  // query_cmds.cc
int SreportMain(const std::vector<std::string>& args);      // query_cmds.cc
int SattachMain(const std::vector<std::string>& args);      // srun.cc
int SstatMain(const std::vector<std::string>& args);        // query_cmds.cc

// `hachi slurm install-links DIR [--force]`.
void AddSlurmCommands(CLI::App& app, int* exit_code);

// "prog: error: message" on stderr; returns 1 (Slurm's commands exit 1 on errors).
int SlurmFail(std::string_view prog, std::string_view message);
// A bad argument: getopt's line and Slurm's "Try ... --help" hint for unknown options,
// else SlurmFail. Returns 1.
int SlurmBadArgs(std::string_view prog, const Status& s);

}  // namespace hachi::cli::slurm
