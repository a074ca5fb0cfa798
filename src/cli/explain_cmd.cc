#include "cli/explain_cmd.h"

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/client.h"
#include "cli/explain_format.h"
#include "cli/fail.h"

namespace hachi::cli {

Result<report::JobExplain> FetchExplain(ApiClient& client, state::JobId id) {
  Result<std::string> body = client.Raw("/jobs/" + std::to_string(id));
  if (!body.ok()) return body.status();
  const nlohmann::json j = nlohmann::json::parse(*body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Internal("GET /jobs/" + std::to_string(id) +
                    ": the reply is not a JSON object");
  }
  auto e = j.find("explain");
  if (e == j.end()) {
    return InvalidArgument(
        "the server does not explain jobs (it predates `hachi explain`)");
  }
  return report::JobExplainFromJson(e->dump());
}

void AddExplainCommand(CLI::App& app, int* exit_code) {
  struct Flags {
    std::string server, id;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "explain",
      "Why a job waits (queue position, free GPUs, nodes by reason, earliest start)");
  cmd->add_option("id", f->id, "Job id")->required();
  cmd->add_option("--server", f->server, ServerFlagHelp());
  cmd->add_flag("--json", f->json, "The explain object as the server sends it");
  cmd->callback([f, exit_code] {
    char* end = nullptr;
    const long long id = std::strtoll(f->id.c_str(), &end, 10);
    if (f->id.empty() || *end != '\0' || id <= 0) {
      return void(*exit_code = Fail(InvalidArgument("'" + f->id + "' is not a job id")));
    }
    Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(f->server);
    if (!c.ok()) return void(*exit_code = Fail(c.status()));
    Result<report::JobExplain> e = FetchExplain(**c, id);
    if (!e.ok()) return void(*exit_code = Fail(e.status()));
    if (f->json) {
      std::cout << report::JobExplainToJson(*e) << "\n";
      return;
    }
    std::cout << FormatExplain(*e, "", true);
  });
}

}  // namespace hachi::cli
