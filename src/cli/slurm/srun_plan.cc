#include "cli/slurm/srun_plan.h"

#include <string.h>

#include <algorithm>
#include <optional>
#include <set>

#include "cli/slurm/slurm_text.h"
#include "cli/submit_options.h"
#include "core/hostlist.h"
#include "core/strings.h"

namespace hachi::cli::slurm {
namespace {

// srun's getopt list: the rows of the option table (cli/submit_options.h) srun takes,
// an alias as an option of its own (ParseArgs reports it under that name).
const std::vector<OptDef>& SrunOpts() {
  static const std::vector<OptDef> kOpts = [] {
    std::vector<OptDef> opts;
    for (const OptionRow& r : SubmitOptionTable()) {
      if ((r.commands & kCmdSrun) == 0) continue;
      opts.push_back({r.short_name, r.name, TakesValue(r)});
      if (!r.alias.empty()) opts.push_back({0, r.alias, TakesValue(r)});
    }
    return opts;
  }();
  return kOpts;
}

// The options srun outside an allocation passes to the allocation it makes (sbatch's
// names for them): its shape. The others are the step's; inside an allocation the
// shape's are the allocation's already.
bool ShapesTheAllocation(const std::string& name) {
  const OptionRow* r = FindOption(name, kCmdSrun);
  return r != nullptr && (r->commands & kSrunShapesAllocation) != 0;
}

// A count as Slurm's srun takes one (0..9999999), its error in srun's words.
Result<int> Count(const std::string& option, const std::string& v) {
  const std::optional<long long> n = ParseInt(v);
  if (!n || *n < 0 || *n > 9999999) {
    return InvalidArgument("Invalid numeric value \"" + v + "\" for --" + option + ".");
  }
  return static_cast<int>(*n);
}

const std::string* Find(const state::EnvList& env, const std::string& name) {
  const std::string* found = nullptr;
  for (const auto& [k, v] : env) {
    if (k == name) found = &v;
  }
  return found;
}

// srun --export: ALL (default), NONE, or a list of names (and NAME=value), with ALL
// allowed as its first word. Slurm's own variables always go.
state::EnvList Exported(const std::string& spec, const state::EnvList& env) {
  if (spec.empty() || spec == "ALL") return env;
  std::vector<std::string> words;
  size_t b = 0;
  while (b <= spec.size()) {
    const size_t e = spec.find(',', b);
    words.push_back(spec.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  const bool all = !words.empty() && words[0] == "ALL";
  state::EnvList out;
  std::set<std::string> names;
  for (const std::string& w : words) {
    if (w.find('=') == std::string::npos && w != "ALL" && w != "NONE") names.insert(w);
  }
  for (const auto& [k, v] : env) {
    if (all || names.count(k) || k.rfind("SLURM_", 0) == 0 || k.rfind("HACHI_", 0) == 0) {
      out.emplace_back(k, v);
    }
  }
  for (const std::string& w : words) {
    const size_t eq = w.find('=');
    if (eq != std::string::npos && eq > 0)
      out.emplace_back(w.substr(0, eq), w.substr(eq + 1));
  }
  return out;
}

}  // namespace

Result<SrunOptions> ParseSrunArgs(const std::vector<std::string>& args,
                                  const state::EnvList& env, const std::string& cwd) {
  Result<ParsedArgs> p = ParseArgs(args, SrunOpts(), /*stop_at_positional=*/true);
  if (!p.ok()) return p.status();
  SrunOptions o;
  o.help = p->Has("help");
  o.usage = p->Has("usage");
  if (o.help || o.usage) return o;
  api::StepRequest& s = o.step;
  s.argv = p->positional;
  if (s.argv.empty()) return InvalidArgument("No command given to execute.");
  o.server = p->Get("server");
  // The allocation: --jobid, else the one this srun runs in.
  std::string job = p->Get("jobid");
  if (job.empty()) {
    if (const std::string* v = Find(env, "SLURM_JOB_ID")) {
      job = *v;
    } else if (const std::string* h = Find(env, "HACHI_JOB_ID")) {
      job = *h;
    }
  }
  if (!job.empty()) {
    Result<int> id = Count("jobid", job);
    if (!id.ok() || *id <= 0) return InvalidArgument("Invalid job id: " + job);
    o.job = *id;
  }
  if (o.job == 0) {
    // Outside an allocation: the options that shape it make one.
    for (const auto& [name, value] : p->opts) {
      if (ShapesTheAllocation(name)) {
        o.alloc_args.push_back("--" + name + (value.empty() ? "" : "=" + value));
      }
    }
  }
  auto count = [&](const char* name, int* out) -> Status {
    if (!p->Has(name)) return Status::Ok();
    Result<int> n = Count(name, p->Get(name));
    if (!n.ok()) return n.status();
    *out = *n;
    return Status::Ok();
  };
  HACHI_RETURN_IF_ERROR(count("ntasks", &s.ntasks));
  if (p->Has("nodes")) {
    // -N MIN[-MAX]: the step takes MIN (an allocation's nodes are all there).
    std::string v = p->Get("nodes");
    v = v.substr(0, v.find('-'));
    Result<int> n = Count("nodes", v);
    if (!n.ok()) return n.status();
    s.nodes = *n;
  }
  HACHI_RETURN_IF_ERROR(count("ntasks-per-node", &s.ntasks_per_node));
  HACHI_RETURN_IF_ERROR(count("tasks-per-node", &s.ntasks_per_node));
  HACHI_RETURN_IF_ERROR(count("cpus-per-task", &s.cpus_per_task));
  HACHI_RETURN_IF_ERROR(count("gpus-per-task", &s.gpus_per_task));
  // An allocation's task counts, as Slurm's srun reads them from its environment.
  if (s.ntasks == 0 && !p->Has("nodes") && s.ntasks_per_node == 0) {
    if (const std::string* v = Find(env, "SLURM_NTASKS")) {
      if (Result<int> n = Count("ntasks", *v); n.ok()) s.ntasks = *n;
    }
  }
  if (s.ntasks_per_node == 0 && s.ntasks == 0) {
    if (const std::string* v = Find(env, "SLURM_NTASKS_PER_NODE")) {
      if (Result<int> n = Count("ntasks-per-node", *v); n.ok()) s.ntasks_per_node = *n;
    }
  }
  if (p->Has("gpus") && s.gpus_per_task == 0) {
    // -G N for the step: its tasks share them, so many each (-n 2 -G 2: one each).
    std::string v = p->Get("gpus");
    v = v.substr(v.rfind(':') == std::string::npos ? 0 : v.rfind(':') + 1);
    Result<int> g = Count("gpus", v);
    if (!g.ok()) return g.status();
    const int tasks = std::max(1, s.ntasks);
    if (*g % tasks != 0) {
      return InvalidArgument("--gpus=" + p->Get("gpus") +
                             " cannot be split evenly over " + std::to_string(tasks) +
                             " tasks; use --gpus-per-task");
    }
    s.gpus_per_task = *g / tasks;
  }
  s.stdout_pattern = p->Get("output");
  s.stderr_pattern = p->Get("error");
  if (s.stdout_pattern == "-" || s.stdout_pattern == "none") s.stdout_pattern.clear();
  if (s.stderr_pattern == "-" || s.stderr_pattern == "none") s.stderr_pattern.clear();
  if (p->Has("input") && p->Get("input") != "none" && p->Get("input") != "/dev/null") {
    return InvalidArgument(
        "--input=" + p->Get("input") +
        ": a step's tasks read /dev/null in Hachi (--pty for a terminal)");
  }
  o.label = p->Has("label");
  o.unbuffered = p->Has("unbuffered");
  o.quiet = p->Has("quiet");
  s.kill_on_bad_exit = p->Has("kill-on-bad-exit");
  s.overlap = p->Has("overlap");
  s.pty = o.pty = p->Has("pty");
  if (s.pty && !p->Has("ntasks")) {
    // --pty is one task on one terminal, whatever the allocation's SLURM_NTASKS says.
    s.ntasks = 1;
    s.ntasks_per_node = 0;
    if (!p->Has("nodes")) s.nodes = 1;
  }
  s.name = p->Get("job-name");
  if (p->Has("nodelist")) {
    Result<std::vector<std::string>> nodes = ExpandHostList(p->Get("nodelist"));
    if (!nodes.ok()) {
      return InvalidArgument("Invalid node name specified: " + p->Get("nodelist"));
    }
    s.node_list = std::move(*nodes);
  }
  s.workdir = p->Has("chdir") ? p->Get("chdir") : cwd;
  if (!s.workdir.empty() && s.workdir[0] != '/') s.workdir = cwd + "/" + s.workdir;
  s.env = Exported(p->Get("export"), env);
  return o;
}

std::pair<std::string, std::string> OutputLabeler::Feed(const api::OutputChunk& c) {
  std::pair<std::string, std::string> out;
  std::string& to = c.fd == 2 ? out.second : out.first;
  if (c.lost > 0) {
    out.second += "srun: warning: " + std::to_string(c.lost) + " bytes of task " +
                  std::to_string(c.task) + "'s " + (c.fd == 2 ? "stderr" : "stdout") +
                  " were lost on their way (a server restart, the step's end, or output "
                  "the server refused)\n";
    return out;
  }
  if (!label_) {
    to = c.data;
    return out;
  }
  std::string& partial = partial_[{c.task, c.fd}];
  const std::string prefix = std::to_string(c.task) + ": ";
  size_t b = 0;
  while (b < c.data.size()) {
    const size_t nl = c.data.find('\n', b);
    if (nl == std::string::npos) {
      partial += c.data.substr(b);
      break;
    }
    to += prefix + partial + c.data.substr(b, nl - b + 1);
    partial.clear();
    b = nl + 1;
  }
  return out;
}

std::pair<std::string, std::string> OutputLabeler::Flush() {
  std::pair<std::string, std::string> out;
  for (auto& [key, partial] : partial_) {
    if (partial.empty()) continue;
    (key.second == 2 ? out.second : out.first) +=
        std::to_string(key.first) + ": " + partial + "\n";
    partial.clear();
  }
  return out;
}

void LostOutput::Count(const api::StepOutput& out) {
  bytes_ += out.lost;
  for (const api::OutputChunk& c : out.chunks) bytes_ += c.lost;
}

std::string LostOutput::Line(const std::string& prog) const {
  if (bytes_ == 0) return "";
  return prog + ": " + std::to_string(bytes_) +
         " bytes of output lost (dropped before they were read; see the warnings above)";
}

int SrunExitStatus(const std::vector<api::TaskExit>& exits) {
  int rc = 0;
  for (const api::TaskExit& e : exits) {
    switch (e.kind) {
      case api::ExitKind::kExited:
        rc = std::max(rc, e.exit_code);
        break;
      case api::ExitKind::kSignaled:
      case api::ExitKind::kCancelled:
      case api::ExitKind::kTimeLimit:
      case api::ExitKind::kOutOfMemory:
        rc = std::max(rc, 128 + (e.signal > 0 ? e.signal : 9));
        break;
      case api::ExitKind::kLaunchFailed:
      case api::ExitKind::kLost:
        rc = std::max(rc, 2);
        break;
    }
  }
  return rc;
}

std::vector<std::string> TaskErrorLines(const std::vector<api::TaskExit>& exits) {
  // (node, outcome) -> ranks, in the order first seen.
  std::vector<std::pair<std::pair<std::string, std::string>, std::vector<int>>> groups;
  for (const api::TaskExit& e : exits) {
    std::string what;
    switch (e.kind) {
      case api::ExitKind::kExited:
        if (e.exit_code == 0) continue;
        what = "Exited with exit code " + std::to_string(e.exit_code);
        break;
      case api::ExitKind::kSignaled:
      case api::ExitKind::kCancelled:
      case api::ExitKind::kTimeLimit:
        what = e.signal > 0 ? strsignal(e.signal) : "Killed";
        break;
      case api::ExitKind::kOutOfMemory:
        what = "Out Of Memory";
        break;
      case api::ExitKind::kLaunchFailed:
      case api::ExitKind::kLost:
        what = e.message.empty() ? "Exited with exit code 2" : e.message;
        break;
    }
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) {
      return x.first.first == e.node && x.first.second == what;
    });
    if (g == groups.end()) {
      groups.push_back({{e.node, what}, {}});
      g = groups.end() - 1;
    }
    g->second.push_back(e.task);
  }
  std::vector<std::string> lines;
  for (auto& [key, ranks] : groups) {
    std::sort(ranks.begin(), ranks.end());
    std::string list;
    for (size_t i = 0; i < ranks.size();) {
      size_t j = i;
      while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
      if (!list.empty()) list += ",";
      list += std::to_string(ranks[i]);
      if (j > i) list += "-" + std::to_string(ranks[j]);
      i = j + 1;
    }
    lines.push_back("srun: error: " + (key.first.empty() ? std::string("?") : key.first) +
                    ": task" + (ranks.size() > 1 ? "s " : " ") + list + ": " +
                    key.second);
  }
  return lines;
}

}  // namespace hachi::cli::slurm
