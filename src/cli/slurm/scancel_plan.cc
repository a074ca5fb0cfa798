#include "cli/slurm/scancel_plan.h"

#include <algorithm>
#include <csignal>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/slurm_format.h"
#include "core/hostlist.h"
#include "core/strings.h"
#include "core/time_format.h"

namespace hachi::cli::slurm {
namespace {

using state::JobRecord;

// Built at the first parse, not at the start of every command (the binary's static
// initialisers are part of what each process pays: docs/benchmarks.md, "Process start").
const std::vector<OptDef>& ScancelOpts() {
  static const auto* opts = new std::vector<OptDef>{
      {'s', "signal", true},  {'b', "batch", false}, {'u', "user", true},
      {'n', "name", true},    {'t', "state", true},  {'p', "partition", true},
      {'A', "account", true}, {'Q', "quiet", false}, {'v', "verbose", false},
      {'f', "full", false},   {0, "me", false},      {0, "help", false},
      {0, "usage", false},    {0, "server", true},   {0, "jobname", true},
      {'M', "clusters", true}};  // one cluster: accepted (Snakemake: --clusters=all)
  return *opts;
}

constexpr std::pair<std::string_view, int> kSignals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ABRT", SIGABRT},
    {"KILL", SIGKILL}, {"ALRM", SIGALRM}, {"TERM", SIGTERM}, {"USR1", SIGUSR1},
    {"USR2", SIGUSR2}, {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},
    {"URG", SIGURG},   {"XCPU", SIGXCPU}, {"PIPE", SIGPIPE},
};

}  // namespace

Result<ScancelOptions> ParseScancelArgs(const std::vector<std::string>& args,
                                        const std::string& me) {
  Result<ParsedArgs> p = ParseArgs(args, ScancelOpts());
  if (!p.ok()) return p.status();
  ScancelOptions o;
  o.help = p->Has("help");
  o.usage = p->Has("usage");
  o.quiet = p->Has("quiet");
  o.verbose = p->Has("verbose");
  o.server = p->Get("server");
  o.users = p->List("user");
  if (p->Has("me")) o.users.push_back(me);
  o.names = p->List("name");
  for (const std::string& n : p->List("jobname")) o.names.push_back(n);
  o.partitions = p->List("partition");
  o.accounts = p->List("account");
  for (const std::string& s : p->List("state")) {
    Result<std::vector<state::JobState>> st = ParseStateList(s);
    if (!st.ok()) return InvalidArgument("Invalid job state specified: " + Clip(s));
    o.states.insert(o.states.end(), st->begin(), st->end());
  }
  if (p->Has("signal")) {
    std::string sig = p->Get("signal");
    std::string up;
    for (char c : sig)
      up += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (StartsWith(up, "SIG")) up = up.substr(3);
    const bool number = !up.empty() && std::all_of(up.begin(), up.end(), [](char c) {
      return c >= '0' && c <= '9';
    });
    const bool known = std::any_of(std::begin(kSignals), std::end(kSignals),
                                   [&](const auto& k) { return k.first == up; });
    if (number ? (up.size() > 2 || std::stoi(up) < 1 || std::stoi(up) > 64) : !known) {
      return InvalidArgument("Invalid job signal: " + Clip(sig));
    }
    o.signal = up;
  }
  // Slurm's flags: --full (KILL_FULL_JOB) is looked at before -b (KILL_JOB_BATCH), and
  // SIGKILL is never kept from the batch step.
  const bool kill = o.signal == "KILL" || o.signal == "9";
  o.scope = p->Has("full") || (kill && !p->Has("batch")) ? api::SignalScope::kAll
            : p->Has("batch")                            ? api::SignalScope::kBatch
                                                         : api::SignalScope::kSteps;
  // Slurm takes the ids anywhere among the options.
  Result<std::vector<JobSelector>> sel = ParseJobSelectors(p->positional);
  if (!sel.ok()) return sel.status();
  o.jobs = *sel;
  // --help and --usage need no job (help2man reads `scancel --help` for its man page).
  if (o.jobs.empty() && !o.HasFilters() && !o.help && !o.usage) {
    return InvalidArgument("No job identification provided");
  }
  return o;
}

