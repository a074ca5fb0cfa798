#include "cli/slurm/sacctmgr_format.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <span>

#include "cli/slurm/slurm_text.h"
#include "core/strings.h"

namespace hachi::cli::slurm {
namespace {

// Each entity's fields (sacctmgr's _get_print_field headers and widths) and default list.
constexpr FieldDef kAccountFields[] = {
    {"Account", 10},
    {"Descr", 20, "Description"},
    {"Org", 20, "Organization"},
    {"Cluster", 10},
    {"ParentName", 10},
    {"User", 10},
    {"Share", 9},
    {"GrpTRES", 13},
    {"QOS", 20},
};
constexpr FieldDef kUserFields[] = {
    {"User", 10},
    {"Def Acct", 10, "DefaultAccount"},
    {"Admin", 9, "AdminLevel"},
    {"Cluster", 10},
    {"Account", 10},
    {"Partition", 10},
    {"Share", 9},
    {"GrpTRES", 13},
    {"QOS", 20},
};
constexpr FieldDef kAssocFields[] = {
    {"Cluster", 10},
    {"Account", 10},
    {"User", 10},
    {"Partition", 10},
    {"Share", 9},
    {"Priority", 10},
    {"GrpJobs", 7},
    {"GrpTRES", 13},
    {"GrpSubmit", 9},
    {"GrpWall", 11},
    {"GrpTRESMins", 13},
    {"MaxJobs", 7},
    {"MaxTRES", 13},
    {"MaxTRESPerNode", 14},
    {"MaxSubmit", 9},
    {"MaxWall", 11},
    {"MaxTRESMins", 13},
    {"QOS", 20},
    {"Def QOS", 9, "DefaultQOS"},
    {"GrpTRESRunMins", 13},
    {"ParentName", 10},
};
constexpr std::string_view kAssocDefault =
    "Cluster,Account,User,Partition,Share,Priority,GrpJobs,GrpTRES,GrpSubmit,GrpWall,"
    "GrpTRESMins,MaxJobs,MaxTRES,MaxTRESPerNode,MaxSubmit,MaxWall,MaxTRESMins,QOS,"
    "DefaultQOS,GrpTRESRunMins";
constexpr FieldDef kQosFields[] = {
    {"Name", 10},
    {"Priority", 10},
    {"GraceTime", 10},
    {"Preempt", 10},
    {"PreemptExemptTime", 19},
    {"PreemptMode", 11},
    {"Flags", 10},
    {"UsageThres", 10},
    {"UsageFactor", 11},
    {"GrpTRES", 13},
    {"GrpTRESMins", 13},
    {"GrpTRESRunMins", 13},
    {"GrpJobs", 7},
    {"GrpSubmit", 9},
    {"GrpWall", 11},
    {"MaxTRES", 13},
    {"MaxTRESPerNode", 14},
    {"MaxTRESMins", 13},
    {"MaxWall", 11},
    {"MaxTRESPU", 13, "MaxTRESPerUser"},
    {"MaxJobsPU", 9, "MaxJobsPerUser"},
    {"MaxSubmitPU", 11, "MaxSubmitJobsPerUser"},
    {"MaxTRESPA", 13, "MaxTRESPerAccount"},
    {"MaxJobsPA", 9, "MaxJobsPerAccount"},
    {"MaxSubmitPA", 11, "MaxSubmitJobsPerAccount"},
    {"MinTRES", 13},
};
constexpr std::string_view kQosDefault =
    "Name,Priority,GraceTime,Preempt,PreemptExemptTime,PreemptMode,Flags%40,UsageThres,"
    "UsageFactor,GrpTRES,GrpTRESMins,GrpTRESRunMins,GrpJobs,GrpSubmit,GrpWall,MaxTRES,"
    "MaxTRESPerNode,MaxTRESMins,MaxWall,MaxTRESPerUser,MaxJobsPerUser,"
    "MaxSubmitJobsPerUser,MaxTRESPerAccount,MaxJobsPerAccount,MaxSubmitJobsPerAccount,"
    "MinTRES";

struct EntityRow {
  std::string_view word;  // a prefix of it names the entity (at least 2 letters)
  SacctmgrEntity entity;
  std::span<const FieldDef> fields;
  std::string_view default_format;
};
const EntityRow kEntities[] = {
    {"accounts", SacctmgrEntity::kAccount, kAccountFields, "Account,Descr,Org"},
    {"users", SacctmgrEntity::kUser, kUserFields, "User,DefaultAccount,AdminLevel"},
    {"associations", SacctmgrEntity::kAssociation, kAssocFields, kAssocDefault},
    {"qos", SacctmgrEntity::kQos, kQosFields, kQosDefault},
};

const EntityRow& RowOf(SacctmgrEntity e) {
  for (const EntityRow& r : kEntities) {
    if (r.entity == e) return r;
  }
  return kEntities[2];
}

const std::vector<OptDef>& SacctmgrOpts() {
  static const auto* opts = new std::vector<OptDef>{
      {'h', "help", false},     {'i', "immediate", false}, {'o', "oneliner", false},
      {'n', "noheader", false}, {'p', "parsable", false},  {'P', "parsable2", false},
      {'Q', "quiet", false},    {'r', "readonly", false},  {'s', "associations", false},
      {'v', "verbose", false},  {0, "usage", false},       {0, "server", true}};
  return *opts;
}

// One row as values by field key (lowercase); a field not set is blank.
using Row = std::map<std::string, FieldValue>;

FieldValue GpuTres(int limit) {
  return limit >= 0 ? FieldValue::Str("gres/gpu=" + std::to_string(limit))
                    : FieldValue::Unset();
}

}  // namespace

double RawShares(const report::PriorityReport& r, const std::string& account) {
  bool any_share = false;
  for (const sched::FairShareAccount& a : r.accounts) {
    if (a.account == account && a.shares > 0) return a.shares;
    any_share = any_share || a.shares > 0;
  }
  return any_share ? 0 : 1;
}

std::vector<std::string> AccountUsers(const report::PriorityReport& r,
                                      const report::AccountEntry& a) {
  std::vector<std::string> users = a.members;
  for (const report::UserUsage& u : r.users) {
    if (u.account == a.name) users.push_back(u.user);
  }
  std::sort(users.begin(), users.end());
  users.erase(std::unique(users.begin(), users.end()), users.end());
  return users;
}

namespace {

std::vector<Row> Rows(const SacctmgrOptions& o, const report::PriorityReport& r) {
  auto in = [](const std::vector<std::string>& list, const std::string& v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  std::map<std::string, const report::UserEntry*> users;
  for (const report::UserEntry& u : r.user_list) users[u.name] = &u;
  std::string qos_names;
  std::vector<std::string> names;
  for (const report::QosEntry& q : r.qos) names.push_back(q.name);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) qos_names += (qos_names.empty() ? "" : ",") + n;
  auto share_of = [&](const std::string& account) {
    const double s = RawShares(r, account);
    if (s == static_cast<double>(static_cast<long long>(s))) {
      return FieldValue::Num(static_cast<long long>(s));
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", s);
    return FieldValue::Str(buf);
  };
  std::vector<Row> rows;
  switch (o.entity) {
    case SacctmgrEntity::kAccount: {
      if (in(o.names, "root") && in(o.accounts, "root")) {
        rows.push_back({{"account", FieldValue::Str("root")},
                        {"description", FieldValue::Str("default root account")},
                        {"organization", FieldValue::Str("root")}});
      }
      for (const report::AccountEntry& a : r.account_list) {
        if (!in(o.names, a.name) || !in(o.accounts, a.name)) continue;
        rows.push_back({{"account", FieldValue::Str(a.name)},
                        {"description", FieldValue::Str(a.name)},
                        {"organization", FieldValue::Str(a.name)},
                        {"parentname", FieldValue::Str("root")},
                        {"share", share_of(a.name)},
                        {"grptres", GpuTres(a.gpu_limit)},
                        {"qos", FieldValue::Str(qos_names)}});
      }
      break;
    }
    case SacctmgrEntity::kUser:
      for (const report::UserEntry& u : r.user_list) {
        if (!in(o.names, u.name) || !in(o.users, u.name)) continue;
        // A submit without -A charges the user's own name (docs/auth.md).
        rows.push_back(
            {{"user", FieldValue::Str(u.name)},
             {"defaultaccount", FieldValue::Str(u.name)},
             {"adminlevel", FieldValue::Str(u.admin ? "Administrator" : "None")},
             {"grptres", GpuTres(u.gpu_limit)}});
      }
      break;
    case SacctmgrEntity::kAssociation: {
      if (in(o.accounts, "root") && o.users.empty()) {
        rows.push_back({{"account", FieldValue::Str("root")},
                        {"share", FieldValue::Num(1)},
                        {"qos", FieldValue::Str(qos_names)}});
      }
      for (const report::AccountEntry& a : r.account_list) {
        if (!in(o.accounts, a.name)) continue;
        if (o.users.empty()) {
          rows.push_back({{"account", FieldValue::Str(a.name)},
                          {"share", share_of(a.name)},
                          {"grptres", GpuTres(a.gpu_limit)},
                          {"qos", FieldValue::Str(qos_names)},
                          {"parentname", FieldValue::Str("root")}});
        }
        for (const std::string& m : AccountUsers(r, a)) {
          if (!in(o.users, m)) continue;
          auto u = users.find(m);
          rows.push_back(
              {{"account", FieldValue::Str(a.name)},
               {"user", FieldValue::Str(m)},
               {"share", FieldValue::Str("parent")},
               {"grptres", GpuTres(u != users.end() ? u->second->gpu_limit : -1)},
               {"qos", FieldValue::Str(qos_names)}});
        }
      }
      break;
    }
    case SacctmgrEntity::kQos:
      for (const report::QosEntry& q : r.qos) {
        if (!in(o.names, q.name)) continue;
        rows.push_back({{"name", FieldValue::Str(q.name)},
                        {"priority", FieldValue::Num(q.priority)},
                        {"gracetime", FieldValue::Str("00:00:00")},
                        {"preemptmode", FieldValue::Str("cluster")},
                        {"usagefactor", FieldValue::Dbl(1.0)}});
      }
      break;
  }
  return rows;
}

}  // namespace

Result<SacctmgrOptions> ParseSacctmgrArgs(const std::vector<std::string>& args) {
  // Options come before the command; the command's words are positional.
  Result<ParsedArgs> p = ParseArgs(args, SacctmgrOpts(), /*stop_at_positional=*/true);
  if (!p.ok()) return p.status();
  const std::vector<std::string>& words = p->positional;
  SacctmgrOptions o;
  o.help = p->Has("help") || p->Has("usage");
  o.server = p->Get("server");
  o.out = FieldOutputOf(*p);
  if (o.help) return o;
  if (words.empty()) return InvalidArgument("no command given (sacctmgr --help)");
  const std::string cmd = ToLower(words[0]);
  constexpr std::string_view kChanges[] = {"add",    "create", "modify", "update",
                                           "delete", "remove", "load",   "archive"};
  if (std::find(std::begin(kChanges), std::end(kChanges), cmd) != std::end(kChanges)) {
    return Unsatisfiable(
        "Hachi's accounts, users, shares, GPU limits and QoS are its cluster config's "
        "([[account]], [fairshare], [limits], [[qos]], [auth] admins): edit the file and "
        "restart the server. Nothing changed.");
  }
  if (cmd != "show" && cmd != "list" && cmd != "sh") {
    return InvalidArgument("Invalid command: " + Clip(words[0]) +
                           " (sacctmgr show account|user|association|qos)");
  }
  if (words.size() < 2) {
    return InvalidArgument("No entity given: sacctmgr show account|user|association|qos");
  }
  const std::string what = ToLower(words[1]);
  const EntityRow* entity = nullptr;
  for (const EntityRow& e : kEntities) {
    if (what.size() >= 2 &&
        e.word.substr(0, std::min(what.size(), e.word.size())) == what) {
      entity = &e;
      break;
    }
  }
  if (what == "assoc") entity = &kEntities[2];
  if (entity == nullptr) {
    return InvalidArgument("Unknown entity: " + Clip(words[1]) +
                           " (Hachi shows account, user, association, qos)");
  }
  o.entity = entity->entity;
  for (size_t i = 2; i < words.size(); ++i) {
    const std::string& w = words[i];
    const std::string lw = ToLower(w);
    if (lw == "where" || lw == "withassoc" || lw == "withcoord" || lw == "tree") continue;
    const size_t eq = w.find('=');
    // A bare word is a name, as name= ("sacctmgr show user alice").
    const bool bare = eq == std::string::npos;
    const std::string key = bare ? "name" : ToLower(w.substr(0, eq));
    const std::string value = bare ? w : w.substr(eq + 1);
    std::vector<std::string> values;
    for (std::string_view v : Split(value, ',')) {
      if (!v.empty()) values.emplace_back(v);
    }
    auto add = [&](std::vector<std::string>* to) {
      to->insert(to->end(), values.begin(), values.end());
    };
    if (key == "format") {
      o.format = value;
    } else if (key == "name" || key == "names") {
      add(o.entity == SacctmgrEntity::kUser      ? &o.users
          : o.entity == SacctmgrEntity::kAccount ? &o.accounts
                                                 : &o.names);
    } else if (key == "account" || key == "accounts" || key == "acct" ||
               key == "defaultaccount") {
      add(&o.accounts);
    } else if (key == "user" || key == "users") {
      add(&o.users);
    } else if (key == "cluster" || key == "clusters") {
      continue;  // one cluster
    } else {
      return InvalidArgument("Unknown condition: " + Clip(w) +
                             "\n Use keyword 'set' to modify value");
    }
  }
  if (!o.format.empty()) {
    Result<std::vector<FieldColumn>> cols =
        ParseFieldList(o.format, entity->fields, FieldMatch::kPrefix);
    if (!cols.ok()) return cols.status();
  }
  return o;
}

Result<std::string> RenderSacctmgr(const SacctmgrOptions& o,
                                   const report::PriorityReport& r) {
  const EntityRow& e = RowOf(o.entity);
  Result<std::vector<FieldColumn>> cols =
      ParseFieldList(o.format.empty() ? e.default_format : std::string_view(o.format),
                     e.fields, FieldMatch::kPrefix);
  if (!cols.ok()) return cols.status();
  std::vector<std::vector<FieldValue>> values;
  for (const Row& row : Rows(o, r)) {
    std::vector<FieldValue> v;
    for (const FieldColumn& c : *cols) {
      auto it = row.find(ToLower(e.fields[c.def].Key()));
      v.push_back(it != row.end() ? it->second : FieldValue::Unset());
    }
    values.push_back(std::move(v));
  }
  return PrintFields(*cols, e.fields, values, o.out);
}

}  // namespace hachi::cli::slurm
