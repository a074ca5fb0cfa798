// hachi nodes / drain / resume / stats.
#include <ctime>
#include <iostream>

#include "cli/client.h"
#include "cli/fail.h"
#include "cli/job_cmds.h"
#include "cli/slurm_format.h"
#include "config/values.h"
#include "report/job_stats.h"

namespace hachi::cli {
namespace {

// "24h", "30m", "1h30m": the config file's duration syntax, and more than zero.
Result<Duration> ParseSpan(const std::string& text, const char* flag) {
  Result<Duration> d = config::ParseDuration(text);
  if (!d.ok()) return InvalidArgument(std::string(flag) + ": " + d.status().message());
  if (*d <= 0) return InvalidArgument(std::string(flag) + ": must be longer than 0s");
  return d;
}

}  // namespace

void AddNodeCommands(CLI::App& app, int* exit_code) {
  struct NodesFlags {
    std::string server, format;
    bool json = false, gpus = false;
  };
  auto n = std::make_shared<NodesFlags>();
  CLI::App* nodes = app.add_subcommand("nodes", "List nodes and their GPUs (sinfo)");
  nodes->add_option("--server", n->server, ServerFlagHelp());
  nodes->add_option("-o,--format", n->format, "Output format (%n %G %C %P %t ...)");
  nodes->add_flag("--gpus", n->gpus,
                  "Also draw each node's GPUs and the jobs holding them");
  nodes->add_flag("--json", n->json, "JSON (node records with their GPU use)");
  nodes->callback([n, exit_code] {
    Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(n->server);
    if (!c.ok()) return void(*exit_code = Fail(c.status()));
    if (n->json) {
      Result<std::string> raw = (*c)->Raw("/nodes");
      if (!raw.ok()) return void(*exit_code = Fail(raw.status()));
      std::cout << *raw << "\n";
      return;
    }
    Result<std::vector<state::NodeStatus>> list = (*c)->Nodes();
    if (!list.ok()) return void(*exit_code = Fail(list.status()));
    Result<std::string> text = FormatNodes(*list, n->format);
    if (!text.ok()) return void(*exit_code = Fail(text.status()));
    std::cout << *text;
    if (n->gpus) {
      for (const state::NodeStatus& node : *list) {
        const std::string pic = FormatGpuPicture(node);
        std::cout << pic << (pic.empty() || pic.back() == '\n' ? "" : "\n");
      }
    }
  });

  struct DrainFlags {
    std::string server, node, reason;
    int gpu = -1;
  };
  auto d = std::make_shared<DrainFlags>();
  CLI::App* drain = app.add_subcommand(
      "drain", "Drain a node: no new jobs (scontrol update state=drain)");
  drain->add_option("node", d->node, "Node name")->required();
  drain->add_option("--reason", d->reason, "Why (shown in hachi nodes)");
  drain->add_option("--server", d->server, ServerFlagHelp());
  drain->callback([d, exit_code] {
    Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(d->server);
    if (!c.ok()) return void(*exit_code = Fail(c.status()));
    Status s = (*c)->NodeAction(d->node, "drain", d->reason);
    if (!s.ok()) *exit_code = Fail(s);
  });
  auto r = std::make_shared<DrainFlags>();
  CLI::App* resume = app.add_subcommand(
      "resume",
      "Put a drained node and its unhealthy GPUs back in service (a burst node whose "
      "resume failed: may be powered up again)");
  resume->add_option("node", r->node, "Node name")->required();
  resume
      ->add_option("--gpu", r->gpu,
                   "Only this GPU, taken out by a health check (hachi show node NAME)")
      ->check(CLI::Range(0, 63));
  resume->add_option("--server", r->server, ServerFlagHelp());
  resume->callback([r, exit_code] {
    Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(r->server);
    if (!c.ok()) return void(*exit_code = Fail(c.status()));
    Status s = (*c)->NodeAction(r->node, "resume", "", r->gpu);
    if (!s.ok()) *exit_code = Fail(s);
  });

  struct StatsFlags {
    std::string server, window = "24h", threshold = "20m";
    bool json = false;
  };
  auto st = std::make_shared<StatsFlags>();
  CLI::App* stats = app.add_subcommand(
      "stats", "Queue waits p50/p95 per partition and GPU count; flags slow partitions");
  stats->add_option("--server", st->server, ServerFlagHelp());
  stats->add_option("--window", st->window,
                    "Jobs started within this span (default 24h)");
  stats->add_option("--alert", st->threshold,
                    "Flag a partition whose median wait passes this (default 20m)");
  stats->add_flag("--json", st->json, "JSON");
  stats->callback([st, exit_code] {
    Result<Duration> window = ParseSpan(st->window, "--window");
    if (!window.ok()) return void(*exit_code = Fail(window.status()));
    Result<Duration> threshold = ParseSpan(st->threshold, "--alert");
    if (!threshold.ok()) return void(*exit_code = Fail(threshold.status()));
    Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(st->server);
    if (!c.ok()) return void(*exit_code = Fail(c.status()));
    // The server computes them (GET /stats): fetching every job record to count here cost
    // 12.5 s and a GB of the server's memory at 50,000 jobs (docs/soak.md).
    Result<std::string> body = (*c)->Raw("/stats?window=" + std::to_string(*window) +
                                         "&alert=" + std::to_string(*threshold));
    if (!body.ok()) return void(*exit_code = Fail(body.status()));
    if (st->json) {
      std::cout << *body << "\n";
      return;
    }
    Result<report::JobStats> s = report::JobStatsFromJson(*body);
    if (!s.ok()) return void(*exit_code = Fail(s.status()));
    const std::string text = FormatStats(*s);
    std::cout << text << (text.empty() || text.back() == '\n' ? "" : "\n");
  });
}

}  // namespace hachi::cli
