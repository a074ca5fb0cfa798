// srun and salloc (docs/steps.md). srun inside an allocation runs a job step —
// its tasks started on the allocation's nodes by their agents, their output relayed
// through the server to this process, its exit status the worst task's; outside one it
// makes an allocation first and gives it back after the step. salloc makes an
// allocation and runs a command (the user's shell) on this host while it holds it.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include "api/record_json.h"
#include "cli/client.h"
#include "cli/interactive.h"
#include "cli/slurm/slurm_cmds.h"
#include "cli/slurm/slurm_text.h"
#include "cli/slurm/srun_plan.h"
#include "cli/submit_options.h"
#include "cli/submit_request.h"
#include "core/hostlist.h"
#include "core/strings.h"

namespace hachi::cli::slurm {
namespace {

const char kSrunUsage[] =
    "Usage: srun [-N nodes] [-n ntasks] [--ntasks-per-node=n] [-c ncpus]\n"
    "            [--gpus-per-task=n] [-G n] [-w hosts] [-o out] [-e err] [-l] [-u]\n"
    "            [-K] [--overlap] [--jobid=id] [-J name] [-D dir] [--export=...]\n"
    "            [-p partition] [-t time] [--mem=size] executable [args...]\n"
    "Inside an allocation (sbatch, salloc, or --jobid): a job step on its nodes.\n"
    "Outside one: an allocation for the step, given back at its end. See "
    "docs/steps.md.\n";

const char kSallocUsage[] =
    "Usage: salloc [sbatch's options: -N -n -G --gpus-per-node -p -t --mem -J ...]\n"
    "              [command [args...]]\n"
    "Holds an allocation while the command (default: $SHELL) runs on this host, with\n"
    "SLURM_JOB_ID and SLURM_JOB_NODELIST set for srun. See docs/steps.md.\n";

// The allocation's variables a command on the submit host gets (salloc's).
void SetAllocationEnvironment(const state::JobRecord& job) {
  std::vector<std::string> nodes;
  for (const state::NodeAllocation& a : job.allocations) nodes.push_back(a.node);
  const std::string id = std::to_string(job.id);
  const std::string list = CompressHostList(nodes);
  const std::string n = std::to_string(nodes.size());
  for (const char* k : {"SLURM_JOB_ID", "SLURM_JOBID", "HACHI_JOB_ID"}) {
    ::setenv(k, id.c_str(), 1);
  }
  ::setenv("SLURM_JOB_NODELIST", list.c_str(), 1);
  ::setenv("SLURM_NODELIST", list.c_str(), 1);
  ::setenv("SLURM_NNODES", n.c_str(), 1);
  ::setenv("SLURM_JOB_NUM_NODES", n.c_str(), 1);
  ::setenv("SLURM_JOB_NAME", job.spec.name.c_str(), 1);
  ::setenv("SLURM_JOB_PARTITION", job.req.partition.c_str(), 1);
  ::setenv("SLURM_SUBMIT_DIR", job.spec.workdir.c_str(), 1);
  if (job.spec.ntasks > 0) {
    const std::string t = std::to_string(job.spec.ntasks);
    ::setenv("SLURM_NTASKS", t.c_str(), 1);
    ::setenv("SLURM_NPROCS", t.c_str(), 1);
  }
  if (job.spec.ntasks_per_node > 0) {
    ::setenv("SLURM_NTASKS_PER_NODE", std::to_string(job.spec.ntasks_per_node).c_str(),
             1);
  }
}

// sbatch-style options -> the allocation's request; `name` when -J was not given.
Result<api::SubmitRequest> AllocationRequest(std::vector<std::string> options,
                                             const std::string& name) {
  options.push_back("--");
  options.push_back("true");  // a placeholder: an allocation runs no command
  SubmitOptions parsed;
  std::vector<std::string> warnings;
  Result<api::SubmitRequest> r = BuildRequest(options, true, &parsed, &warnings);
  if (!r.ok()) return r.status();
  if (!parsed.IsSet("job-name")) r->spec.name = name;
  return r;
}

}  // namespace

int SrunMain(const std::vector<std::string>& args) {
  Result<SrunOptions> o = ParseSrunArgs(args, ProcessEnvironment(), WorkingDirectory());
  if (!o.ok()) return SlurmBadArgs("srun", o.status());
  if (o->help || o->usage) {
    std::cout << kSrunUsage;
    return 0;
  }
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(o->server);
  if (!c.ok()) return SlurmFail("srun", c.status().message());
  if (o->job != 0) {
    return RunStep(**c, o->server, o->job, o->step, o->label, o->quiet, "srun");
  }
  // Outside an allocation: one for this step, given back with the step's exit status.
  Result<api::SubmitRequest> r =
      AllocationRequest(o->alloc_args, BaseName(o->step.argv[0]));
  if (!r.ok()) return SlurmFail("srun", r.status().message());
  Result<state::JobRecord> job = Allocate(**c, *r, "srun", /*announce=*/false);
  if (!job.ok()) return SlurmFail("srun", job.status().message());
  // The step takes the allocation's shape: its tasks, else one per node.
  api::StepRequest step = o->step;
  if (step.ntasks == 0) step.ntasks = job->spec.ntasks;
  if (step.ntasks_per_node == 0) step.ntasks_per_node = job->spec.ntasks_per_node;
  const int rc = RunStep(**c, o->server, job->id, step, o->label, o->quiet, "srun");
  if (Status s = Relinquish(**c, job->id, rc); !s.ok()) {
    SlurmFail("srun", "giving back job allocation " + std::to_string(job->id) + ": " +
                          s.message());
  }
  return rc;
}

int SallocMain(const std::vector<std::string>& args) {
  // Options up to the first word that is not one; then the command.
  std::vector<std::string> options, command;
  bool quiet = false;
  std::string server;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help" || a == "--usage") {
      std::cout << kSallocUsage;
      return 0;
    }
    if (a == "--") {
      command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (a == "-Q" || a == "--quiet") {
      quiet = true;
      continue;
    }
    if (a == "--server" && i + 1 < args.size()) {
      server = args[++i];
      continue;
    }
    if (a.rfind("--server=", 0) == 0) {
      server = a.substr(9);
      continue;
    }
    if (a.empty() || a[0] != '-') {
      command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    options.push_back(a);
    // An option's value in the next word (-N 2, --time 10): the option table says which
    // take one; the ones given this way are the short ones and the long ones without '='.
    const OptionRow* row = nullptr;
    if (a.size() == 2 && a[1] != '-') {
      row = FindShortOption(a[1], kCmdSalloc);
    } else if (a.rfind("--", 0) == 0 && a.find('=') == std::string::npos) {
      row = FindOption(std::string_view(a).substr(2), kCmdSalloc);
    }
    if (row != nullptr && TakesValue(*row) && i + 1 < args.size()) {
      options.push_back(args[++i]);
    }
  }
  if (command.empty()) {
    const char* shell = std::getenv("SHELL");
    command = {shell != nullptr && *shell != '\0' ? shell : "/bin/sh"};
  }
  Result<api::SubmitRequest> r = AllocationRequest(options, BaseName(command[0]));
  if (!r.ok()) return SlurmFail("salloc", r.status().message());
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(server);
  if (!c.ok()) return SlurmFail("salloc", c.status().message());
  Result<state::JobRecord> job = Allocate(**c, *r, "salloc", /*announce=*/!quiet);
  if (!job.ok()) return SlurmFail("salloc", job.status().message());
  const state::JobId id = job->id;
  SetAllocationEnvironment(*job);
  // The command: a process group of its own, given the terminal when there is one (a
  // shell's job control works; Ctrl-C is the command's to handle), so that a revoked
  // allocation hangs up all of it.
  const bool tty = ::isatty(0) != 0;
  const pid_t child = ::fork();
  if (child == 0) {
    ::setpgid(0, 0);
    if (tty) {
      ::signal(SIGTTOU, SIG_IGN);
      ::tcsetpgrp(0, ::getpgrp());
    }
    ::signal(SIGTTOU, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGHUP, SIG_DFL);
    std::vector<char*> argv;
    for (std::string& a : command) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::cerr << "salloc: error: " << command[0] << ": " << std::strerror(errno) << "\n";
    ::_exit(errno == ENOENT ? 127 : 126);
  }
  ::setpgid(child, child);    // either of the two may run first
  ::signal(SIGINT, SIG_IGN);  // the command's; salloc waits for it
  ::signal(SIGTTOU, SIG_IGN);
  int status = 0;
  bool revoked = false;
  // While it runs: the allocation may end under it (time limit, scancel): the command
  // is told (SIGHUP, as when a terminal goes away) and salloc says why.
  auto last_check = std::chrono::steady_clock::now();
  for (;;) {
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (revoked ||
        std::chrono::steady_clock::now() - last_check < std::chrono::seconds(2)) {
      continue;
    }
    last_check = std::chrono::steady_clock::now();
    Result<JobView> v = (*c)->Job(id);
    if (v.ok() && state::IsFinal(v->job.state)) {
      revoked = true;
      std::cerr << "salloc: Job allocation " << id << " has been revoked.\n";
      ::kill(-child, SIGHUP);  // the command's whole group, as a terminal's hangup
      ::kill(-child, SIGCONT);
    }
  }
  if (tty) ::tcsetpgrp(0, ::getpgrp());  // the terminal back to salloc's group
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status)
                                   : (WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1);
  if (!revoked) {
    if (!quiet) std::cerr << "salloc: Relinquishing job allocation " << id << "\n";
    if (Status s = Relinquish(**c, id, rc); !s.ok()) {
      SlurmFail("salloc",
                "giving back job allocation " + std::to_string(id) + ": " + s.message());
    }
  }
  return rc;
}

