// `hachi report`: GET /report, printed by FormatReport / FormatReportCsv; by pool, GET
// /pools' burst pools over the same period too (FormatPoolsPowered).
#include "cli/report_cmd.h"

#include <ctime>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/client.h"
#include "cli/fail.h"
#include "cli/report_format.h"

namespace hachi::cli {
namespace {

// GET /pools' burst pools.
Result<std::vector<PoolPowered>> BurstPools(const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.contains("pools") || !j["pools"].is_array()) {
    return Internal("GET /pools: the server's reply has no pools");
  }
  std::vector<PoolPowered> out;
  try {
    for (const nlohmann::json& p : j["pools"]) {
      if (p.value("kind", "") != "burst") continue;
      out.push_back(PoolPowered{p.at("name").get<std::string>(), p.at("nodes").get<int>(),
                                p.at("powered").get<int>(),
                                p.at("powered_gpu_hours").get<double>(),
                                p.at("cost").get<double>()});
    }
  } catch (const nlohmann::json::exception& e) {
    return Internal(std::string("GET /pools: ") + e.what());
  }
  return out;
}

}  // namespace

void AddReportCommand(CLI::App& app, int* exit_code) {
  struct ReportFlags {
    std::string server, from = "now-7days", to = "now", by = "account";
    int top = 10;
    bool csv = false, json = false;
  };
  auto f = std::make_shared<ReportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "GPU-hours allocated and used by account, user, partition, node group or pool "
      "(sreport); by pool, also what the burst pools were powered and cost");
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
    if (f->csv || f->by != "pool") return;
    // By pool: the burst pools' powered time too, over the same period.
    Result<std::string> pools =
        (*c)->Raw("/pools?from=" + std::to_string(*from) + "&to=" + std::to_string(*to));
    if (!pools.ok()) return void(*exit_code = Fail(pools.status()));
    Result<std::vector<PoolPowered>> burst = BurstPools(*pools);
    if (!burst.ok()) return void(*exit_code = Fail(burst.status()));
    std::cout << FormatPoolsPowered(*burst);
  });
}

}  // namespace hachi::cli
