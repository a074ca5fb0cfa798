// [[pool]] (docs/pools.md): fixed and burst node pools, their power programs, timers,
// caps and prices. A node belongs to one pool at most.
#include <algorithm>
#include <map>

#include "config/reader.h"
#include "topo/presets.h"

namespace hachi::config {

std::string_view PoolKindName(PoolKind k) {
  return k == PoolKind::kBurst ? "burst" : "fixed";
}

namespace internal {
namespace {

// A power program: an absolute path, run by the server with the nodes' hostlist.
Result<std::string> ReadProgram(const Reader& r, const toml::node& n,
                                const std::string& path) {
  Result<std::string> s = r.String(n, path);
  if (s.ok() && (s->empty() || s->front() != '/')) {
    return r.Error(n, path, Quoted(*s) + " is not an absolute path to a program");
  }
  return s;
}

Result<Duration> ReadPositive(const Reader& r, const toml::node& n,
                              const std::string& path) {
  Result<Duration> d = r.DurationOf(n, path);
  if (d.ok() && *d <= 0) return r.Error(n, path, "must be longer than 0s");
  return d;
}

}  // namespace

Result<PoolConfig> ReadPool(const Reader& r, const toml::node& n,
                            const std::string& path) {
  const toml::table* t = nullptr;
  CONFIG_ASSIGN_OR_RETURN(t, r.Table(n, path));
  HACHI_RETURN_IF_ERROR(
      r.CheckKeys(*t, path,
                  {"name", "nodes", "kind", "resume_program", "suspend_program",
                   "resume_fail_program", "preset", "suspend_after", "resume_timeout",
                   "max_powered", "price_per_gpu_hour"}));
  PoolConfig p;
  const toml::node* name = t->get("name");
  if (name == nullptr) return r.Error(n, path, "needs a name");
  CONFIG_ASSIGN_OR_RETURN(p.name, r.Name(*name, Join(path, "name")));
  const toml::node* nodes = t->get("nodes");
  if (nodes == nullptr) return r.Error(n, path, "needs nodes (names or ranges)");
  CONFIG_ASSIGN_OR_RETURN(p.nodes, r.Nodes(*nodes, Join(path, "nodes")));
  if (p.nodes.all) {
    return r.Error(*nodes, Join(path, "nodes"),
                   "a pool names its nodes (\"all\" would put every node in it)");
  }
  if (const toml::node* k = t->get("kind")) {
    std::string kind;
    CONFIG_ASSIGN_OR_RETURN(kind, r.String(*k, Join(path, "kind")));
    if (kind != "fixed" && kind != "burst") {
      return r.Error(*k, Join(path, "kind"),
                     Quoted(kind) + " is not a pool kind (\"fixed\" or \"burst\")");
    }
    p.kind = kind == "burst" ? PoolKind::kBurst : PoolKind::kFixed;
  }
  HACHI_RETURN_IF_ERROR(Optional(
      *t, path, "resume_program",
      [&](const toml::node& v, const std::string& k) { return ReadProgram(r, v, k); },
      &p.resume_program));
  HACHI_RETURN_IF_ERROR(Optional(
      *t, path, "suspend_program",
      [&](const toml::node& v, const std::string& k) { return ReadProgram(r, v, k); },
      &p.suspend_program));
  HACHI_RETURN_IF_ERROR(Optional(
      *t, path, "resume_fail_program",
      [&](const toml::node& v, const std::string& k) { return ReadProgram(r, v, k); },
      &p.resume_fail_program));
  HACHI_RETURN_IF_ERROR(Optional(
      *t, path, "preset",
      [&](const toml::node& v, const std::string& k) -> Result<std::string> {
        Result<std::string> s = r.String(v, k);
        if (!s.ok()) return s;
        const std::vector<std::string> known = topo::PresetNames();
        if (std::find(known.begin(), known.end(), *s) == known.end()) {
          return r.Error(
              v, k, Quoted(*s) + " is not a preset (" + topo::PresetNameList() + ")");
        }
        return s;
      },
      &p.preset));
  auto positive = [&](const toml::node& v, const std::string& k) {
    return ReadPositive(r, v, k);
  };
  HACHI_RETURN_IF_ERROR(Optional(*t, path, "suspend_after", positive, &p.suspend_after));
  HACHI_RETURN_IF_ERROR(
      Optional(*t, path, "resume_timeout", positive, &p.resume_timeout));
  int64_t cap = 0;
  HACHI_RETURN_IF_ERROR(Optional(
      *t, path, "max_powered",
      [&](const toml::node& v, const std::string& k) { return r.Int(v, k, 0, 100000); },
      &cap));
  p.max_powered = static_cast<int>(cap);
  HACHI_RETURN_IF_ERROR(Optional(
      *t, path, "price_per_gpu_hour",
      [&](const toml::node& v, const std::string& k) { return r.Number(v, k, 1e6); },
      &p.price_per_gpu_hour));
  // What a kind needs and refuses: a fixed pool is never powered up or down.
  const bool burst = p.kind == PoolKind::kBurst;
  for (const char* key : {"resume_program", "suspend_program"}) {
    const toml::node* v = t->get(key);
    if (burst && v == nullptr) {
      return r.Error(n, path,
                     std::string("a burst pool needs a ") + key +
                         " (run with the nodes' names as one hostlist, as Slurm's)");
    }
    if (!burst && v != nullptr) {
      return r.Error(*v, Join(path, key), "a fixed pool's nodes are always powered");
    }
  }
  for (const char* key : {"suspend_after", "resume_timeout", "max_powered",
                          "resume_fail_program", "preset"}) {
    if (const toml::node* v = t->get(key); !burst && v != nullptr) {
      return r.Error(*v, Join(path, key), "only a burst pool is powered up and down");
    }
  }
  return p;
}

// No node in two pools.
Status CheckPools(const std::vector<PoolConfig>& pools) {
  std::map<std::string, const PoolConfig*> owner;
  for (const PoolConfig& p : pools) {
    for (const std::string& node : p.nodes.names) {
      auto [it, fresh] = owner.emplace(node, &p);
      if (!fresh) {
        return InvalidArgument(p.nodes.where + ": node " + Quoted(node) +
                               " is already in pool " + Quoted(it->second->name));
      }
    }
  }
  return Status::Ok();
}

}  // namespace internal
}  // namespace hachi::config