std::vector<ScancelAction> PlanScancel(const ScancelOptions& o,
                                       const std::vector<JobRecord>& jobs) {
  auto action = [&](const std::string& target) {
    ScancelAction a{target, "/jobs/" + target + "/cancel", ""};
    if (!o.signal.empty()) {
      a.path = "/jobs/" + target + "/signal";
      nlohmann::json sig = std::isdigit(static_cast<unsigned char>(o.signal[0]))
                               ? nlohmann::json(std::stoi(o.signal))
                               : nlohmann::json(o.signal);
      a.body = nlohmann::json{{"signal", sig}, {"scope", api::SignalScopeText(o.scope)}}
                   .dump();
    }
    return a;
  };
  std::vector<ScancelAction> out;
  if (!o.HasFilters()) {
    for (const JobSelector& s : o.jobs) out.push_back(action(SelectorText(s)));
    return out;
  }
  auto in = [](const std::vector<std::string>& list, const std::string& v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  for (const JobRecord& j : jobs) {
    if (state::IsFinal(j.state)) continue;
    if (!o.jobs.empty() &&
        std::none_of(o.jobs.begin(), o.jobs.end(),
                     [&](const JobSelector& s) { return Matches(s, j); })) {
      continue;
    }
    if (!o.states.empty() &&
        std::find(o.states.begin(), o.states.end(), j.state) == o.states.end()) {
      continue;
    }
    if (!in(o.users, j.req.user) || !in(o.names, j.spec.name) ||
        !in(o.partitions, j.req.partition) || !in(o.accounts, j.req.account)) {
      continue;
    }
    out.push_back(action(JobIdText(j)));
  }
  return out;
}

std::string FormatShowPartition(const PartitionInfo& p,
                                const std::vector<state::NodeStatus>& nodes) {
  int cpus = 0, count = 0, gpus = 0;
  int64_t mem = 0;
  for (const state::NodeStatus& n : nodes) {
    if (std::find(p.nodes.begin(), p.nodes.end(), n.record.name) == p.nodes.end())
      continue;
    cpus += n.record.cpus;
    mem += n.record.memory_mib;
    gpus += n.gpus;
    ++count;
  }
  auto limit = [](Duration d) {
    return d <= 0 ? std::string("UNLIMITED") : FormatElapsed(d);
  };
  std::string o = "PartitionName=" + p.name + "\n";
  o += "   AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL\n";
  o += "   AllocNodes=ALL Default=" + std::string(p.is_default ? "YES" : "NO") +
       " QoS=N/A\n";
  o += "   DefaultTime=" + (p.default_time > 0 ? FormatElapsed(p.default_time) : "NONE") +
       " DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO\n";
  o += "   MaxNodes=UNLIMITED MaxTime=" + limit(p.max_time) +
       " MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED\n";
  o += "   Nodes=" + (p.nodes.empty() ? "(null)" : CompressHostList(p.nodes)) + "\n";
  o += "   PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=" +
       std::string(p.whole_node ? "EXCLUSIVE" : "NO") + "\n";
  o += "   OverTimeLimit=NONE PreemptMode=OFF\n";
  o += "   State=UP TotalCPUs=" + std::to_string(cpus) +
       " TotalNodes=" + std::to_string(count) + " SelectTypeParameters=NONE\n";
  o += "   JobDefaults=(null)\n";
  o += "   DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED\n";
  o += "   TRES=cpu=" + std::to_string(cpus) + ",mem=" + std::to_string(mem) +
       "M,node=" + std::to_string(count) + ",billing=" + std::to_string(cpus) +
       (gpus > 0 ? ",gres/gpu=" + std::to_string(gpus) : "") + "\n";
  // Hachi's own: the GPUs a job of this partition may ask for.
  o += "   MinGpus=" + std::to_string(p.min_gpus) +
       " MaxGpus=" + (p.max_gpus > 0 ? std::to_string(p.max_gpus) : "UNLIMITED") + "\n";
  return o + "\n";
}

std::string FormatShowNode(const state::NodeStatus& n) {
  const state::NodeRecord& r = n.record;
  const std::string state = NodeStateFlags(n);
  std::string parts;
  for (const std::string& p : n.partitions) parts += (parts.empty() ? "" : ",") + p;
  std::string o = "NodeName=" + r.name + " Arch=x86_64 CoresPerSocket=1 \n";
  o += "   CPUAlloc=" + std::to_string(n.alloc_cpus) +
       " CPUEfctv=" + std::to_string(r.cpus) + " CPUTot=" + std::to_string(r.cpus) +
       " CPULoad=N/A\n";
  const std::string features = NodeFieldValue(n, 'f');
  o += "   AvailableFeatures=" + features + "\n   ActiveFeatures=" + features + "\n";
  o += "   Gres=" + NodeFieldValue(n, 'G') + "\n";
  o += "   NodeAddr=" + (r.address.empty() ? r.name : r.address) +
       " NodeHostName=" + r.name + "\n";
  o += "   RealMemory=" + std::to_string(r.memory_mib) +
       " AllocMem=" + std::to_string(n.alloc_memory_mib) +
       " FreeMem=N/A Sockets=1 Boards=1\n";
  o += "   State=" + state +
       " ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n";
  o += "   Partitions=" + parts + " \n";
  o += "   CfgTRES=cpu=" + std::to_string(r.cpus) +
       ",mem=" + std::to_string(r.memory_mib) + "M,billing=" + std::to_string(r.cpus) +
       (n.gpus > 0 ? ",gres/gpu=" + std::to_string(n.gpus) : "") + "\n";
  o += "   AllocTRES=";
  if (n.alloc_cpus > 0) {
    int gpus = 0;
    for (state::JobId j : n.gpu_jobs) gpus += j != 0 ? 1 : 0;
    o += "cpu=" + std::to_string(n.alloc_cpus) +
         ",mem=" + std::to_string(n.alloc_memory_mib) + "M" +
         (gpus > 0 ? ",gres/gpu=" + std::to_string(gpus) : "");
  }
  o += "\n";
  if (!r.state_reason.empty()) {
    o += "   Reason=" + r.state_reason +
         (r.state_since > 0 ? " [" + FormatSlurmLocal(r.state_since) + "]" : "") + "\n";
  }
  return o + "\n";
}

std::string FormatShowConfig(Time now, const std::string& server,
                             const std::vector<PartitionInfo>& partitions) {
  std::string o = "Configuration data as of " + FormatSlurmLocal(now) + "\n";
  auto kv = [&](const std::string& k, const std::string& v) {
    std::string key = k;
    key.resize(std::max<size_t>(key.size(), 23), ' ');
    o += key + "= " + v + "\n";
  };
  kv("ClusterName", "(null)");
  kv("SchedulerType", "hachi");
  kv("SelectType", "hachi (topology-aware GPU sets)");
  kv("SLURM_VERSION", "22.05.8 (Hachi 0.1.0)");
  // Several controllers (a comma-separated list): one line each, as Slurm's backups.
  const std::vector<std::string_view> hosts = Split(server, ',');
  for (size_t i = 0; i < hosts.size(); ++i) {
    kv("SlurmctldHost[" + std::to_string(i) + "]", std::string(Trim(hosts[i])));
  }
  std::string names;
  for (const PartitionInfo& p : partitions) names += (names.empty() ? "" : ",") + p.name;
  kv("PartitionNames", names.empty() ? "(null)" : names);
  kv("GresTypes", "gpu");
  kv("AccountingStorageType", "hachi (the server's job records)");
  return o;
}

}  // namespace hachi::cli::slurm
