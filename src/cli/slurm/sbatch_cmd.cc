// sbatch: `hachi submit`'s request (cli/submit_request.h) with sbatch's own flags and
// words: --parsable, -Q/--quiet, -W/--wait, --test-only (--json: the request as parsed).
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "api/protocol_json.h"
#include "api/submit_checks.h"
#include "cli/client.h"
#include "cli/directives.h"
#include "cli/slurm/slurm_cmds.h"
#include "cli/slurm_format.h"
#include "cli/submit_options.h"
#include "cli/submit_request.h"
#include "core/hostlist.h"
#include "core/strings.h"
#include "core/time_format.h"

namespace hachi::cli::slurm {
namespace {

constexpr char kUsage[] =
    "Usage: sbatch [OPTIONS(0)...] [ : [OPTIONS(N)...]] script(0) [args(0)...]\n"
    "Hachi's sbatch: every option of `hachi submit --help`, and --parsable, -Q/--quiet,\n"
    "-W/--wait, --test-only [--json], --server URL. Without a script (and without "
    "--wrap)\n"
    "the script is read from standard input. See docs/cli.md \"sbatch\".\n";

struct Own {
  bool wait = false, test_only = false, quiet = false, json = false, help = false;
  std::string server;
};

// sbatch's own flags: the option table's front-end rows for sbatch (--wait, --quiet,
// --test-only, --json, --help, --usage, --server), as written ("--server=URL" too).
bool IsOwnFlag(const std::string& a) {
  const OptionRow* r = nullptr;
  if (a.size() == 2 && a[0] == '-' && a[1] != '-') {
    r = FindShortOption(a[1], kCmdSbatch);
  } else if (a.rfind("--", 0) == 0) {
    const size_t eq = a.find('=');
    r = FindOption(std::string_view(a).substr(2, eq == std::string::npos ? eq : eq - 2),
                   kCmdSbatch);
    if (r != nullptr && eq != std::string::npos && !TakesValue(*r)) r = nullptr;
  }
  return r != nullptr && r->kind == OptionKind::kFrontEnd;
}

// Where the script's own arguments start: ParseFlags (directives.h, which knows which
// options take a value) on the arguments without sbatch's own flags finds the script;
// its first occurrence in `args` is the end of sbatch's options. args.size(): none.
size_t ScriptIndex(const std::vector<std::string>& args) {
  std::vector<std::string> options;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") return args.size();  // a command after "--": hachi submit's
    if (args[i] == "--server") {
      ++i;
      continue;
    }
    if (!IsOwnFlag(args[i])) options.push_back(args[i]);
  }
  Result<ParsedOptions> p = ParseFlags(options);
  if (!p.ok() || p->positional.empty()) return args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == p->positional[0] && (i == 0 || args[i - 1] != "--server")) return i;
  }
  return args.size();
}

// Takes sbatch's own flags out of the arguments before the script (the ones after it
// are the script's arguments) or "--".
Own TakeOwnFlags(std::vector<std::string>* args) {
  Own o;
  std::vector<std::string> rest;
  const size_t script = ScriptIndex(*args);
  bool done = false;
  for (size_t i = 0; i < args->size(); ++i) {
    const std::string& a = (*args)[i];
    if (a == "--" || i >= script) done = true;
    if (!done && IsOwnFlag(a)) {
      if (a == "-W" || a == "--wait") o.wait = true;
      if (a == "--test-only") o.test_only = true;
      if (a == "-Q" || a == "--quiet") o.quiet = true;
      if (a == "--json") o.json = true;
      if (a == "-h" || a == "--help" || a == "--usage") o.help = true;
      if (a == "--server" && i + 1 < args->size()) o.server = (*args)[++i];
      if (a.rfind("--server=", 0) == 0) o.server = a.substr(9);
      continue;
    }
    rest.push_back(a);
  }
  *args = std::move(rest);
  return o;
}

int ExitCodeOf(const state::JobRecord& j) {
  switch (j.state) {
    case state::JobState::kCompleted:
      return 0;
    case state::JobState::kFailed:
      if (j.signal > 0) return 128 + j.signal;
      return j.exit_code != 0 ? j.exit_code : 1;
    default:
      return j.exit_code != 0 ? j.exit_code : 1;
  }
}

