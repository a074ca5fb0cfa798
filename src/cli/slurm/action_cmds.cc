// scancel, scontrol: act on jobs through the API (scancel_plan.h builds the requests).
// srun is srun.cc.
#include <fcntl.h>
#include <grp.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <map>
#include <optional>

#include "api/job_errors.h"
#include "api/protocol_json.h"
#include "cli/client.h"
#include "cli/job_cmds.h"
#include "cli/slurm/scancel_plan.h"
#include "cli/slurm/scontrol_update.h"
#include "cli/slurm/slurm_cmds.h"
#include "cli/slurm_format.h"
#include "core/hostlist.h"
#include "core/slurm_time.h"
#include "core/strings.h"
#include "report/priority_report.h"

namespace hachi::cli::slurm {
namespace {

Time Now() { return static_cast<Time>(std::time(nullptr)); }

bool IsNotFound(const Status& s) { return s.code() == StatusCode::kNotFound; }

// A job the server does not know, or one that ended (api/job_errors.h).
bool IsDoneOrUnknown(const Status& s) { return IsNotFound(s) || api::IsAlreadyEnded(s); }

}  // namespace

int ScancelMain(const std::vector<std::string>& args) {
  Result<ScancelOptions> o = ParseScancelArgs(args, CurrentUser().name);
  if (!o.ok()) return SlurmBadArgs("scancel", o.status());
  if (o->help || o->usage) {
    std::cout << "Usage: scancel [-s SIGNAL] [-b] [-Q] [-u USER] [-n NAME] [-t STATE]\n"
                 "  [-p PARTITION] [-A ACCOUNT] [--me] [ID | A | A_T | A_[T-U] ...]\n"
                 "See docs/cli.md \"scancel\".\n";
    return 0;
  }
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(o->server);
  if (!c.ok()) return SlurmFail("scancel", c.status().message());
  std::vector<state::JobRecord> jobs;
  if (o->HasFilters()) {
    Result<std::vector<state::JobRecord>> all = (*c)->Jobs(false);
    if (!all.ok()) return SlurmFail("scancel", all.status().message());
    jobs = std::move(*all);
  }
  // Slurm's scancel (22.05, _cancel_job_id): a job that ended or is unknown is no error
  // for a cancel (exit 0) and, for a signal, fails it without a word; either is said only
  // with -v. `set -e` scripts and Snakemake cancel jobs that may have just ended.
  int rc = 0;
  for (const ScancelAction& a : PlanScancel(*o, jobs)) {
    Result<std::string> r = (*c)->Call("POST", a.path, a.body);
    if (r.ok()) continue;
    const bool done = IsDoneOrUnknown(r.status());
    if (!done || !o->signal.empty()) rc = 1;
    if (o->quiet || (done && !o->verbose)) continue;
    const std::string why = IsNotFound(r.status()) ? "Invalid job id specified"
                            : done ? "Job/step already completing or completed"
                                   : r.status().message();
    SlurmFail("scancel", (o->signal.empty() ? "Kill job error on job id "
                                            : "Signal job error on job id ") +
                             a.target + ": " + why);
  }
  return rc;
}

namespace {

constexpr char kScontrolUsage[] =
    "Usage: scontrol [-d|-dd] [-o] COMMAND\n"
    "  show job [ID] | show jobid [ID] | show node [NAME] | show partition [NAME]\n"
    "  show config | show hostnames [LIST]   (LIST default: $SLURM_JOB_NODELIST)\n"
    "  hold ID... | release ID... | requeue ID...\n"
    "  update JobId=ID[,ID...] FIELD=VALUE...   (TimeLimit, Partition, JobName, "
    "Comment,\n"
    "    Nice, Account, QOS, Features, ExcNodeList, ReqNodeList, StartTime, Deadline,\n"
    "    Dependency, NumNodes, Gres, MinMemoryNode; a running job: TimeLimit, JobName,\n"
    "    Comment)\n"
    "  update NodeName=LIST State=DRAIN|FAIL|RESUME|UNDRAIN [Reason=WHY]\n"
    "See docs/cli.md \"scontrol\".\n";

// A group's name ("" when the system has none for `gid`).
std::string GroupName(uint32_t gid) {
  struct group gr {};
  struct group* found = nullptr;
  char buf[4096];
  if (::getgrgid_r(gid, &gr, buf, sizeof buf, &found) != 0 || found == nullptr) return "";
  return found->gr_name;
}

int ShowJobs(ApiClient& c, const std::vector<std::string>& ids) {
  Result<std::vector<JobSelector>> sel = ParseJobSelectors(ids);
  if (!sel.ok()) return SlurmFail("scontrol", sel.status().message());
  const bool any = sel->empty();
  Result<std::vector<state::JobRecord>> jobs = c.Jobs(!any);
  if (!jobs.ok()) return SlurmFail("scontrol", jobs.status().message());
  bool printed = false;
  // Pending jobs' priorities, as the queue order has them (one request, when needed).
  std::optional<std::map<state::JobId, long long>> priorities;
  auto priority_of = [&](state::JobId id) -> long long {
    if (!priorities) {
      priorities.emplace();
      Result<std::string> body = c.Call("GET", "/priority");
      Result<report::PriorityReport> r =
          body.ok() ? report::PriorityReportFromJson(*body)
                    : Result<report::PriorityReport>(body.status());
      if (r.ok()) {
        for (const report::JobPriorityRow& row : r->jobs) {
          (*priorities)[row.id] = std::llround(row.priority);
        }
      }
    }
    auto it = priorities->find(id);
    return it == priorities->end() ? 0 : it->second;
  };
  for (const state::JobRecord& j : *jobs) {
    bool want = any;
    for (const JobSelector& s : *sel) want = want || Matches(s, j);
    if (!want) continue;
    std::string diagnosis;
    if (j.state == state::JobState::kPending && !any) {
      if (Result<JobView> v = c.Job(j.id); v.ok()) diagnosis = v->diagnosis;
    }
    ShowJobContext context;
    context.group = GroupName(j.spec.gid);
    if (j.state == state::JobState::kPending) context.priority = priority_of(j.id);
    std::cout << FormatShowJob(j, diagnosis, Now(), context) << "\n";
    printed = true;
  }
  if (!printed) {
    if (any) {
      std::cout << "No jobs in the system\n";
      return 0;
    }
    std::cerr << "slurm_load_jobs error: Invalid job id specified\n";
    return 1;
  }
  return 0;
}

int ShowNodesOrPartitions(ApiClient& c, bool partitions, const std::string& name) {
  Result<std::vector<state::NodeStatus>> nodes = c.Nodes();
  if (!nodes.ok()) return SlurmFail("scontrol", nodes.status().message());
  if (!partitions) {
    bool found = false;
    for (const state::NodeStatus& n : *nodes) {
      if (!name.empty() && n.record.name != name) continue;
      std::cout << FormatShowNode(n);
      found = true;
    }
    if (!found && !name.empty()) {
      std::cerr << "Node " << name << " not found\n";
      return 1;
    }
    return 0;
  }
  Result<std::string> body = c.Call("GET", "/partitions");
  if (!body.ok()) return SlurmFail("scontrol", body.status().message());
  Result<std::vector<PartitionInfo>> parts = PartitionsFromJson(*body);
  if (!parts.ok()) return SlurmFail("scontrol", parts.status().message());
  bool found = false;
  for (const PartitionInfo& p : *parts) {
    if (!name.empty() && p.name != name) continue;
    std::cout << FormatShowPartition(p, *nodes);
    found = true;
  }
  if (!found && !name.empty()) {
    std::cerr << "Partition " << name << " not found\n";
    return 1;
  }
  return 0;
}

// scontrol's options into `words` and *server; an exit code when they end the run
// (--help, an unknown option).
std::optional<int> ScontrolArgs(const std::vector<std::string>& argv,
                                std::vector<std::string>* words, std::string* server) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "-h" || a == "--help" || a == "--usage" || a == "help") {
      std::cout << kScontrolUsage;
      return 0;
    }
    if (a == "-d" || a == "-dd" || a == "--details" || a == "-o" || a == "--oneliner" ||
        a == "-Q" || a == "--quiet" || a == "-v") {
      continue;  // details: FormatShowJob always prints them; one-liner: not yet
    }
    if (a == "--server" && i + 1 < argv.size()) {
      *server = argv[++i];
      continue;
    }
    if (a.rfind("--server=", 0) == 0) {
      *server = a.substr(9);
      continue;
    }
    if (!a.empty() && a[0] == '-') {
      std::cerr << "scontrol: unrecognized option '" << a << "'\n"
                << UsageHint("scontrol");
      return 1;
    }
    words->push_back(a);
  }
  return std::nullopt;
}

