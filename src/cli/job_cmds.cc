#include "cli/job_cmds.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "api/request_limits.h"
#include "cli/client.h"
#include "cli/directives.h"
#include "cli/eff_cmd.h"
#include "cli/explain_cmd.h"
#include "cli/explain_format.h"
#include "cli/fail.h"
#include "cli/interactive.h"
#include "cli/report_cmd.h"
#include "cli/slurm_format.h"
#include "cli/submit_request.h"
#include "core/slurm_time.h"
#include "core/strings.h"

extern char** environ;

namespace hachi::cli {
namespace {

// Takes "--server X" / "--server=X" out of raw sbatch-style args.
std::string TakeServerFlag(std::vector<std::string>* args) {
  std::string server;
  for (size_t i = 0; i < args->size(); ++i) {
    const std::string& a = (*args)[i];
    if (a == "--") break;
    if (a == "--server" && i + 1 < args->size()) {
      server = (*args)[i + 1];
      args->erase(args->begin() + static_cast<long>(i),
                  args->begin() + static_cast<long>(i) + 2);
      break;
    }
    if (a.rfind("--server=", 0) == 0) {
      server = a.substr(9);
      args->erase(args->begin() + static_cast<long>(i));
      break;
    }
  }
  return server;
}

std::string Cwd() {
  char buf[4096];
  return ::getcwd(buf, sizeof buf) != nullptr ? std::string(buf) : std::string("/");
}

}  // namespace

// sbatch/srun-style args -> a submit request. `run` wraps the command after "--" (or
// the first positional) instead of reading a script. Warnings go to `warnings_out`
// when given (sbatch words them its way), else to stderr.
Result<api::SubmitRequest> BuildRequest(std::vector<std::string> args, bool run,
                                        SubmitOptions* parsed_out,
                                        std::vector<std::string>* warnings_out,
                                        const std::string* stdin_script,
                                        bool* bad_option) {
  bool unused = false;
  bool& option_error = bad_option != nullptr ? *bad_option : unused;
  option_error = false;
  const auto dashdash = std::find(args.begin(), args.end(), "--");
  Result<ParsedOptions> flags = ParseFlags(args);
  option_error = !flags.ok();
  if (!flags.ok()) return flags.status();
  const bool wrapped = run || dashdash != args.end();
  ParsedOptions directives;
  std::string script_text, script_name;
  if (!wrapped && !flags->positional.empty()) {
    script_name = flags->positional[0];
    std::ifstream in(script_name, std::ios::binary);
    if (!in) return NotFound("cannot read the batch script " + script_name);
    std::ostringstream ss;
    ss << in.rdbuf();
    script_text = ss.str();
    Result<ParsedOptions> d = ParseDirectives(script_text, BaseName(script_name));
    option_error = !d.ok();
    if (!d.ok()) return d.status();
    directives = std::move(*d);
  }
  // sbatch's standard input: its directives count, unless --wrap makes the script.
  const bool from_stdin =
      !wrapped && flags->positional.empty() && stdin_script != nullptr &&
      std::none_of(flags->options.begin(), flags->options.end(),
                   [](const OptionOccurrence& o) { return o.name == "wrap"; });
  if (from_stdin) {
    if (stdin_script->empty()) {
      return InvalidArgument("Batch script is empty!");
    }
    if (stdin_script->rfind("#!", 0) != 0) {
      return InvalidArgument(  // Slurm's three lines
          "This does not look like a batch script.  The first\nsbatch: error: line must "
          "start with #! followed by the path to an interpreter.\nsbatch: error: For "
          "instance: #!/bin/sh");
    }
    script_text = *stdin_script;
    Result<ParsedOptions> d = ParseDirectives(script_text, "(standard input)");
    option_error = !d.ok();
    if (!d.ok()) return d.status();
    directives = std::move(*d);
  }
  Result<SubmitOptions> o = BuildSubmitOptions(directives, *flags);
  option_error = !o.ok();
  if (!o.ok()) return o.status();
  {  // --begin / --deadline in the submitter's clock and time zone (read only for them:
     // the zone file is one more file every submit would open and parse)
    const Time now = static_cast<Time>(std::time(nullptr));
    const bool dated = !o->begin_text.empty() || !o->deadline_text.empty();
    const Status times = ResolveSubmitTimes(now, dated ? LocalUtcOffset(now) : 0, &*o);
    option_error = !times.ok();
    if (!times.ok()) return times;
  }
  api::SubmitRequest r;
  r.req = o->req;
  r.spec = o->spec;
  r.hold = o->hold;
  if (!o->wrap.empty()) {
    r.spec.set_script("#!/bin/sh\n" + o->wrap + "\n");
    if (r.spec.name.empty()) r.spec.name = "wrap";
  } else if (wrapped) {
    if (flags->positional.empty()) {
      return InvalidArgument(
          run ? "run: no command given (hachi run [options] -- cmd args)"
              : "submit: no command after '--'");
    }
    r.spec.set_argv(flags->positional);
    if (r.spec.name.empty()) r.spec.name = BaseName(flags->positional[0]);
  } else if (from_stdin) {
    r.spec.set_script(script_text);
    if (r.spec.name.empty()) r.spec.name = "sbatch";  // Slurm's name for such a job
  } else {
    if (flags->positional.empty()) {
      return InvalidArgument(
          "submit: no batch script given (hachi submit [options] script.sh, "
          "or hachi submit [options] -- cmd args, or --wrap 'cmd')");
    }
    r.spec.set_script(script_text);
    r.spec.set_argv({flags->positional.begin() + 1, flags->positional.end()});
    if (r.spec.name.empty()) r.spec.name = BaseName(script_name);
  }
  const std::string cwd = Cwd();
  if (r.spec.workdir.empty()) {
    r.spec.workdir = cwd;
  } else if (r.spec.workdir[0] != '/') {
    r.spec.workdir = cwd + "/" + r.spec.workdir;
  }
  state::EnvList env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  state::EnvList exported = ExportEnvironment(o->export_env, std::move(env));  // --export
  AddUmask(&exported);
  r.spec.set_env(std::move(exported));
  if (!o->array.empty()) {
    r.array_tasks = ExpandArray(o->array);
    r.array_max_running = o->array.max_running;
  }
  std::vector<std::string> warnings = o->warnings;
  if (o->time_unlimited) {
    warnings.push_back("--time=UNLIMITED: the partition's maximum applies");
    r.req.time_limit = -1;  // the server takes the partition's maximum
  }
  if (warnings_out != nullptr) {
    *warnings_out = std::move(warnings);
  } else {
    for (const std::string& w : warnings) std::cerr << "hachi: warning: " << w << "\n";
  }
  if (parsed_out != nullptr) *parsed_out = std::move(*o);
  return r;
}

namespace {

int DoSubmit(std::vector<std::string> args) {
  const std::string server = TakeServerFlag(&args);
  SubmitOptions parsed;
  Result<api::SubmitRequest> r = BuildRequest(std::move(args), false, &parsed, nullptr);
  if (!r.ok()) return Fail(r.status());
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(server);
  if (!c.ok()) return Fail(c.status());
  Result<std::vector<state::JobId>> ids = (*c)->Submit(*r);
  if (!ids.ok()) return Fail(ids.status());
  const state::JobId first = ids->front();
  if (parsed.parsable) {
    std::cout << first << "\n";
  } else {
    std::cout << "Submitted batch job " << first;
    if (ids->size() > 1) std::cout << " (array of " << ids->size() << " tasks)";
    std::cout << "\n";
  }
  return 0;
}

// `hachi run`: an allocation (an interactive job), one step in it — the
// command once per node, or its -n tasks — with the output relayed through the server
// (so it works from any host), then the allocation given back with the step's exit
// status. Ctrl-C: SIGINT to the tasks; twice within a second stops them.
int DoRun(std::vector<std::string> args) {
  const std::string server = TakeServerFlag(&args);
  SubmitOptions parsed;
  Result<api::SubmitRequest> r = BuildRequest(std::move(args), true, &parsed, nullptr);
  if (!r.ok()) return Fail(r.status());
  api::StepRequest step;
  step.argv = r->spec.argv();
  step.env = r->spec.env();
  step.workdir = r->spec.workdir;
  step.ntasks = r->spec.ntasks;
  step.ntasks_per_node = r->spec.ntasks_per_node;
  if (parsed.IsSet("output")) step.stdout_pattern = r->spec.stdout_path;
  if (parsed.IsSet("error")) step.stderr_pattern = r->spec.stderr_path;
  if (!parsed.IsSet("job-name") && !step.argv.empty())
    r->spec.name = BaseName(step.argv[0]);
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(server);
  if (!c.ok()) return Fail(c.status());
  Result<state::JobRecord> job = Allocate(**c, *r, "hachi", /*announce=*/false);
  if (!job.ok()) return Fail(job.status());
  const int rc =
      RunStep(**c, server, job->id, step, /*label=*/false, /*quiet=*/false, "hachi");
  if (Status s = Relinquish(**c, job->id, rc); !s.ok()) {
    std::cerr << "hachi: error: giving back job " << job->id << ": " << s.message()
              << "\n";
  }
  return rc;
}

}  // namespace

Result<std::vector<state::JobId>> ParseIds(const std::vector<std::string>& words) {
  std::vector<state::JobId> ids;
  for (const std::string& w : words) {
    char* end = nullptr;
    const long long id = std::strtoll(w.c_str(), &end, 10);
    if (w.empty() || *end != '\0' || id <= 0) {
      return InvalidArgument("'" + w + "' is not a job id");
    }
    ids.push_back(id);
  }
  return ids;
}

namespace {

// cancel/hold/release ids as scancel takes them: "ID", "A_T", "A_[1-3,7]" (each task).
Result<std::vector<std::string>> ParseActionIds(const std::vector<std::string>& words) {
  auto number = [](std::string_view s) {
    return !s.empty() && s.size() <= 18 && std::all_of(s.begin(), s.end(), [](char ch) {
      return ch >= '0' && ch <= '9';
    });
  };
  std::vector<std::string> out;
  for (const std::string& w : words) {
    const size_t us = w.find('_');
    const std::string_view head = std::string_view(w).substr(0, us);
    if (!number(head) || std::stoll(std::string(head)) <= 0) {
      return InvalidArgument("'" + Clip(w) + "' is not a job id (ID, A_T or A_[T-U])");
    }
    if (us == std::string::npos) {
      out.push_back(w);
      continue;
    }
    std::string_view tasks = std::string_view(w).substr(us + 1);
    if (tasks.size() > 2 && tasks.front() == '[' && tasks.back() == ']') {
      tasks = tasks.substr(1, tasks.size() - 2);
    }
    for (std::string_view part : Split(tasks, ',')) {
      const size_t dash = part.find('-');
      const std::string_view lo = part.substr(0, dash);
      const std::string_view hi =
          dash == std::string_view::npos ? lo : part.substr(dash + 1);
      if (!number(lo) || !number(hi) || lo.size() > 9 || hi.size() > 9 ||
          std::stol(std::string(lo)) > std::stol(std::string(hi)) ||
          std::stol(std::string(hi)) - std::stol(std::string(lo)) >=
              api::kMaxArrayTasks) {
        return InvalidArgument("'" + Clip(w) + "' is not a job id (ID, A_T or A_[T-U])");
      }
      for (long t = std::stol(std::string(lo)); t <= std::stol(std::string(hi)); ++t) {
        out.push_back(std::string(head) + "_" + std::to_string(t));
      }
    }
  }
  return out;
}

const char kSubmitUsage[] =
    "usage: hachi submit [options] script.sh [args]   (#SBATCH / #HACHI directives "
    "read)\n"
    "       hachi submit [options] -- command [args]\n"
    "       hachi submit [options] --wrap 'command line'\n"
    "options (sbatch's): -p/--partition, -G/--gpus, --gres=gpu[:model]:N, "
    "--gpus-per-node,\n"
    "  -N/--nodes, -t/--time, -c/--cpus-per-task, --mem, --mem-per-gpu, -J/--job-name,\n"
    "  -o/--output, -e/--error, -d/--dependency, --exclusive, -a/--array, -q/--qos,\n"
    "  -A/--account, -H/--hold, --requeue, -D/--chdir, --gpu-share, --gpu-mem,\n"
    "  --container-image, --shm-size, --comment, --parsable, --server URL\n"
    "See docs/cli.md.\n";
const char kRunUsage[] =
    "usage: hachi run [options] -- command [args]   (srun: an allocation and one step\n"
    "       in it, the command once per node or -n tasks; streams the output through\n"
    "       the server, exits with the worst task's status; Ctrl-C: SIGINT to the "
    "tasks,\n"
    "       twice within a second stops them)\n"
    "options: as hachi submit (hachi submit --help), and --server URL\n";

bool WantsHelp(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--") return false;
    if (a == "-h" || a == "--help") return true;
  }
  return false;
}

}  // namespace