// --test-only: POST /jobs/test validates as a submit and answers where and when the
// job would start; sbatch's line goes to stderr, as Slurm's does.
int TestOnly(ApiClient& c, const api::SubmitRequest& r) {
  if (Status s = api::CheckSubmitRequest(r); !s.ok()) {  // as ApiClient::Submit
    return SlurmFail("sbatch", "Job submission failed: " + s.message());
  }
  Result<std::string> body = c.Call("POST", "/jobs/test", api::SubmitRequestToJson(r));
  if (!body.ok()) {
    return SlurmFail("sbatch", "Job submission failed: " + body.status().message());
  }
  const nlohmann::json a = nlohmann::json::parse(*body, nullptr, false);
  if (a.is_discarded() || !a.is_object()) {
    return SlurmFail("sbatch", "--test-only: the server's answer is not JSON");
  }
  const std::string id = std::to_string(a.value("job_id", int64_t{0}));
  if (!a.value("known", false)) {
    std::cerr << "sbatch: Job " << id << " to start at (unknown: the scheduler holds "
              << "nothing for it now) in partition " << a.value("partition", "") << "\n";
    return 0;
  }
  std::vector<std::string> nodes;
  if (a.contains("nodes") && a["nodes"].is_array()) {
    for (const auto& n : a["nodes"]) {
      if (n.is_string()) nodes.push_back(n.get<std::string>());
    }
  }
  std::cerr << "sbatch: Job " << id << " to start at "
            << FormatSlurmLocal(a.value("start", int64_t{0})) << " using "
            << a.value("cpus", 0) << " processors on nodes "
            << (nodes.empty() ? std::string("(unknown)") : CompressHostList(nodes))
            << " in partition " << a.value("partition", "") << "\n";
  return 0;
}

}  // namespace

int SbatchMain(const std::vector<std::string>& argv) {
  std::vector<std::string> args = argv;
  const Own own = TakeOwnFlags(&args);
  if (own.help) {
    std::cout << kUsage;
    return 0;
  }
  SubmitOptions parsed;
  std::vector<std::string> warnings;
  // No script named and no --wrap: Slurm's sbatch reads the script from its standard
  // input (`sbatch <<EOF`, `cat job.sh | sbatch`). Read only then, and at most 4 MiB
  // (the server's bound on a script is smaller; it names the size).
  std::string stdin_text;
  const bool wants_stdin =
      ScriptIndex(args) == args.size() &&
      std::find(args.begin(), args.end(), "--") == args.end() &&
      std::none_of(args.begin(), args.end(), [](const std::string& a) {
        return a == "--wrap" || a.rfind("--wrap=", 0) == 0;
      });
  if (wants_stdin) {
    if (::isatty(STDIN_FILENO)) {
      std::cerr << "sbatch: reading the batch script from standard input "
                   "(end it with Ctrl-D)\n";
    }
    std::string why;
    std::optional<std::string> text = ReadFd(STDIN_FILENO, size_t{4} << 20, &why);
    if (!text) {
      return SlurmFail("sbatch",
                       "cannot read the batch script on standard input: " + why);
    }
    stdin_text = std::move(*text);
  }
  bool bad_option = false;
  Result<api::SubmitRequest> r =
      BuildRequest(std::move(args), false, &parsed, &warnings,
                   wants_stdin ? &stdin_text : nullptr, &bad_option);
  if (!r.ok()) {
    SlurmFail("sbatch", r.status().message());
    // Slurm 22.05's sbatch: 255 for a bad option or value (`--frobnicate`, `-t 9x`),
    // 1 for a script it cannot use or a submission refused.
    return bad_option ? 255 : 1;
  }
  // Slurm's batch step: the script on the first node; srun starts the tasks on all.
  if (!parsed.IsSet("batch-nodes")) r->spec.batch_on_first_node = true;
  if (!own.quiet) {
    for (const std::string& w : warnings) std::cerr << "sbatch: warning: " << w << "\n";
  }
  if (own.test_only && own.json) {  // the request as parsed; nothing asked, nothing sent
    std::cout << api::SubmitRequestToJson(*r) << "\n";
    return 0;
  }
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(own.server);
  if (!c.ok()) return SlurmFail("sbatch", c.status().message());
  if (own.test_only) return TestOnly(**c, *r);
  Result<std::vector<state::JobId>> ids = (*c)->Submit(*r);
  if (!ids.ok()) {
    return SlurmFail("sbatch", "Batch job submission failed: " + ids.status().message());
  }
  const state::JobId first = ids->front();
  // Hachi has no cluster name, so --parsable is the id alone (Slurm's "ID;cluster"
  // needs one).
  if (parsed.parsable) {
    std::cout << first << "\n";
  } else if (!own.quiet) {
    std::cout << "Submitted batch job " << first << "\n";
  }
  std::cout.flush();
  if (!own.wait) return 0;
  // --wait: until every task has ended; the worst exit code (sbatch's rule for arrays).
  int worst = 0;
  for (state::JobId id : *ids) {
    std::string state = "PENDING";
    for (;;) {
      Result<JobView> v = (*c)->Job(id, state, 10000);
      if (!v.ok()) return SlurmFail("sbatch", v.status().message());
      state = std::string(state::JobStateName(v->job.state));
      if (state::IsFinal(v->job.state)) {
        worst = std::max(worst, ExitCodeOf(v->job));
        break;
      }
    }
  }
  return worst;
}

}  // namespace hachi::cli::slurm
