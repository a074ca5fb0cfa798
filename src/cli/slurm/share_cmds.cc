// sshare, sprio and sacctmgr: the server's fair share, priority terms and association
// tree (GET /priority), printed by the pure renderers (share_format.h,
// sacctmgr_format.h).
#include <iostream>

#include "cli/client.h"
#include "cli/slurm/assoc_mgr_format.h"
#include "cli/slurm/sacctmgr_format.h"
#include "cli/slurm/share_format.h"
#include "cli/slurm/slurm_cmds.h"
#include "report/priority_report.h"

namespace hachi::cli::slurm {
namespace {

Result<report::PriorityReport> FetchPriority(const std::string& server) {
  Result<std::unique_ptr<ApiClient>> c = ApiClient::Connect(server);
  if (!c.ok()) return c.status();
  Result<std::string> body = (*c)->Call("GET", "/priority");
  if (!body.ok()) return body.status();
  return report::PriorityReportFromJson(*body);
}

}  // namespace

int SshareMain(const std::vector<std::string>& args) {
  Result<SshareOptions> o = ParseSshareArgs(args, CurrentUser().name);
  if (!o.ok()) return SlurmBadArgs("sshare", o.status());
  if (o->help || o->usage) {
    std::cout << "Usage: sshare [-a] [-A ACCOUNTS] [-u USERS] [-U] [-l] [-n] [-p|-P] "
                 "[-o FIELDS[%WIDTH]]\nSee docs/slurm.md \"Fair share and priority\".\n";
    return 0;
  }
  Result<report::PriorityReport> r = FetchPriority(o->server);
  if (!r.ok())
    return SlurmFail("sshare",
                     "Couldn't get shares from controller: " + r.status().message());
  Result<std::string> text = RenderSshare(*o, *r);
  if (!text.ok()) return SlurmFail("sshare", text.status().message());
  std::cout << *text;
  return 0;
}

int SprioMain(const std::vector<std::string>& args) {
  Result<SprioOptions> o = ParseSprioArgs(args);
  if (!o.ok()) return SlurmBadArgs("sprio", o.status());
  if (o->help || o->usage) {
    std::cout << "Usage: sprio [-h] [-l|-o FORMAT] [-n] [-w] [-j IDS] [-u USERS] "
                 "[-p PARTITIONS] [-S SORT]\nSee docs/slurm.md \"Fair share and "
                 "priority\".\n";
    return 0;
  }
  Result<report::PriorityReport> r = FetchPriority(o->server);
  if (!r.ok()) {
    return SlurmFail("sprio", "Couldn't get priority factors from controller: " +
                                  r.status().message());
  }
  Result<std::string> text = RenderSprio(*o, *r);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kUnsatisfiable) {  // Slurm's own lines
      std::cerr << text.status().message() << "\n";
      return 1;
    }
    return SlurmFail("sprio", text.status().message());
  }
  std::cout << *text;
  return 0;
}

int SacctmgrMain(const std::vector<std::string>& args) {
  Result<SacctmgrOptions> o = ParseSacctmgrArgs(args);
  if (!o.ok()) {
    if (o.status().code() == StatusCode::kUnsatisfiable) {
      return SlurmFail("sacctmgr", o.status().message());
    }
    return SlurmBadArgs("sacctmgr", o.status());
  }
  if (o->help) {
    std::cout << "Usage: sacctmgr [-n] [-p|-P] show account|user|association|qos "
                 "[where] [name=|account=|user=LIST] [format=FIELDS]\n"
                 "Accounts, shares, limits and QoS are the cluster config's: see "
                 "docs/slurm.md \"Accounts: sacctmgr\".\n";
    return 0;
  }
  Result<report::PriorityReport> r = FetchPriority(o->server);
  if (!r.ok()) return SlurmFail("sacctmgr", r.status().message());
  Result<std::string> text = RenderSacctmgr(*o, *r);
  if (!text.ok()) return SlurmFail("sacctmgr", text.status().message());
  std::cout << *text;
  return 0;
}

int ShowAssocMgr(ApiClient& c, const std::vector<std::string>& words) {
  Result<AssocMgrOptions> o = ParseAssocMgrArgs(words);
  if (!o.ok()) {
    std::cerr << o.status().message() << "\n";  // scontrol's lines, without a prefix
    return 1;
  }
  Result<std::string> body = c.Call("GET", "/priority");
  Result<report::PriorityReport> r =
      body.ok() ? report::PriorityReportFromJson(*body) : body.status();
  Result<std::vector<state::JobRecord>> jobs =
      r.ok() ? c.Jobs(false) : Result<std::vector<state::JobRecord>>(r.status());
  if (!jobs.ok()) {
    return SlurmFail("scontrol",
                     "slurm_load_assoc_mgr_info error: " + jobs.status().message());
  }
  std::cout << RenderAssocMgr(*o, *r, *jobs, r->now,
                              [](const std::string& name) { return LocalUid(name); });
  return 0;
}

}  // namespace hachi::cli::slurm