int SubmitMain(const std::vector<std::string>& args) {
  if (WantsHelp(args)) {
    std::cout << kSubmitUsage;
    return 0;
  }
  return DoSubmit(args);
}

int RunMain(const std::vector<std::string>& args) {
  if (WantsHelp(args)) {
    std::cout << kRunUsage;
    return 0;
  }
  return DoRun(args);
}

namespace {

struct QueueFlags {
  std::string server, users, partitions, states, format, jobs;
  bool json = false, all = false;
};

// hachi queue: the jobs as squeue lists them.
int RunQueue(QueueFlags q) {
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(q.server);
  if (!c.ok()) return Fail(c.status());
  QueueFilter f;
  auto split = [](const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');) {
      if (!item.empty()) out.push_back(item);
    }
    return out;
  };
  f.users = split(q.users);
  f.partitions = split(q.partitions);
  bool finished = q.all;
  if (q.all && q.states.empty()) q.states = "all";
  if (!q.states.empty()) {
    Result<std::vector<state::JobState>> st = ParseStateList(q.states);
    if (!st.ok()) return Fail(st.status());
    f.states = *st;
    for (state::JobState s : f.states) finished = finished || state::IsFinal(s);
  }
  Result<std::vector<state::JobId>> ids = ParseIds(split(q.jobs));
  if (!ids.ok()) return Fail(ids.status());
  f.ids = *ids;
  if (!f.ids.empty()) finished = true;
  Result<std::vector<state::JobRecord>> jobs = (*c)->Jobs(finished);
  if (!jobs.ok()) return Fail(jobs.status());
  std::vector<state::JobRecord> shown = FilterJobs(*jobs, f);
  SortForQueue(&shown);
  if (q.json) {
    Result<std::string> raw = (*c)->Raw(finished ? "/jobs?all=1" : "/jobs");
    if (!raw.ok()) return Fail(raw.status());
    std::cout << *raw << "\n";
    return 0;
  }
  Result<std::string> text =
      FormatQueue(shown, static_cast<Time>(std::time(nullptr)), q.format);
  if (!text.ok()) return Fail(text.status());
  std::cout << *text;
  if (!text->empty() && text->back() != '\n') std::cout << "\n";
  return 0;
}