// sattach JOB.STEP: the step's output beside its srun (from what the server still keeps)
// until the step ends (its exit status, as srun's), or until Ctrl-C detaches (0; the
// step runs on). --pty: this terminal's keys to a --pty step.
int SattachMain(const std::vector<std::string>& args) {
  static const std::vector<OptDef> kOpts = {
      {'l', "label", false},     {'Q', "quiet", false},     {0, "pty", false},
      {0, "layout", false},      {0, "input-filter", true}, {0, "output-filter", true},
      {0, "error-filter", true}, {'h', "help", false},      {0, "usage", false},
      {'v', "verbose", false},   {0, "server", true}};
  Result<ParsedArgs> p = ParseArgs(args, kOpts);
  if (!p.ok()) return SlurmBadArgs("sattach", p.status());
  if (p->Has("help") || p->Has("usage")) {
    std::cout << "Usage: sattach [-l] [-Q] [--pty] [--layout] JOBID.STEPID\n"
                 "See docs/steps.md \"sattach\".\n";
    return 0;
  }
  for (const char* filter : {"input-filter", "output-filter", "error-filter"}) {
    if (p->Has(filter)) {
      return SlurmFail("sattach", std::string("--") + filter +
                                      " is not supported: every task's output is relayed "
                                      "(-l labels each line with its task)");
    }
  }
  if (p->positional.size() != 1) {
    return SlurmFail("sattach", "give one job step: sattach JOBID.STEPID");
  }
  const std::string& word = p->positional[0];
  const size_t dot = word.find('.');
  const std::optional<long long> job = ParseInt(word.substr(0, dot));
  const std::optional<long long> step =
      dot == std::string::npos ? std::nullopt : ParseInt(word.substr(dot + 1));
  if (!job || *job <= 0 || !step || *step < 0 || *step > 1'000'000) {
    return SlurmFail("sattach", "Invalid job step id: " + Clip(word) + " (JOBID.STEPID)");
  }
  const std::string server = p->Get("server");
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(server);
  if (!c.ok()) return SlurmFail("sattach", c.status().message());
  // The step, of the job's current run, still running.
  Result<std::string> body =
      (*c)->Call("GET", "/jobs/" + std::to_string(*job) + "/steps");
  if (!body.ok()) return SlurmFail("sattach", body.status().message());
  Result<std::vector<state::StepRecord>> steps = api::StepRecordsFromJson(*body);
  if (!steps.ok()) return SlurmFail("sattach", steps.status().message());
  const state::StepRecord* found = nullptr;
  for (const state::StepRecord& st : *steps) {
    if (st.step == *step && st.state == state::JobState::kRunning) found = &st;
  }
  const std::string id = std::to_string(*job) + "." + std::to_string(*step);
  if (found == nullptr)
    return SlurmFail("sattach", "StepId=" + id + " not found running");
  if (p->Has("layout")) {
    std::cout << "Job step layout:\n  " << found->ntasks << " tasks, "
              << found->nodes.size() << " nodes (" << CompressHostList(found->nodes)
              << ")\n";
    return 0;
  }
  FollowOptions follow;
  follow.label = p->Has("label");
  follow.quiet = p->Has("quiet");
  follow.pty = p->Has("pty");
  follow.observe = true;
  return FollowStep(**c, server, static_cast<state::JobId>(*job), static_cast<int>(*step),
                    follow, "sattach");
}

}  // namespace hachi::cli::slurm
