// The [[partition]] tables of the cluster config (docs/config.md, "Partitions").
#include <set>

#include "config/reader.h"

namespace hachi::config::internal {

// "mon", "mon-fri" (wrapping: "sat-mon"); adds 0 = Sunday .. 6 = Saturday.
Status ReadDays(const Reader& r, const toml::node& n, std::string_view path,
                std::vector<int>* days) {
  std::vector<std::string> items;
  CONFIG_ASSIGN_OR_RETURN(items, r.Strings(n, path));
  if (items.empty()) return r.Error(n, path, "no days (leave days out for every day)");
  std::set<int> set;
  for (const std::string& item : items) {
    const size_t dash = item.find('-');
    Result<int> a = ParseWeekday(item.substr(0, dash));
    Result<int> b = dash == std::string::npos ? a : ParseWeekday(item.substr(dash + 1));
    if (!a.ok()) return r.Error(n, path, a.status().message());
    if (!b.ok()) return r.Error(n, path, b.status().message());
    for (int d = *a;; d = (d + 1) % 7) {
      set.insert(d);
      if (d == *b) break;
    }
  }
  days->assign(set.begin(), set.end());
  return Status::Ok();
}

// One window table: start, end, days, nodes.
Status ReadWindow(const Reader& r, const toml::node& n, const std::string& path,
                  PartitionConfig* p) {
  const toml::table* t = nullptr;
  CONFIG_ASSIGN_OR_RETURN(t, r.Table(n, path));
  HACHI_RETURN_IF_ERROR(r.CheckKeys(*t, path, {"start", "end", "days", "nodes"}));
  sched::TimeWindow w;
  for (const char* key : {"start", "end"}) {
    const toml::node* v = t->get(key);
    if (v == nullptr) return r.Error(n, path, std::string("needs '") + key + "' (HH:MM)");
    const bool is_end = key[0] == 'e';
    CONFIG_ASSIGN_OR_RETURN(is_end ? w.end_minute : w.start_minute,
                            r.TimeOfDay(*v, Join(path, key), is_end));
  }
  if (const toml::node* d = t->get("days")) {
    HACHI_RETURN_IF_ERROR(ReadDays(r, *d, Join(path, "days"), &w.days));
  }
  if (const toml::node* nodes = t->get("nodes")) {
    NodeSelector sel;
    CONFIG_ASSIGN_OR_RETURN(sel, r.Nodes(*nodes, Join(path, "nodes")));
    if (p->has_window_nodes &&
        (sel.all != p->window_nodes.all || sel.names != p->window_nodes.names)) {
      return r.Error(
          *nodes, Join(path, "nodes"),
          "every window of a partition covers the same nodes (first given at " +
              p->window_nodes.where + ")");
    }
    p->window_nodes = std::move(sel);
    p->has_window_nodes = true;
  }
  p->partition.windows.push_back(std::move(w));
  return Status::Ok();
}

namespace {

// mode and preempt_mode: words.
Status ReadPartitionModes(const Reader& r, const toml::table& table,
                          const std::string& path, sched::Partition* partition) {
  const toml::table* t = &table;
  sched::Partition& p = *partition;
  if (const toml::node* mode = t->get("mode")) {
    std::string m;
    CONFIG_ASSIGN_OR_RETURN(m, r.String(*mode, Join(path, "mode")));
    if (m == "shared") {
      p.mode = sched::PartitionMode::kShared;
    } else if (m == "whole-node") {
      p.mode = sched::PartitionMode::kWholeNode;
    } else {
      return r.Error(*mode, Join(path, "mode"),
                     Quoted(m) + " is not a mode (shared or whole-node)");
    }
  }
  if (const toml::node* mode = t->get("preempt_mode")) {
    std::string m;
    CONFIG_ASSIGN_OR_RETURN(m, r.String(*mode, Join(path, "preempt_mode")));
    if (m == "requeue") {
      p.preempt_mode = sched::PreemptMode::kRequeue;
    } else if (m == "cancel") {
      p.preempt_mode = sched::PreemptMode::kCancel;
    } else {
      return r.Error(*mode, Join(path, "preempt_mode"),
                     Quoted(m) + " is not a preempt mode (requeue or cancel)");
    }
  }
  return Status::Ok();
}

// GPU bounds, tier, times, who may use it and what it allows.
Status ReadPartitionFields(const Reader& r, const toml::table& table,
                           const std::string& path, sched::Partition* partition) {
  const toml::table* t = &table;
  sched::Partition& p = *partition;
  auto gpus = [&](const toml::node& v, const std::string& k) {
    return r.Int(v, k, 1, 100000);
  };
  auto tier = [&](const toml::node& v, const std::string& k) {
    return r.Int(v, k, 0, 1000);
  };
  auto duration = [&](const toml::node& v, const std::string& k) {
    return r.DurationOf(v, k);
  };
  auto strings = [&](const toml::node& v, const std::string& k) {
    return r.Strings(v, k);
  };
  auto boolean = [&](const toml::node& v, const std::string& k) { return r.Bool(v, k); };
  int64_t min_gpus = p.min_gpus, max_gpus = p.max_gpus, tier_value = p.tier;
  // min_gpus = 0: the partition takes jobs without GPUs too.
  auto min_gpus_of = [&](const toml::node& v, const std::string& k) {
    return r.Int(v, k, 0, 100000);
  };
  HACHI_RETURN_IF_ERROR(Optional(*t, path, "min_gpus", min_gpus_of, &min_gpus));
  HACHI_RETURN_IF_ERROR(Optional(*t, path, "max_gpus", gpus, &max_gpus));
  HACHI_RETURN_IF_ERROR(Optional(*t, path, "tier", tier, &tier_value));
  p.min_gpus = static_cast<int>(min_gpus);
  p.max_gpus = static_cast<int>(max_gpus);
  p.tier = static_cast<int>(tier_value);
  HACHI_RETURN_IF_ERROR(Optional(*t, path, "default_time", duration, &p.default_time));
  HACHI_RETURN_IF_ERROR(Optional(*t, path, "max_time", duration, &p.max_time));
  HACHI_RETURN_IF_ERROR(Optional(*t, path, "grace", duration, &p.grace));
  HACHI_RETURN_IF_ERROR(Optional(*t, path, "allowed_users", strings, &p.allowed_users));
  HACHI_RETURN_IF_ERROR(
      Optional(*t, path, "allowed_accounts", strings, &p.allowed_accounts));
  HACHI_RETURN_IF_ERROR(
      Optional(*t, path, "preempt_lower_tiers", boolean, &p.preempt_lower_tiers));
  HACHI_RETURN_IF_ERROR(
      Optional(*t, path, "allow_gpu_sharing", boolean, &p.allow_gpu_sharing));
  HACHI_RETURN_IF_ERROR(Optional(*t, path, "allow_cpu_jobs", boolean, &p.allow_cpu_jobs));
  auto size = [&](const toml::node& v, const std::string& k) { return r.SizeMib(v, k); };
  HACHI_RETURN_IF_ERROR(
      Optional(*t, path, "default_mem_per_gpu", size, &p.default_mem_per_gpu_mib));
  auto count = [&](const toml::node& v, const std::string& k) -> Result<int> {
    Result<int64_t> c = r.Int(v, k, 1, 4096);
    if (!c.ok()) return c.status();
    return static_cast<int>(*c);
  };
  HACHI_RETURN_IF_ERROR(
      Optional(*t, path, "default_cpus_per_gpu", count, &p.default_cpus_per_gpu));

  return Status::Ok();
}

// The idle-GPU policy: idle_gpu_after, and below and action, which need it.
Status ReadIdlePolicy(const Reader& r, const toml::table& table, const std::string& path,
                      IdleGpuPolicy* idle) {
  const toml::table* t = &table;
  auto duration = [&](const toml::node& v, const std::string& k) {
    return r.DurationOf(v, k);
  };
  HACHI_RETURN_IF_ERROR(Optional(*t, path, "idle_gpu_after", duration, &idle->after));
  int64_t below = idle->below_pct;
  auto pct = [&](const toml::node& v, const std::string& k) {
    return r.Int(v, k, 1, 100);
  };
  HACHI_RETURN_IF_ERROR(Optional(*t, path, "idle_gpu_below", pct, &below));
  idle->below_pct = static_cast<int>(below);
  if (const toml::node* action = t->get("idle_gpu_action")) {
    std::string a;
    CONFIG_ASSIGN_OR_RETURN(a, r.String(*action, Join(path, "idle_gpu_action")));
    if (a == "warn") {
      idle->action = IdleAction::kWarn;
    } else if (a == "requeue") {
      idle->action = IdleAction::kRequeue;
    } else if (a == "cancel") {
      idle->action = IdleAction::kCancel;
    } else {
      return r.Error(*action, Join(path, "idle_gpu_action"),
                     Quoted(a) + " is not an idle GPU action (warn, requeue or cancel)");
    }
  }
  for (const char* key : {"idle_gpu_below", "idle_gpu_action"}) {
    if (t->get(key) != nullptr && idle->after == 0) {
      return r.Error(*t->get(key), Join(path, key),
                     "needs idle_gpu_after (how long every GPU must stay idle)");
    }
  }
  if (t->get("idle_gpu_after") != nullptr && idle->after == 0) {
    return r.Error(*t->get("idle_gpu_after"), Join(path, "idle_gpu_after"),
                   "must be longer than 0s");
  }
  return Status::Ok();
}

// What the fields say together: min_gpus <= max_gpus, times longer than 0s and
// default_time <= max_time.
Status CheckPartitionBounds(const Reader& r, const toml::table& table,
                            const std::string& path, const sched::Partition& p) {
  const toml::table* t = &table;
  if (p.max_gpus > 0 && p.min_gpus > p.max_gpus) {
    return r.Error(*t->get("min_gpus"), Join(path, "min_gpus"),
                   std::to_string(p.min_gpus) + " is more than max_gpus " +
                       std::to_string(p.max_gpus));
  }
  for (const char* key : {"default_time", "max_time"}) {
    const Duration d = key[0] == 'd' ? p.default_time : p.max_time;
    if (d == 0 && t->get(key) != nullptr) {
      return r.Error(*t->get(key), Join(path, key), "must be longer than 0s");
    }
  }
  if (p.default_time > p.max_time) {
    const toml::node* at =
        t->get("default_time") ? t->get("default_time") : t->get("max_time");
    return r.Error(*at, Join(path, "default_time"),
                   FormatDuration(p.default_time) + " is longer than max_time " +
                       FormatDuration(p.max_time));
  }
  return Status::Ok();
}

}  // namespace

Result<PartitionConfig> ReadPartition(const Reader& r, const toml::node& n,
                                      const std::string& path) {
  const toml::table* t = nullptr;
  CONFIG_ASSIGN_OR_RETURN(t, r.Table(n, path));
  HACHI_RETURN_IF_ERROR(r.CheckKeys(*t, path,
                                    {"name",
                                     "nodes",
                                     "mode",
                                     "min_gpus",
                                     "max_gpus",
                                     "default_time",
                                     "max_time",
                                     "tier",
                                     "allowed_users",
                                     "allowed_accounts",
                                     "preempt_lower_tiers",
                                     "preempt_mode",
                                     "grace",
                                     "window",
                                     "allow_gpu_sharing",
                                     "default_mem_per_gpu",
                                     "default_cpus_per_gpu",
                                     "allow_cpu_jobs",
                                     "idle_gpu_after",
                                     "idle_gpu_below",
                                     "idle_gpu_action"}));
  PartitionConfig pc;
  pc.where = r.Where(n.source(), path);
  sched::Partition& p = pc.partition;
  const toml::node* name = t->get("name");
  if (name == nullptr) return r.Error(n, path, "needs a name");
  CONFIG_ASSIGN_OR_RETURN(p.name, r.Name(*name, Join(path, "name")));
  const toml::node* nodes = t->get("nodes");
  if (nodes == nullptr) return r.Error(n, path, "needs nodes (names, ranges or \"all\")");
  CONFIG_ASSIGN_OR_RETURN(pc.nodes, r.Nodes(*nodes, Join(path, "nodes")));

  HACHI_RETURN_IF_ERROR(ReadPartitionModes(r, *t, path, &p));
  HACHI_RETURN_IF_ERROR(ReadPartitionFields(r, *t, path, &p));
  HACHI_RETURN_IF_ERROR(ReadIdlePolicy(r, *t, path, &pc.idle));
  HACHI_RETURN_IF_ERROR(CheckPartitionBounds(r, *t, path, p));
  if (const toml::node* w = t->get("window")) {
    const std::string wpath = Join(path, "window");
    if (const toml::array* list = w->as_array()) {
      if (list->empty()) return r.Error(*w, wpath, "no windows (leave window out)");
      for (size_t i = 0; i < list->size(); ++i) {
        HACHI_RETURN_IF_ERROR(
            ReadWindow(r, (*list)[i], wpath + "[" + std::to_string(i) + "]", &pc));
      }
    } else {
      HACHI_RETURN_IF_ERROR(ReadWindow(r, *w, wpath, &pc));
    }
  }
  return pc;
}

}  // namespace hachi::config::internal