// scontrol show hostnames [LIST]: LIST or the job's node list, a name a line.
int ShowHostnames(const std::vector<std::string>& words) {
  std::string list = words.size() >= 3 ? words[2] : "";
  if (list.empty()) {
    const char* env = std::getenv("SLURM_JOB_NODELIST");
    if (env == nullptr) env = std::getenv("SLURM_NODELIST");
    if (env == nullptr) return SlurmFail("scontrol", "No list of hosts given");
    list = env;
  }
  Result<std::vector<std::string>> hosts = ExpandHostList(list);
  // scontrol's own words for a list it cannot read.
  if (!hosts.ok()) return SlurmFail("scontrol", "Invalid hostlist: " + Clip(list));
  for (const std::string& h : *hosts) std::cout << h << "\n";
  return 0;
}

// scontrol show config: the partitions' settings and the controllers as given (several:
// SlurmctldHost[0], [1], ... as Slurm's backups). `server`: --server's value or "".
int ShowConfig(ApiClient& c, const std::vector<std::string>&, const std::string& server) {
  Result<std::string> body = c.Call("GET", "/partitions");
  if (!body.ok()) return SlurmFail("scontrol", body.status().message());
  Result<std::vector<PartitionInfo>> parts = PartitionsFromJson(*body);
  if (!parts.ok()) return SlurmFail("scontrol", parts.status().message());
  const char* env = std::getenv("HACHI_SERVER");
  const std::string shown = !server.empty()                  ? server
                            : env != nullptr && *env != '\0' ? env
                                                             : "(local)";
  std::cout << FormatShowConfig(Now(), shown, *parts);
  return 0;
}

