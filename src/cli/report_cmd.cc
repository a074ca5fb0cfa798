// `hachi report`: GET /report, printed by FormatReport / FormatReportCsv.
#include "cli/report_cmd.h"

#include <ctime>
#include <iostream>
#include <memory>
#include <string>

#include "cli/client.h"
#include "cli/fail.h"
#include "cli/report_format.h"

namespace hachi::cli {

void AddReportCommand(CLI::App& app, int* exit_code) {
  struct ReportFlags {
    std::string server, from = "now-7days", to = "now", by = "account";
    int top = 10;
    bool csv = false, json = false;
  };
  auto f = std::make_shared<ReportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "GPU-hours allocated and used by account, user, partition or node group (sreport)");
  cmd->add_option("-S,--from", f->from,
                  "Start of the period, as sacct -S takes it, or Unix seconds "
                  "(default now-7days)");
  cmd->add_option("-E,--to", f->to, "End of the period (default now)");
  cmd->add_option("--by", f->by,
                  "account, user, accountuser (each account's users), partition, "
                  "nodegroup or pool")
      ->check(CLI::IsMember(
          {"account", "user", "accountuser", "partition", "nodegroup", "pool"}));
  cmd->add_option("--top", f->top, "How many of the idlest jobs to list (0: none)")
      ->check(CLI::Range(0, 1000));
  cmd->add_flag("--csv", f->csv, "CSV");
  cmd->add_flag("--json", f->json, "The server's report object (docs/api.md)");
  cmd->add_option("--server", f->server, ServerFlagHelp());
  cmd->callback([f, exit_code] {
    const Time now = static_cast<Time>(std::time(nullptr));
    Result<Time> from = ParseReportTime(f->from, now);
    if (!from.ok()) return void(*exit_code = Fail(from.status()));
    Result<Time> to = ParseReportTime(f->to, now);
    if (!to.ok()) return void(*exit_code = Fail(to.status()));
    Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(f->server);
    if (!c.ok()) return void(*exit_code = Fail(c.status()));
    Result<std::string> body =
        (*c)->Raw("/report?from=" + std::to_string(*from) + "&to=" + std::to_string(*to) +
                  "&by=" + f->by + "&top=" + std::to_string(f->top));
    if (!body.ok()) return void(*exit_code = Fail(body.status()));
    if (f->json) {
      std::cout << *body << "\n";
      return;
    }
    Result<report::GpuReport> r = report::GpuReportFromJson(*body);
    if (!r.ok()) return void(*exit_code = Fail(r.status()));
    std::cout << (f->csv ? FormatReportCsv(*r) : FormatReport(*r));
  });
}

}  // namespace hachi::cli
