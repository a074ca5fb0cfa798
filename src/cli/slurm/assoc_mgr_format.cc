#include "cli/slurm/assoc_mgr_format.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <string_view>

#include "cli/slurm/sacctmgr_format.h"
#include "cli/slurm_job_text.h"
#include "core/strings.h"

namespace hachi::cli::slurm {
namespace {

// Slurm's TRES in its order (ids 1-8, then the GRES): the figures Hachi has are cpu,
// mem (MiB), node, billing (its CPUs, as sacct's) and gres/gpu; the others are 0 on
// Slurm too without energy accounting or a burst buffer.
enum Tres : uint8_t {
  kCpu,
  kMem,
  kEnergy,
  kNode,
  kBilling,
  kFsDisk,
  kVmem,
  kPages,
  kGpu
};
constexpr std::array<std::string_view, 9> kTresNames = {
    "cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages", "gres/gpu"};
constexpr int64_t kNoLimit = -1;
constexpr uint32_t kNoVal = 4294967294u;      // Slurm's NO_VAL: a user without a uid
constexpr uint32_t kUseParent = 0x7fffffffu;  // SLURMDB_FS_USE_PARENT ("parent")

using TresCounts = std::array<int64_t, kTresNames.size()>;

// What an association's jobs hold now.
struct InUse {
  int running = 0, submitted = 0, accruing = 0;
  TresCounts tres = {};
  TresCounts run_secs = {};  // each running job's TRES times its time left
};

// A running job's TRES, as squeue and show job count them (slurm_job_text.h).
TresCounts JobTres(const state::JobRecord& j) {
  TresCounts t = {};
  t[kCpu] = slurm_job::TotalCpus(j);
  t[kMem] = slurm_job::TotalMem(j);
  t[kNode] = slurm_job::NodeCount(j);
  t[kBilling] = t[kCpu];
  t[kGpu] = j.req.TotalGpus();
  return t;
}

void Add(const state::JobRecord& j, Time now, InUse* u) {
  ++u->submitted;
  if (j.state == state::JobState::kPending) {
    // Slurm's accrue count: pending jobs gaining age priority (not held, eligible).
    if (!j.held && j.req.begin_time <= now && j.reason != "Dependency") ++u->accruing;
    return;
  }
  ++u->running;
  const TresCounts t = JobTres(j);
  const Time left =
      j.req.time_limit > 0 ? std::max<Time>(0, j.start_time + j.req.time_limit - now) : 0;
  for (size_t i = 0; i < t.size(); ++i) {
    u->tres[i] += t[i];
    u->run_secs[i] += t[i] * left;
  }
}

std::string Limit(int64_t limit) {
  return limit == kNoLimit ? "N" : std::to_string(limit);
}

// _print_tres_line: every TRES with its limit and use (`used` given), else only those
// with a limit. `only`: the TRES Hachi has a figure for (GrpTRESMins: gres/gpu).
std::string TresLine(std::string_view name, const TresCounts& limits,
                     const TresCounts* used, int64_t divider = 0, int only = -1) {
  std::string s = std::string(name) + "=";
  bool comma = false;
  for (size_t i = 0; i < kTresNames.size(); ++i) {
    if (only >= 0 && static_cast<int>(i) != only) continue;
    if (used == nullptr && limits[i] == kNoLimit) continue;
    s += (comma ? "," : "") + std::string(kTresNames[i]) + "=" + Limit(limits[i]);
    if (used != nullptr) {
      s += "(" + std::to_string(divider > 0 ? (*used)[i] / divider : (*used)[i]) + ")";
    }
    comma = true;
  }
  return s;
}

TresCounts NoLimits() {
  TresCounts t;
  t.fill(kNoLimit);
  return t;
}

TresCounts GpuLimit(int gpus) {
  TresCounts t = NoLimits();
  if (gpus >= 0) t[kGpu] = gpus;
  return t;
}

std::string Fixed(double v, const char* format = "%.2f") {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

bool In(const std::vector<std::string>& list, const std::string& v) {
  return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
}

struct Assoc {
  std::string account, user;  // user "": the account's own (root's: "root", "")
  int id = 0, lft = 0;
  std::string parent;  // "root(1)" for an account; "" for root and users
  uint32_t shares_raw = 0;
  double shares_norm = 0, level_shares = 0, factor = 0;
  double usage_raw = 0, usage_norm = 0;
  bool is_default = false;
  int gpu_limit = -1;
  InUse use;
};

// The tree in nested-set order: root, then each account with its users.
std::vector<Assoc> Tree(const report::PriorityReport& r,
                        const std::vector<state::JobRecord>& jobs, Time now) {
  std::map<std::string, const sched::FairShareAccount*> factors;
  for (const sched::FairShareAccount& a : r.accounts) factors[a.account] = &a;
  std::map<std::string, double> user_usage;  // account NUL user
  for (const report::UserUsage& u : r.users)
    user_usage[u.account + '\0' + u.user] = u.usage;
  std::map<std::string, int> user_limits;
  for (const report::UserEntry& u : r.user_list) user_limits[u.name] = u.gpu_limit;
  double level = 0;  // the accounts' shares together: one level under root
  for (const report::AccountEntry& a : r.account_list) level += RawShares(r, a.name);

  std::vector<Assoc> tree;
  Assoc root;
  root.account = "root";
  root.id = 1;
  root.lft = 1;
  root.shares_raw = 1;
  root.shares_norm = root.level_shares = root.factor = 1;
  root.usage_raw = r.usage_total;
  root.usage_norm = r.usage_total > 0 ? 1 : 0;
  tree.push_back(root);
  int lft = 1;
  for (const report::AccountEntry& a : r.account_list) {
    Assoc acct;
    acct.account = a.name;
    acct.id = static_cast<int>(tree.size()) + 1;
    acct.lft = ++lft;
    acct.parent = "root(1)";
    acct.shares_raw = static_cast<uint32_t>(RawShares(r, a.name));
    acct.level_shares = level;
    acct.shares_norm = level > 0 ? acct.shares_raw / level : 0;
    auto f = factors.find(a.name);
    acct.factor = f != factors.end() ? f->second->factor : (level > 0 ? 0 : 1);
    if (f != factors.end()) {
      acct.usage_raw = f->second->usage;
      acct.usage_norm = f->second->norm_usage;
    }
    acct.gpu_limit = a.gpu_limit;
    tree.push_back(acct);
    for (const std::string& name : AccountUsers(r, a)) {
      Assoc u;
      u.account = a.name;
      u.user = name;
      u.id = static_cast<int>(tree.size()) + 1;
      u.lft = ++lft;
      ++lft;                      // its rgt: a leaf
      u.shares_raw = kUseParent;  // "parent": the account's factor is the user's
      u.shares_norm = acct.shares_norm;
      u.level_shares = acct.level_shares;
      u.factor = acct.factor;
      auto used = user_usage.find(a.name + '\0' + name);
      u.usage_raw = used != user_usage.end() ? used->second : 0;
      u.usage_norm = r.usage_total > 0 ? u.usage_raw / r.usage_total : 0;
      u.is_default = name == a.name;  // a submit without -A charges the user's name
      auto limit = user_limits.find(name);
      u.gpu_limit = limit != user_limits.end() ? limit->second : -1;
      tree.push_back(u);
    }
    ++lft;  // the account's rgt
  }
  for (const state::JobRecord& j : jobs) {
    if (j.state != state::JobState::kPending && j.state != state::JobState::kRunning) {
      continue;
    }
    for (Assoc& a : tree) {
      const bool mine = a.id == 1 || (a.account == j.req.account &&
                                      (a.user.empty() || a.user == j.req.user));
      if (mine) Add(j, now, &a.use);
    }
  }
  return tree;
}

std::string AssocRecord(
    const Assoc& a,
    const std::function<std::optional<uint32_t>(const std::string&)>& uid_of) {
  const std::string nl = "\n    ";
  std::string s = "ClusterName= Account=" + a.account + " UserName=";
  if (!a.user.empty())
    s += a.user + "(" + std::to_string(uid_of(a.user).value_or(kNoVal)) + ")";
  s += " Partition= Priority=0 ID=" + std::to_string(a.id) + nl;
  s += "SharesRaw/Norm/Level/Factor=" + std::to_string(a.shares_raw) + "/" +
       Fixed(a.shares_norm) + "/" +
       std::to_string(static_cast<uint64_t>(a.level_shares)) + "/" + Fixed(a.factor) + nl;
  s += "UsageRaw/Norm/Efctv=" + Fixed(a.usage_raw) + "/" + Fixed(a.usage_norm) + "/" +
       Fixed(a.usage_norm) + nl;
  s += "ParentAccount=" + a.parent + " Lft=" + std::to_string(a.lft) +
       " DefAssoc=" + (a.is_default ? "Yes" : "No") + nl;
  s += "GrpJobs=N(" + std::to_string(a.use.running) + ") GrpJobsAccrue=N(" +
       std::to_string(a.use.accruing) + ")" + nl;
  s += "GrpSubmitJobs=N(" + std::to_string(a.use.submitted) + ") GrpWall=N(0.00)" + nl;
  const TresCounts limits = GpuLimit(a.gpu_limit);
  s += TresLine("GrpTRES", limits, &a.use.tres) + nl;
  TresCounts gpu_minutes = {};
  gpu_minutes[kGpu] = static_cast<int64_t>(a.usage_raw);
  s += TresLine("GrpTRESMins", NoLimits(), &gpu_minutes, 60, kGpu) + nl;
  s += TresLine("GrpTRESRunMins", NoLimits(), &a.use.run_secs, 60) + nl;
  s += "MaxJobs= MaxJobsAccrue= MaxSubmitJobs= MaxWallPJ=" + nl;
  s += TresLine("MaxTRESPJ", NoLimits(), nullptr) + nl;
  s += TresLine("MaxTRESPN", NoLimits(), nullptr) + nl;
  s += TresLine("MaxTRESMinsPJ", NoLimits(), nullptr) + nl;
  s += "MinPrioThresh=\n";
  return s;
}

std::string QosRecord(const report::QosEntry& q, int id, const InUse& use) {
  const std::string nl = "\n    ";
  std::string s = "QOS=" + q.name + "(" + std::to_string(id) + ")" + nl;
  s += "UsageRaw=" + Fixed(q.usage, "%f") + nl;
  s += "GrpJobs=N(" + std::to_string(use.running) + ") GrpJobsAccrue=N(" +
       std::to_string(use.accruing) + ") GrpSubmitJobs=N(" +
       std::to_string(use.submitted) + ") GrpWall=N(0.00)" + nl;
  s += TresLine("GrpTRES", NoLimits(), &use.tres) + nl;
  TresCounts gpu_minutes = {};
  gpu_minutes[kGpu] = static_cast<int64_t>(q.usage);
  s += TresLine("GrpTRESMins", NoLimits(), &gpu_minutes, 60, kGpu) + nl;
  s += TresLine("GrpTRESRunMins", NoLimits(), &use.run_secs, 60) + nl;
  s += "MaxWallPJ=" + nl;
  s += TresLine("MaxTRESPJ", NoLimits(), nullptr) + nl;
  s += TresLine("MaxTRESPN", NoLimits(), nullptr) + nl;
  s += TresLine("MaxTRESMinsPJ", NoLimits(), nullptr) + nl;
  s += "MinPrioThresh= " + nl;
  s += TresLine("MinTRESPJ", NoLimits(), nullptr) + nl;
  s += "PreemptMode=OFF\n    Priority=" + std::to_string(q.priority) + nl;
  s += "Account Limits\n        No Accounts" + nl;
  s += "User Limits\n        No Users\n";
  return s;
}

// The tags of `show assoc_mgr` (scontrol matches any prefix of one).
enum class Tag : uint8_t { kAccounts, kFlags, kQos, kUsers };
constexpr std::pair<std::string_view, Tag> kTags[] = {{"accounts", Tag::kAccounts},
                                                      {"flags", Tag::kFlags},
                                                      {"qos", Tag::kQos},
                                                      {"users", Tag::kUsers}};

}  // namespace

Result<AssocMgrOptions> ParseAssocMgrArgs(const std::vector<std::string>& words) {
  AssocMgrOptions o;
  for (const std::string& w : words) {
    const size_t eq = w.find('=');
    const std::string tag = ToLower(w.substr(0, eq));
    const std::string value = eq == std::string::npos ? "" : w.substr(eq + 1);
    if (value.empty()) return InvalidArgument("No value given for option " + w);
    const auto* row =
        std::find_if(std::begin(kTags), std::end(kTags), [&](const auto& t) {
          return !tag.empty() && t.first.substr(0, tag.size()) == tag;
        });
    if (row == std::end(kTags)) {
      return InvalidArgument("invalid entity: " + w + " for keyword:show assoc_mgr");
    }
    std::vector<std::string> list;
    for (std::string_view item : Split(value, ',')) list.emplace_back(item);
    switch (row->second) {
      case Tag::kAccounts:
        o.accounts.insert(o.accounts.end(), list.begin(), list.end());
        break;
      case Tag::kQos:
        o.qos_names.insert(o.qos_names.end(), list.begin(), list.end());
        break;
      case Tag::kUsers:
        o.user_names.insert(o.user_names.end(), list.begin(), list.end());
        break;
      case Tag::kFlags: {
        const std::string v = ToLower(value);
        o.users = v.find("users") != std::string::npos;
        o.assoc = v.find("assoc") != std::string::npos;
        o.qos = v.find("qos") != std::string::npos;
        if (!o.users && !o.assoc && !o.qos) {
          return InvalidArgument("invalid flag '" + value +
                                 "', valid options are 'Assoc, QOS, and/or Users'");
        }
        break;
      }
    }
  }
  return o;
}

std::string RenderAssocMgr(
    const AssocMgrOptions& o, const report::PriorityReport& r,
    const std::vector<state::JobRecord>& jobs, Time now,
    const std::function<std::optional<uint32_t>(const std::string&)>& uid_of) {
  std::string out = "Current Association Manager state\n";
  if (o.users) {
    std::string users;
    for (const report::UserEntry& u : r.user_list) {
      if (!In(o.user_names, u.name)) continue;
      users += "UserName=" + u.name + "(" +
               std::to_string(uid_of(u.name).value_or(kNoVal)) +
               ") DefAccount=" + u.name +
               " DefWckey= AdminLevel=" + (u.admin ? "Administrator" : "None") + "\n";
    }
    out += users.empty() ? "\nNo users currently cached in Slurm.\n\n"
                         : "\nUser Records\n\n" + users;
  }
  if (o.assoc) {
    std::string assocs;
    for (const Assoc& a : Tree(r, jobs, now)) {
      // users= selects users' associations; accounts= those under the accounts named.
      if (!o.user_names.empty() && (a.user.empty() || !In(o.user_names, a.user)))
        continue;
      if (!In(o.accounts, a.account)) continue;
      assocs += AssocRecord(a, uid_of);
    }
    out += assocs.empty() ? "\nNo associations currently cached in Slurm.\n\n"
                          : "\nAssociation Records\n\n" + assocs;
  }
  if (o.qos) {
    std::string qos;
    int id = 0;
    for (const report::QosEntry& q : r.qos) {
      ++id;
      if (!In(o.qos_names, q.name)) continue;
      InUse use;
      for (const state::JobRecord& j : jobs) {
        const bool live =
            j.state == state::JobState::kPending || j.state == state::JobState::kRunning;
        if (live && j.req.qos == q.name) Add(j, now, &use);
      }
      qos += QosRecord(q, id, use);
    }
    out += qos.empty() ? "\nNo QOS currently cached in Slurm.\n\n"
                       : "\nQOS Records\n\n" + qos;
  }
  return out;
}

}  // namespace hachi::cli::slurm