int ShowJobsOf(ApiClient& c, const std::vector<std::string>& rest, const std::string&) {
  return ShowJobs(c, rest);
}
int ShowNodes(ApiClient& c, const std::vector<std::string>& rest, const std::string&) {
  return ShowNodesOrPartitions(c, false, rest.empty() ? "" : rest[0]);
}
int ShowPartitions(ApiClient& c, const std::vector<std::string>& rest,
                   const std::string&) {
  return ShowNodesOrPartitions(c, true, rest.empty() ? "" : rest[0]);
}
int ShowAssoc(ApiClient& c, const std::vector<std::string>& rest, const std::string&) {
  return ShowAssocMgr(c, rest);
}

// The entities of `scontrol show`: a word, or (min_prefix > 0) any prefix of it that
// long or longer, as scontrol matches "assoc_mgr" from "as".
struct ShowEntity {
  std::string_view word;
  size_t min_prefix = 0;
  int (*show)(ApiClient&, const std::vector<std::string>& rest,
              const std::string& server);
};
constexpr ShowEntity kShowEntities[] = {
    {"job", 0, ShowJobsOf},
    {"jobs", 0, ShowJobsOf},
    {"jobid", 0, ShowJobsOf},
    {"node", 0, ShowNodes},
    {"nodes", 0, ShowNodes},
    {"partition", 0, ShowPartitions},
    {"partitions", 0, ShowPartitions},
    {"assoc_mgr", 2, ShowAssoc},
    {"config", 0, ShowConfig},
};

// scontrol show ENTITY [...]. `server`: --server's value ("" when not given).
int Show(ApiClient& c, const std::vector<std::string>& words, const std::string& server) {
  const std::string what = words.size() >= 2 ? ToLower(words[1]) : "";
  const std::vector<std::string> rest(words.begin() + std::min<size_t>(2, words.size()),
                                      words.end());
  for (const ShowEntity& e : kShowEntities) {
    const bool match = e.min_prefix > 0
                           ? what.size() >= e.min_prefix && e.word.starts_with(what)
                           : what == e.word;
    if (match) return e.show(c, rest, server);
  }
  return SlurmFail("scontrol", "invalid entity: " + what + " for keyword: show");
}

// scontrol hold|release|requeue|uhold ID...
int JobAction(ApiClient& c, const std::string& cmd,
              const std::vector<std::string>& words) {
  const std::vector<std::string> ids(words.begin() + 1, words.end());
  if (ids.empty()) return SlurmFail("scontrol", "Invalid job id specified");
  Result<std::vector<JobSelector>> sel = ParseJobSelectors(ids);
  if (!sel.ok()) return SlurmFail("scontrol", sel.status().message());
  // uhold: a hold the user may release, even when an administrator places it.
  const std::string action = cmd == "uhold" ? "hold" : cmd;
  const std::string body = cmd == "uhold" ? api::HoldRequestToJson({.user = true}) : "";
  int rc = 0;
  for (const JobSelector& s : *sel) {
    Result<std::string> r =
        c.Call("POST", "/jobs/" + SelectorText(s) + "/" + action, body);
    if (!r.ok()) {
      rc = 1;
      SlurmFail("scontrol",
                (IsNotFound(r.status()) ? std::string("Invalid job id specified")
                                        : r.status().message()) +
                    " for job " + SelectorText(s));
    }
  }
  return rc;
}

