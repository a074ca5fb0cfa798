// The one `hachi` binary: user and admin commands (DESIGN.md §1).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "agent/waiter.h"
#include "cli/commands.h"
#include "cli/job_cmds.h"
#include "cli/slurm/slurm_cmds.h"
#include "core/strings.h"

namespace {
constexpr char kVersion[] = "hachi 0.1.0";
}  // namespace

int main(int argc, char** argv) {
  // `hachi --version` alone answers before CLI11, whose version flag works by throwing:
  // building the App and unwinding through the binary's exception tables were 10 of its
  // 136 page faults and a fifth of its instructions, and it stands for what every command
  // pays to start (docs/benchmarks.md, "Process start"). The same text as CLI11's.
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::puts(kVersion);
    return 0;
  }
  // Invoked as sbatch, squeue, ... (links from `hachi slurm install-links`): that Slurm
  // command (cli/slurm/slurm_cmds.h).
  if (argc >= 1) {
    const std::string name = hachi::BaseName(argv[0]);
    if (hachi::cli::slurm::IsSlurmName(name)) {
      return hachi::cli::slurm::SlurmMain(
          name, std::vector<std::string>(argv + 1, argv + argc));
    }
  }
  // The job waiter (agent/waiter.h) sits between the agent and every job: first, and
  // without the CLI's setup, since it starts with each job.
  if (argc >= 2 && std::strcmp(argv[1], hachi::agent::kWaiterCommand) == 0) {
    return hachi::agent::WaiterMain(argc, argv);
  }
  if (argc == 2 && std::strcmp(argv[1], hachi::agent::kHoldCommand) == 0) {
    return hachi::agent::HoldMain();
  }
  // submit/run take sbatch/srun-style arguments, parsed by cli/directives.h.
  if (argc >= 2 && (std::string(argv[1]) == "submit" || std::string(argv[1]) == "run")) {
    const std::vector<std::string> args(argv + 2, argv + argc);
    return std::string(argv[1]) == "submit" ? hachi::cli::SubmitMain(args)
                                            : hachi::cli::RunMain(args);
  }
  CLI::App app{"hachi: a job scheduler for clusters of 8-GPU servers"};
  app.set_version_flag("--version", kVersion);
  app.require_subcommand(1);
  // For https:// servers with their own CA (api/http_client.h); `submit` and `run` take
  // $HACHI_CA_CERT, which this sets.
  std::string cacert;
  app.add_option("--cacert", cacert,
                 "CA certificate (PEM) of an https:// server (or $HACHI_CA_CERT)")
      ->each([](const std::string& path) { ::setenv("HACHI_CA_CERT", path.c_str(), 1); });
  int exit_code = 0;
  // Only the invoked command's part of the tree (cli/commands.h).
  hachi::cli::AddCommandsFor(app, &exit_code,
                             std::span<char* const>(argv + 1, argv + argc));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}