void AddQueueCommand(CLI::App& app, int* exit_code) {
  auto q = std::make_shared<QueueFlags>();
  CLI::App* queue = app.add_subcommand("queue", "List jobs (squeue)");
  queue->add_option("--server", q->server, ServerFlagHelp());
  queue->add_option("-u,--user", q->users, "Only these users (comma-separated)");
  queue->add_option("-p,--partition", q->partitions, "Only these partitions");
  queue->add_option("-t,--states", q->states, "Only these states (PD,R,CD,... or all)");
  queue->add_option("-j,--jobs", q->jobs, "Only these job ids");
  queue->add_option("-o,--format", q->format,
                    "Output format (squeue's %i %P %j ... codes)");
  queue->add_flag("-a,--all", q->all, "Include finished jobs");
  queue->add_flag("--json", q->json, "JSON (the job records)");
  queue->callback([q, exit_code] {
    if (int rc = RunQueue(*q); rc != 0) *exit_code = rc;
  });
}

struct ShowFlags {
  std::string server, what, name;
  bool json = false;
};

// hachi show job|node: one in detail, as scontrol show prints it.
int RunShow(const ShowFlags& s) {
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(s.server);
  if (!c.ok()) return Fail(c.status());
  if (s.what == "node") {
    if (s.json) {
      Result<std::string> raw = (*c)->Raw("/nodes/" + s.name);
      if (!raw.ok()) return Fail(raw.status());
      std::cout << *raw << "\n";
      return 0;
    }
    Result<std::vector<state::NodeStatus>> nodes = (*c)->Nodes();
    if (!nodes.ok()) return Fail(nodes.status());
    for (const state::NodeStatus& n : *nodes) {
      if (n.record.name != s.name) continue;
      Result<std::string> t = FormatNodes({n}, "");
      if (t.ok()) std::cout << *t;
      std::cout << FormatGpuPicture(n) << FormatClockLine(n);
      return 0;
    }
    return Fail(NotFound("no node " + s.name));
  }
  Result<std::vector<state::JobId>> id = ParseIds({s.name});
  if (!id.ok()) return Fail(id.status());
  if (s.json) {
    Result<std::string> raw = (*c)->Raw("/jobs/" + s.name);
    if (!raw.ok()) return Fail(raw.status());
    std::cout << *raw << "\n";
    return 0;
  }
  Result<JobView> v = (*c)->Job(id->front());
  if (!v.ok()) return Fail(v.status());
  std::string text =
      FormatShowJob(v->job, v->diagnosis, static_cast<Time>(std::time(nullptr)));
  if (!text.empty() && text.back() != '\n') text += "\n";
  // A pending job: the numbers behind the diagnosis, as `hachi explain` prints them.
  if (v->job.state == state::JobState::kPending) {
    if (Result<report::JobExplain> e = FetchExplain(**c, v->job.id); e.ok()) {
      text += "   Explain:\n" + FormatExplain(*e, "     ", false);
    }
  }
  std::cout << text;
  return 0;
}

