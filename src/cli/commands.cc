#include "cli/commands.h"

#include <algorithm>
#include <string_view>

#include "cli/admin_cmds.h"
#include "cli/commtest_cmd.h"
#include "cli/doctor_cmd.h"
#include "cli/job_cmds.h"
#include "cli/sim_cmd.h"
#include "cli/slurm/slurm_cmds.h"
#include "cli/token_cmds.h"
#include "cli/topo_cmd.h"

namespace hachi::cli {
namespace {

using N = std::string_view;
constexpr N kTopo[] = {"topo"};
constexpr N kCommtest[] = {"commtest"};
constexpr N kDoctor[] = {"doctor"};
constexpr N kSim[] = {"sim"};
constexpr N kJobs[] = {"submit", "run",     "queue",   "show", "cancel",
                       "hold",   "release", "explain", "eff",  "report"};
constexpr N kNodes[] = {"nodes", "drain", "resume", "stats"};
constexpr N kDaemons[] = {"server", "agent", "dev"};
constexpr N kToken[] = {"token"};
constexpr N kSlurm[] = {"slurm"};
constexpr N kAdmin[] = {"admin"};

// cli/commands_test.cc checks that each Add* registers exactly the names beside it.
const CommandGroup kGroups[] = {
    {AddTopoCommands, kTopo},          {AddCommtestCommand, kCommtest},
    {AddDoctorCommand, kDoctor},       {AddSimCommands, kSim},
    {AddJobCommands, kJobs},           {AddNodeCommands, kNodes},
    {AddDaemonCommands, kDaemons},     {AddTokenCommands, kToken},
    {slurm::AddSlurmCommands, kSlurm}, {AddAdminCommands, kAdmin},
};

// Top-level options that take a value (main.cc adds them).
constexpr N kValueOptions[] = {"--cacert"};

}  // namespace

std::span<const CommandGroup> CommandGroups() { return kGroups; }

std::string_view CommandWord(std::span<char* const> args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const N arg = args[i];
    if (arg == "--") return "";
    if (!arg.empty() && arg[0] == '-') {
      if (std::find(std::begin(kValueOptions), std::end(kValueOptions), arg) !=
          std::end(kValueOptions)) {
        ++i;  // its value
      }
      continue;
    }
    return arg;
  }
  return "";
}

void AddCommandsFor(CLI::App& app, int* exit_code, std::span<char* const> args) {
  const N word = CommandWord(args);
  for (const CommandGroup& g : kGroups) {
    if (std::find(g.names.begin(), g.names.end(), word) != g.names.end()) {
      return g.add(app, exit_code);
    }
  }
  auto has = [&](N flag) {
    return std::any_of(args.begin(), args.end(),
                       [&](const char* a) { return a == flag; });
  };
  if (word.empty() && has("--version") && !has("--help") && !has("-h")) return;
  for (const CommandGroup& g : kGroups) g.add(app, exit_code);
}

}  // namespace hachi::cli
