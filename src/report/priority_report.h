// Fair share and priority as the scheduler uses them (GET /api/v1/priority; `sshare`,
// `sprio`, `sacctmgr show`; docs/scheduler.md "Priority"): each account's shares,
// decayed usage and factor, each user's usage within an account, every pending job's
// priority terms, and the association tree (accounts, users, limits, QoS) the config
// makes.
// The server fills it from its fair-share meter and the same sched/ functions its
// queue order calls, so what is shown is what the order sorts by.
//
// Plain values and their JSON; thread-compatible.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "sched/cluster.h"
#include "sched/fair_share.h"
#include "sched/priority.h"
#include "state/records.h"

namespace hachi::report {

struct UserUsage {
  std::string account;
  std::string user;
  double usage = 0;  // decayed GPU-seconds of the user's jobs under the account
  bool operator==(const UserUsage&) const = default;
};

// The association tree as the config makes it (sacctmgr show; docs/slurm.md): accounts
// with their members and GPU limit, users with theirs, the QoS.
struct AccountEntry {
  std::string name;
  std::vector<std::string> members;  // [[account]] members; empty: anyone may use it
  int gpu_limit = -1;                // [limits] account_gpus; -1: none
  bool operator==(const AccountEntry&) const = default;
};
struct UserEntry {
  std::string name;
  int gpu_limit = -1;  // [limits] user_gpus; -1: none
  bool admin = false;  // [auth] admins
  bool operator==(const UserEntry&) const = default;
};

struct QosEntry {
  std::string name;
  int priority = 0;  // 0..1000 ([[qos]] priority)
  double usage = 0;  // decayed GPU-seconds of the jobs that ran under it
  bool operator==(const QosEntry&) const = default;
};

struct JobPriorityRow {
  state::JobId id = 0;
  std::string user, account, partition, qos;
  double priority = 0;  // terms.Total()
  sched::PriorityTerms terms;
};

struct PriorityReport {
  Time now = 0;
  Duration half_life = 0;
  bool multifactor = true;  // false: the order is submit time ("fifo", "easy")
  sched::PriorityWeights weights;
  // Every account with a share, and every account with usage but none (factor 0,
  // shares 0), ascending by name.
  std::vector<sched::FairShareAccount> accounts;
  double usage_total = 0;        // over every account
  std::vector<UserUsage> users;  // ascending by (account, user)
  // The pending jobs, highest priority first; held ones and those before their --begin
  // are not listed (Slurm's sprio leaves them out).
  std::vector<JobPriorityRow> jobs;
  // Every account configured ([[account]], shares, limits) or used, ascending; every
  // user a member, an admin, limited or with usage, ascending; the QoS as configured.
  std::vector<AccountEntry> account_list;
  std::vector<UserEntry> user_list;
  std::vector<QosEntry> qos;
};

std::string PriorityReportToJson(const PriorityReport& r);
Result<PriorityReport> PriorityReportFromJson(std::string_view text);

}  // namespace hachi::report