void AddShowCommand(CLI::App& app, int* exit_code) {
  auto s = std::make_shared<ShowFlags>();
  CLI::App* show =
      app.add_subcommand("show", "Show a job or node in detail (scontrol show)");
  show->add_option("what", s->what, "job | node")
      ->required()
      ->check(CLI::IsMember({"job", "node"}));
  show->add_option("id", s->name, "Job id or node name")->required();
  show->add_option("--server", s->server, ServerFlagHelp());
  show->add_flag("--json", s->json, "JSON");
  show->callback([s, exit_code] {
    if (int rc = RunShow(*s); rc != 0) *exit_code = rc;
  });
}

// hachi cancel|hold|release IDS.
void AddActionCommands(CLI::App& app, int* exit_code) {
  for (const char* action : {"cancel", "hold", "release"}) {
    struct ActFlags {
      std::string server;
      std::vector<std::string> ids;
    };
    auto a = std::make_shared<ActFlags>();
    const std::string act = action;
    CLI::App* cmd =
        app.add_subcommand(act, act == "cancel" ? "Cancel jobs (scancel)"
                                : act == "hold" ? "Hold pending jobs (scontrol hold)"
                                                : "Release held jobs (scontrol release)");
    cmd->add_option("ids", a->ids,
                    "Job ids; an array's id (A) means all its tasks, A_T task T only")
        ->required();
    cmd->add_option("--server", a->server, ServerFlagHelp());
    cmd->callback([a, act, exit_code] {
      Result<std::vector<std::string>> ids = ParseActionIds(a->ids);
      if (!ids.ok()) return void(*exit_code = Fail(ids.status()));
      Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(a->server);
      if (!c.ok()) return void(*exit_code = Fail(c.status()));
      for (const std::string& id : *ids) {
        Status st = (*c)->JobAction(id, act);
        if (!st.ok()) *exit_code = Fail(st);
      }
    });
  }
}

}  // namespace

void AddJobCommands(CLI::App& app, int* exit_code) {
  // submit and run take sbatch/srun-style options, parsed by directives.h.
  CLI::App* submit = app.add_subcommand(
      "submit",
      "Submit a batch script (#SBATCH/#HACHI directives) or -- a command (sbatch)");
  submit->prefix_command();
  submit->allow_extras();
  submit->callback([submit, exit_code] { *exit_code = DoSubmit(submit->remaining()); });

  CLI::App* run = app.add_subcommand(
      "run", "Run a command as a job, stream its output, exit with its code (srun)");
  run->prefix_command();
  run->allow_extras();
  run->callback([run, exit_code] { *exit_code = DoRun(run->remaining()); });

  AddQueueCommand(app, exit_code);
  AddShowCommand(app, exit_code);
  AddActionCommands(app, exit_code);
  AddExplainCommand(app, exit_code);
  AddEffCommand(app, exit_code);
  AddReportCommand(app, exit_code);
}

}  // namespace hachi::cli
