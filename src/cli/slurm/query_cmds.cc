// squeue, sinfo, sacct: read the server's records and print them with the pure
// renderers (squeue_format.h, sinfo_format.h, sacct_format.h).
#include <pwd.h>
#include <unistd.h>

#include <ctime>
#include <iostream>

#include "api/record_json.h"
#include "cli/client.h"
#include "cli/explain_cmd.h"
#include "cli/slurm/sacct_format.h"
#include "cli/slurm/sinfo_format.h"
#include "cli/slurm/slurm_cmds.h"
#include "cli/slurm/squeue_format.h"
#include "cli/slurm/sreport_format.h"
#include "cli/slurm/sstat_format.h"
#include "report/gpu_report.h"

namespace hachi::cli::slurm {
namespace {

Time Now() { return static_cast<Time>(std::time(nullptr)); }

}  // namespace

int SqueueMain(const std::vector<std::string>& args) {
  Result<SqueueOptions> o = ParseSqueueArgs(args, CurrentUser().name);
  if (!o.ok()) return SlurmBadArgs("squeue", o.status());
  if (o->help || o->usage) {
    std::cout
        << "Usage: squeue [-h] [-r] [--start] [--json] [-j IDS] [-u USERS] [-n NAMES]\n"
           "  [-p PARTITIONS] [-A ACCOUNTS] [-t STATES] [--me] [-o FORMAT] "
           "[-O FIELDS]\nSee docs/cli.md \"squeue\".\n";
    return 0;
  }
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(o->server);
  if (!c.ok()) return SlurmFail("squeue", c.status().message());
  bool finished = !o->jobs.empty();
  for (state::JobState s : o->states) finished = finished || state::IsFinal(s);
  Result<std::vector<state::JobRecord>> jobs = (*c)->Jobs(finished);
  if (!jobs.ok()) return SlurmFail("squeue", jobs.status().message());
  if (!o->jobs.empty()) {
    // squeue -j of an unknown id: Slurm's error (22.05's words), exit 1.
    for (const JobSelector& s : o->jobs) {
      bool found = false;
      for (const state::JobRecord& j : *jobs) found = found || Matches(s, j);
      if (!found && o->jobs.size() == 1) {
        std::cerr << "slurm_load_jobs error: Invalid job id specified\n";
        return 1;
      }
    }
  }
  // --start: the backfill timeline's estimate of each pending job shown (one explain
  // request a job; at most kMaxEstimates of them, the rest N/A).
  StartEstimates starts;
  if (o->start) {
    constexpr size_t kMaxEstimates = 500;
    for (const state::JobRecord& j : *jobs) {
      if (j.state != state::JobState::kPending || starts.size() >= kMaxEstimates)
        continue;
      if (Result<report::JobExplain> e = FetchExplain(**c, j.id); e.ok()) {
        starts[j.id] = {e->earliest_start, e->earliest_node};
      }
    }
  }
  Result<std::string> text = RenderSqueue(*o, *jobs, Now(), starts);
  if (!text.ok()) return SlurmFail("squeue", text.status().message());
  std::cout << *text;
  return 0;
}

int SinfoMain(const std::vector<std::string>& args) {
  Result<SinfoOptions> o = ParseSinfoArgs(args);
  if (!o.ok()) return SlurmBadArgs("sinfo", o.status());
  if (o->help || o->usage) {
    std::cout << "Usage: sinfo [-h] [-N] [-s] [-p PARTITIONS] [-n NODES] [-o FORMAT] "
                 "[-O FIELDS]\nSee docs/cli.md \"sinfo\".\n";
    return 0;
  }
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(o->server);
  if (!c.ok()) return SlurmFail("sinfo", c.status().message());
  Result<std::vector<state::NodeStatus>> nodes = (*c)->Nodes();
  if (!nodes.ok()) return SlurmFail("sinfo", nodes.status().message());
  Result<std::string> body = (*c)->Call("GET", "/partitions");
  if (!body.ok()) return SlurmFail("sinfo", body.status().message());
  Result<std::vector<PartitionInfo>> parts = PartitionsFromJson(*body);
  if (!parts.ok()) return SlurmFail("sinfo", parts.status().message());
  Result<std::string> text = RenderSinfo(*o, *parts, *nodes);
  if (!text.ok()) return SlurmFail("sinfo", text.status().message());
  std::cout << *text;
  return 0;
}

std::optional<uint32_t> LocalUid(const std::string& name) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwnam_r(name.c_str(), &pw, buf, sizeof buf, &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  return found->pw_uid;
}

int SacctMain(const std::vector<std::string>& args) {
  const LocalUser me = CurrentUser();
  Result<SacctOptions> o = ParseSacctArgs(args, Now(), me.name, me.uid == 0);
  if (!o.ok()) return SlurmBadArgs("sacct", o.status());
  if (o->help || o->usage) {
    std::cout << "Usage: sacct [-X] [-P|-p] [-n] [-a] [-j IDS] [-u USERS] [-A ACCOUNTS]\n"
                 "  [--name NAMES] [-s STATES] [-S TIME] [-E TIME] [-o FIELDS[%WIDTH]]\n"
                 "See docs/cli.md \"sacct\".\n";
    return 0;
  }
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(o->server);
  if (!c.ok()) return SlurmFail("sacct", c.status().message());
  Result<std::vector<state::JobRecord>> jobs = (*c)->Jobs(true);
  if (!jobs.ok()) return SlurmFail("sacct", jobs.status().message());
  auto uid_of = [](const std::string& name) { return LocalUid(name); };
  // Job steps, unless -X.
  std::vector<state::StepRecord> steps;
  if (!o->allocations) {
    Result<std::string> body = (*c)->Call("GET", "/steps");
    if (!body.ok()) return SlurmFail("sacct", body.status().message());
    Result<std::vector<state::StepRecord>> s = api::StepRecordsFromJson(*body);
    if (!s.ok()) return SlurmFail("sacct", s.status().message());
    steps = std::move(*s);
  }
  Result<std::string> text = RenderSacct(*o, *jobs, Now(), uid_of, steps);
  if (!text.ok()) return SlurmFail("sacct", text.status().message());
  std::cout << *text;
  return 0;
}

int SreportMain(const std::vector<std::string>& args) {
  Result<SreportOptions> o = ParseSreportArgs(args, Now());
  if (!o.ok()) return SlurmFail("sreport", o.status().message());
  if (o->help) {
    std::cout << "Usage: sreport [-n] [-p|-P] [-t minutes|hours|seconds] [-T gres/gpu]\n"
                 "  cluster AccountUtilizationByUser | user TopUsage\n"
                 "  [start=TIME] [end=TIME] [accounts=LIST] [users=LIST] [TopCount=N] "
                 "[group] [format=FIELDS]\nSee docs/slurm.md \"sreport\".\n";
    return 0;
  }
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(o->server);
  if (!c.ok()) return SlurmFail("sreport", c.status().message());
  Result<std::string> body =
      (*c)->Raw("/report?by=accountuser&top=0&from=" + std::to_string(o->start) +
                "&to=" + std::to_string(o->end));
  if (!body.ok()) return SlurmFail("sreport", body.status().message());
  Result<report::GpuReport> r = report::GpuReportFromJson(*body);
  if (!r.ok()) return SlurmFail("sreport", r.status().message());
  // Proper Name: the GECOS field up to its first ','.
  auto proper = [](const std::string& login) -> std::string {
    struct passwd pw {};
    struct passwd* found = nullptr;
    char buf[4096];
    if (login.empty() || ::getpwnam_r(login.c_str(), &pw, buf, sizeof buf, &found) != 0 ||
        found == nullptr || found->pw_gecos == nullptr) {
      return "";
    }
    const std::string gecos = found->pw_gecos;
    return gecos.substr(0, gecos.find(','));
  };
  Result<std::string> text = RenderSreport(*o, *r, proper);
  if (!text.ok()) return SlurmFail("sreport", text.status().message());
  std::cout << *text;
  return 0;
}

int SstatMain(const std::vector<std::string>& args) {
  Result<SstatOptions> o = ParseSstatArgs(args);
  if (!o.ok()) return SlurmBadArgs("sstat", o.status());
  if (o->help || o->usage) {
    std::cout << "Usage: sstat [-a] [-i] [-n] [-p|-P] [-o FIELDS[%WIDTH]] -j ID[,ID...]\n"
                 "See docs/slurm.md \"sstat\".\n";
    return 0;
  }
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(o->server);
  if (!c.ok()) return SlurmFail("sstat", c.status().message());
  // The jobs named, each read on its own: a running one carries its usage so far.
  std::vector<state::JobRecord> jobs;
  for (const JobSelector& s : o->jobs) {
    Result<JobView> v = (*c)->Job(s.id);
    if (v.ok()) {
      jobs.push_back(v->job);
    } else if (v.status().code() != StatusCode::kNotFound) {
      return SlurmFail("sstat", v.status().message());
    }
  }
  const SstatOutput out = RenderSstat(*o, jobs);
  std::cout << out.text;
  // Slurm's sstat says these with error() and still exits 0.
  for (const std::string& e : out.errors) std::cerr << "sstat: error: " << e << "\n";
  return 0;
}

}  // namespace hachi::cli::slurm