// scontrol update NodeName=LIST State=DRAIN|RESUME... Reason=...: each node drained or
// resumed; nothing printed on success, Slurm's lines on errors.
int UpdateNodes(ApiClient& c, const std::vector<std::string>& words) {
  Result<NodeUpdate> u = ParseNodeUpdate(words);
  if (!u.ok()) {
    std::cerr << u.status().message() << "\n";
    return 1;
  }
  int rc = 0;
  for (const std::string& node : u->nodes) {
    Status s = c.NodeAction(node, u->drain ? "drain" : "resume", u->reason);
    if (!s.ok()) {
      rc = 1;
      std::cerr << "slurm_update error: "
                << (IsNotFound(s) ? "Invalid node name specified" : s.message()) << " ("
                << node << ")\n";
    }
  }
  return rc;
}

// scontrol update JobId=ID FIELD=VALUE... (or NodeName=, above).
int Update(ApiClient& c, const std::vector<std::string>& words) {
  const std::vector<std::string> rest(words.begin() + 1, words.end());
  if (IsNodeUpdate(rest)) return UpdateNodes(c, rest);
  if (!rest.empty() && ToLower(rest[0]).rfind("partitionname=", 0) == 0) {
    // Partitions are the cluster config's: one source of truth for every server.
    std::cerr << "Update of this parameter is not supported: " << rest[0]
              << " (partitions come from the cluster config: edit its [[partition]] and "
                 "restart the server)\nRequest aborted\n";
    return 1;
  }
  // Each job's body is made against the job as it is (TimeLimit=+30 counts from its
  // limit), then POST /jobs/ID/update; nothing is printed on success, as Slurm's.
  // Slurm 22.05's words, bare (no "scontrol: error:"), as it prints them for updates.
  Result<UpdateWords> u =
      ParseUpdateWords(std::vector<std::string>(words.begin() + 1, words.end()));
  if (!u.ok()) {
    const std::string& m = u.status().message();
    if (m.rfind("No job identification", 0) == 0) {
      std::cerr << "No valid entity in update command\nInput line must include "
                   "\"NodeName\", \"PartitionName\", \"Reservation\", \"JobId\", or "
                   "\"SlurmctldDebug\"\n";
    } else if (m.rfind("Update of this parameter", 0) == 0) {
      std::cerr << m << "\nRequest aborted\n";
    } else {
      return SlurmFail("scontrol", m);
    }
    return 1;
  }
  int rc = 0;
  for (const JobSelector& s : u->jobs) {
    Result<JobView> job = c.Job(s.id);
    if (!job.ok()) {
      rc = 1;
      std::cerr << (IsNotFound(job.status()) ? std::string("Invalid job id specified")
                                             : job.status().message())
                << " for job " << SelectorText(s) << "\n";
      continue;
    }
    const Time now = Now();
    Result<std::string> body = UpdateBody(u->fields, job->job, now, LocalUtcOffset(now));
    if (!body.ok()) return SlurmFail("scontrol", body.status().message());
    Result<std::string> r = c.Call("POST", "/jobs/" + SelectorText(s) + "/update", *body);
    if (!r.ok()) {
      rc = 1;
      std::cerr << r.status().message() << "\n";  // it names the job ("job 12: ...")
    }
  }
  return rc;
}

}  // namespace

int ScontrolMain(const std::vector<std::string>& argv) {
  std::vector<std::string> words;
  std::string server;
  if (std::optional<int> rc = ScontrolArgs(argv, &words, &server)) return *rc;
  if (words.empty()) return SlurmFail("scontrol", "no command given (scontrol --help)");
  const std::string cmd = ToLower(words[0]);
  if (cmd == "show" && words.size() >= 2 && ToLower(words[1]) == "hostnames") {
    return ShowHostnames(words);
  }
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(server);
  if (!c.ok()) return SlurmFail("scontrol", c.status().message());
  if (cmd == "show") return Show(**c, words, server);
  if (cmd == "hold" || cmd == "release" || cmd == "requeue" || cmd == "uhold") {
    return JobAction(**c, cmd, words);
  }
  if (cmd == "update") return Update(**c, words);
  return SlurmFail("scontrol", "Invalid command: " + words[0]);
}

}  // namespace hachi::cli::slurm
