// ParseClusterConfig: the TOML walk. Every value is read through Reader, which checks
// its type and names the file, line and key path in any error; every table's keys are
// checked against the known ones, so a typo is an error, not a silent default.
#include "config/cluster_config.h"

#include <map>

#include "config/reader.h"
#include "sched/features.h"

namespace hachi::config {

std::string_view IdleActionName(IdleAction a) {
  switch (a) {
    case IdleAction::kWarn:
      return "warn";
    case IdleAction::kRequeue:
      return "requeue";
    case IdleAction::kCancel:
      return "cancel";
  }
  return "warn";
}
namespace {

using internal::Join;
using internal::Optional;
using internal::Quoted;
using internal::Reader;
using internal::ReadPartition;
using internal::TypeName;

// [[qos]] name + priority.
Result<sched::Qos> ReadQos(const Reader& r, const toml::node& n,
                           const std::string& path) {
  const toml::table* t = nullptr;
  CONFIG_ASSIGN_OR_RETURN(t, r.Table(n, path));
  HACHI_RETURN_IF_ERROR(r.CheckKeys(*t, path, {"name", "priority"}));
  sched::Qos q;
  const toml::node* name = t->get("name");
  if (name == nullptr) return r.Error(n, path, "needs a name");
  CONFIG_ASSIGN_OR_RETURN(q.name, r.Name(*name, Join(path, "name")));
  int64_t priority = 0;
  HACHI_RETURN_IF_ERROR(Optional(
      *t, path, "priority",
      [&](const toml::node& v, const std::string& k) { return r.Int(v, k, 0, 1000); },
      &priority));
  q.priority = static_cast<int>(priority);
  return q;
}

// An array of tables ([[name]]), each read by `read`; names unique.
template <typename T, typename F, typename NameOf>
Status ReadArray(const Reader& r, const toml::node& n, const std::string& path, F read,
                 NameOf name_of, std::vector<T>* out) {
  const toml::array* a = n.as_array();
  if (a == nullptr) {
    return r.Error(n, path, "expected [[" + path + "]] tables, got " + TypeName(n));
  }
  std::map<std::string, std::string> seen;  // name -> "partition[0] (line 3)"
  for (size_t i = 0; i < a->size(); ++i) {
    const std::string item = path + "[" + std::to_string(i) + "]";
    T v;
    CONFIG_ASSIGN_OR_RETURN(v, read(r, (*a)[i], item));
    const std::string& name = name_of(v);
    const std::string here =
        item + " (line " + std::to_string((*a)[i].source().begin.line) + ")";
    if (auto [it, fresh] = seen.emplace(name, here); !fresh) {
      const toml::node* name_node = (*a)[i].as_table()->get("name");
      return r.Error(*name_node, item + ".name",
                     Quoted(name) + " is already the name of " + it->second);
    }
    out->push_back(std::move(v));
  }
  return Status::Ok();
}

// The [burn_in] table: the checks a node passes before it takes jobs.
Status ReadBurnInSection(const Reader& r, const toml::node& n, ClusterConfig* c) {
  HACHI_RETURN_IF_ERROR(internal::ReadBurnIn(r, n, &c->burn_in));
  return Status::Ok();
}

// [auth]: who may read without a token.
Status ReadAuthSection(const Reader& r, const toml::node& n, ClusterConfig* c) {
  HACHI_RETURN_IF_ERROR(internal::ReadAuth(r, n, &c->auth));
  return Status::Ok();
}

// [[account]]: accounts, each name once.
Status ReadAccounts(const Reader& r, const toml::node& n, ClusterConfig* c) {
  HACHI_RETURN_IF_ERROR(ReadArray(
      r, n, "account", internal::ReadAccount,
      [](const AccountConfig& a) -> const std::string& { return a.name; }, &c->accounts));
  return Status::Ok();
}

// [[partition]]: partitions, each name once.
Status ReadPartitions(const Reader& r, const toml::node& n, ClusterConfig* c) {
  HACHI_RETURN_IF_ERROR(ReadArray(
      r, n, "partition", ReadPartition,
      [](const PartitionConfig& p) -> const std::string& { return p.partition.name; },
      &c->partitions));
  return Status::Ok();
}

// [[qos]]: qualities of service, each name once.
Status ReadQosList(const Reader& r, const toml::node& n, ClusterConfig* c) {
  HACHI_RETURN_IF_ERROR(ReadArray(
      r, n, "qos", ReadQos,
      [](const sched::Qos& q) -> const std::string& { return q.name; }, &c->qos));
  return Status::Ok();
}

// [[pool]]: node pools, each name once, no node in two.
Status ReadPools(const Reader& r, const toml::node& n, ClusterConfig* c) {
  HACHI_RETURN_IF_ERROR(ReadArray(
      r, n, "pool", internal::ReadPool,
      [](const PoolConfig& p) -> const std::string& { return p.name; }, &c->pools));
  return internal::CheckPools(c->pools);
}

// [limits]: GPUs per user and per account.
Status ReadLimits(const Reader& r, const toml::node& n, ClusterConfig* c) {
  auto gpu_count = [&](const toml::node& v, const std::string& k) {
    return r.Int(v, k, 0, 10000000);
  };
  const toml::table* t = nullptr;
  CONFIG_ASSIGN_OR_RETURN(t, r.Table(n, "limits"));
  HACHI_RETURN_IF_ERROR(r.CheckKeys(*t, "limits", {"user_gpus", "account_gpus"}));
  std::unordered_map<std::string, int64_t> users, accounts;
  if (const toml::node* u = t->get("user_gpus")) {
    HACHI_RETURN_IF_ERROR(r.NameMap(*u, "limits.user_gpus", gpu_count, &users));
  }
  if (const toml::node* a = t->get("account_gpus")) {
    HACHI_RETURN_IF_ERROR(r.NameMap(*a, "limits.account_gpus", gpu_count, &accounts));
  }
  for (auto& [k, v] : users) c->limits.user_gpus[k] = static_cast<int>(v);
  for (auto& [k, v] : accounts) c->limits.account_gpus[k] = static_cast<int>(v);
  return Status::Ok();
}

// [fairshare]: each account's shares, and the half-life of usage.
Status ReadFairshare(const Reader& r, const toml::node& n, ClusterConfig* c) {
  const toml::table* t = nullptr;
  CONFIG_ASSIGN_OR_RETURN(t, r.Table(n, "fairshare"));
  HACHI_RETURN_IF_ERROR(r.CheckKeys(*t, "fairshare", {"shares", "half_life"}));
  HACHI_RETURN_IF_ERROR(Optional(
      *t, "fairshare", "half_life",
      [&](const toml::node& v, const std::string& k) -> Result<Duration> {
        Result<Duration> d = r.DurationOf(v, k);
        if (d.ok() && *d <= 0) return r.Error(v, k, "must be longer than 0s");
        return d;
      },
      &c->fairshare_half_life));
  if (const toml::node* s = t->get("shares")) {
    auto share = [&](const toml::node& v, const std::string& k) -> Result<double> {
      Result<double> d = r.Number(v, k, 1e9);
      if (d.ok() && *d <= 0) return r.Error(v, k, "a share must be more than 0");
      return d;
    };
    HACHI_RETURN_IF_ERROR(r.NameMap(*s, "fairshare.shares", share, &c->shares));
  }
  return Status::Ok();
}

// [priority]: the weights of the priority's factors.
Status ReadPriority(const Reader& r, const toml::node& n, ClusterConfig* c) {
  const toml::table* t = nullptr;
  CONFIG_ASSIGN_OR_RETURN(t, r.Table(n, "priority"));
  HACHI_RETURN_IF_ERROR(r.CheckKeys(
      *t, "priority", {"age", "age_max", "fairshare", "tier", "qos", "size"}));
  auto weight = [&](const toml::node& v, const std::string& k) {
    return r.Number(v, k, 1e12);
  };
  sched::PriorityWeights& w = c->weights;
  HACHI_RETURN_IF_ERROR(Optional(*t, "priority", "age", weight, &w.age));
  HACHI_RETURN_IF_ERROR(Optional(*t, "priority", "fairshare", weight, &w.fairshare));
  HACHI_RETURN_IF_ERROR(Optional(*t, "priority", "tier", weight, &w.tier));
  HACHI_RETURN_IF_ERROR(Optional(*t, "priority", "qos", weight, &w.qos));
  HACHI_RETURN_IF_ERROR(Optional(*t, "priority", "size", weight, &w.size));
  HACHI_RETURN_IF_ERROR(Optional(
      *t, "priority", "age_max",
      [&](const toml::node& v, const std::string& k) -> Result<Duration> {
        Result<Duration> d = r.DurationOf(v, k);
        if (d.ok() && *d <= 0) return r.Error(v, k, "must be longer than 0s");
        return d;
      },
      &w.age_max));
  return Status::Ok();
}

// [node."HOSTLIST"]: what a config says of some nodes beyond what their agents tell.
Status ReadNodeOverrides(const Reader& r, const toml::node& n, ClusterConfig* c) {
  const toml::table* t = nullptr;
  CONFIG_ASSIGN_OR_RETURN(t, r.Table(n, "node"));
  for (auto&& [key, value] : *t) {
    const std::string path = Join("node", key.str());
    const toml::table* o = nullptr;
    CONFIG_ASSIGN_OR_RETURN(o, r.Table(value, path));
    HACHI_RETURN_IF_ERROR(
        r.CheckKeys(*o, path, {"block", "features", "gres_type", "burn_in"}));
    NodeOverride ov;
    Result<std::vector<std::string>> names = ExpandHostList(key.str());
    if (!names.ok()) {
      return InvalidArgument(r.Where(key.source(), path) + ": " +
                             names.status().message());
    }
    ov.nodes.names = std::move(*names);
    ov.nodes.where = r.Where(key.source(), path);
    if (const toml::node* b = o->get("block")) {
      CONFIG_ASSIGN_OR_RETURN(ov.block, r.Name(*b, Join(path, "block")));
    }
    // Node features and the gres.conf GPU type name.
    if (const toml::node* f = o->get("features")) {
      CONFIG_ASSIGN_OR_RETURN(ov.features, r.Strings(*f, Join(path, "features")));
      for (const std::string& name : ov.features) {
        Result<sched::Constraint> one = sched::Constraint::Parse(name);
        if (name.empty() || !one.ok() || one->Names().size() != 1 ||
            one->Names()[0] != name) {
          return r.Error(
              *f, Join(path, "features"),
              "'" + name + "' is not a feature name (letters, digits, _ - . : / +)");
        }
      }
    }
    if (const toml::node* g = o->get("gres_type")) {
      CONFIG_ASSIGN_OR_RETURN(ov.gres_type, r.Name(*g, Join(path, "gres_type")));
    }
    if (const toml::node* b = o->get("burn_in")) {
      CONFIG_ASSIGN_OR_RETURN(ov.burn_in,
                              internal::ReadBurnInChecks(r, *b, Join(path, "burn_in")));
    }
    c->node_overrides.push_back(std::move(ov));
  }
  return Status::Ok();
}

// [server]: defaults for `hachi server`'s flags.
Status ReadServer(const Reader& r, const toml::node& n, ClusterConfig* c) {
  const toml::table* t = nullptr;
  CONFIG_ASSIGN_OR_RETURN(t, r.Table(n, "server"));
  HACHI_RETURN_IF_ERROR(r.CheckKeys(
      *t, "server", {"listen", "socket", "state_dir", "policy", "agent_timeout"}));
  auto string = [&](const toml::node& v, const std::string& k) { return r.String(v, k); };
  ServerConfig& s = c->server;
  HACHI_RETURN_IF_ERROR(Optional(
      *t, "server", "listen",
      [&](const toml::node& v, const std::string& k) -> Result<std::string> {
        Result<std::string> l = r.String(v, k);
        if (l.ok() && l->rfind(':') == std::string::npos) {
          return r.Error(v, k, Quoted(*l) + " is not HOST:PORT (e.g. 127.0.0.1:8686)");
        }
        return l;
      },
      &s.listen));
  HACHI_RETURN_IF_ERROR(Optional(*t, "server", "socket", string, &s.socket));
  HACHI_RETURN_IF_ERROR(Optional(*t, "server", "state_dir", string, &s.state_dir));
  HACHI_RETURN_IF_ERROR(Optional(
      *t, "server", "policy",
      [&](const toml::node& v, const std::string& k) -> Result<std::string> {
        Result<std::string> pol = r.String(v, k);
        if (pol.ok() && *pol != "hachi" && *pol != "easy" && *pol != "fifo") {
          return r.Error(v, k, Quoted(*pol) + " is not a policy (hachi, easy, fifo)");
        }
        return pol;
      },
      &s.policy));
  HACHI_RETURN_IF_ERROR(Optional(
      *t, "server", "agent_timeout",
      [&](const toml::node& v, const std::string& k) -> Result<Duration> {
        Result<Duration> d = r.DurationOf(v, k);
        if (d.ok() && *d <= 0) return r.Error(v, k, "must be longer than 0s");
        return d;
      },
      &s.agent_timeout));
  return Status::Ok();
}

// [sim]: what `hachi sim` needs beyond the cluster (after [[partition]], which it checks
// against).
Status ReadSim(const Reader& r, const toml::node& n, ClusterConfig* c) {
  const toml::table* t = nullptr;
  CONFIG_ASSIGN_OR_RETURN(t, r.Table(n, "sim"));
  HACHI_RETURN_IF_ERROR(r.CheckKeys(*t, "sim", {"account_partitions"}));
  if (const toml::node* ap = t->get("account_partitions")) {
    auto partition = [&](const toml::node& v,
                         const std::string& k) -> Result<std::string> {
      Result<std::string> s = r.String(v, k);
      if (s.ok() && !c->partitions.empty() &&
          std::none_of(
              c->partitions.begin(), c->partitions.end(),
              [&](const PartitionConfig& p) { return p.partition.name == *s; })) {
        return r.Error(v, k, "no partition " + Quoted(*s) + " in this file");
      }
      return s;
    };
    HACHI_RETURN_IF_ERROR(
        r.NameMap(*ap, "sim.account_partitions", partition, &c->sim.account_partitions));
  }
  return Status::Ok();
}

// The top-level tables in the order they are read: [sim] after [[partition]].
using SectionReader = Status (*)(const Reader&, const toml::node&, ClusterConfig*);
constexpr std::pair<const char*, SectionReader> kSections[] = {
    {"burn_in", ReadBurnInSection},
    {"auth", ReadAuthSection},
    {"account", ReadAccounts},
    {"partition", ReadPartitions},
    {"qos", ReadQosList},
    {"limits", ReadLimits},
    {"fairshare", ReadFairshare},
    {"priority", ReadPriority},
    {"node", ReadNodeOverrides},
    {"server", ReadServer},
    {"sim", ReadSim},
    {"pool", ReadPools},
};

Status ReadTop(const Reader& r, const toml::table& root, ClusterConfig* c) {
  HACHI_RETURN_IF_ERROR(
      r.CheckKeys(root, "",
                  {"partition", "qos", "limits", "fairshare", "priority", "node", "sim",
                   "server", "auth", "account", "burn_in", "pool"}));
  for (const auto& [name, read] : kSections) {
    if (const toml::node* n = root.get(name)) HACHI_RETURN_IF_ERROR(read(r, *n, c));
  }
  return Status::Ok();
}

}  // namespace

Result<ClusterConfig> ParseClusterConfig(std::string_view text, std::string_view origin) {
  const Reader reader(origin);
  ClusterConfig config;
  config.origin = std::string(origin);
  // Text that would reach undefined behaviour in toml++ 3.3 never gets there (values.h).
  if (Status st = CheckTomlText(text); !st.ok()) {
    return InvalidArgument(std::string(origin) + ":" + st.message());
  }
  // toml++ reports syntax errors by exception: caught here, at the edge (STYLE.md).
  try {
    const toml::table root = toml::parse(text, origin);
    HACHI_RETURN_IF_ERROR(ReadTop(reader, root, &config));
  } catch (const toml::parse_error& e) {
    return InvalidArgument(std::string(origin) + ":" +
                           std::to_string(e.source().begin.line) + ": " +
                           std::string(e.description()));
  }
  return config;
}

Result<ClusterConfig> LoadClusterConfig(const std::string& path) {
  std::string error;
  std::optional<std::string> text = ReadFile(path, &error);
  if (!text) return NotFound("config: " + error);
  return ParseClusterConfig(*text, path);
}

}  // namespace hachi::config
