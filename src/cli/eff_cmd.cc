// `hachi eff JOB` and `seff JOB`: GET /jobs/ID/usage, printed by FormatEff.
#include "cli/eff_cmd.h"

#include <ctime>
#include <iostream>

#include "cli/client.h"
#include "cli/eff_format.h"
#include "cli/fail.h"
#include "cli/job_cmds.h"
#include "cli/slurm/slurm_cmds.h"

namespace hachi::cli {
namespace {

// The text for job `id` (an array task "A_T" is not a job id here: its own id is).
Result<std::string> EffText(const std::string& server, const std::string& id, bool raw) {
  Result<std::vector<state::JobId>> ids = ParseIds({id});
  if (!ids.ok()) return ids.status();
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(server);
  if (!c.ok()) return c.status();
  Result<std::string> reply =
      (*c)->Raw("/jobs/" + std::to_string(ids->front()) + "/usage");
  if (!reply.ok()) return reply.status();
  if (raw) return *reply + "\n";
  return FormatEff(*reply, static_cast<Time>(std::time(nullptr)));
}

}  // namespace

void AddEffCommand(CLI::App& app, int* exit_code) {
  struct EffFlags {
    std::string server, id;
    bool json = false;
  };
  auto f = std::make_shared<EffFlags>();
  CLI::App* cmd = app.add_subcommand(
      "eff", "What a job did with its GPUs, CPUs and memory, with findings (seff)");
  cmd->add_option("id", f->id, "Job id")->required();
  cmd->add_option("--server", f->server, ServerFlagHelp());
  cmd->add_flag("--json", f->json, "The server's usage object (docs/api.md)");
  cmd->callback([f, exit_code] {
    Result<std::string> text = EffText(f->server, f->id, f->json);
    if (!text.ok()) return void(*exit_code = Fail(text.status()));
    std::cout << *text;
  });
}

namespace slurm {

int SeffMain(const std::vector<std::string>& args) {
  if (args.size() == 1 && args[0] == "--version") {
    std::cout << "seff (hachi) 0.1.0\n";
    return 0;
  }
  if (args.size() != 1 || args[0] == "-h" || args[0] == "--help") {
    std::cout << "Usage: seff JOBID\n"
                 "What job JOBID did with its CPUs, memory and GPUs (hachi eff; "
                 "docs/efficiency.md).\n";
    return args.size() == 1 ? 0 : 1;
  }
  Result<std::string> text = EffText("", args[0], false);
  if (!text.ok()) return SlurmFail("seff", text.status().message());
  std::cout << *text;
  return 0;
}

}  // namespace slurm
}  // namespace hachi::cli
