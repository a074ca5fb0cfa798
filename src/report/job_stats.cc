#include "report/job_stats.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <type_traits>
#include <utility>

namespace hachi::report {
namespace {

// GPUs a job holds: from its allocations when it has run, else from its request.
// A share counts as its fraction of one GPU.
double JobGpus(const state::JobRecord& j) {
  if (!j.allocations.empty()) {
    double g = 0;
    for (const state::NodeAllocation& a : j.allocations) {
      g += a.share_milli > 0 ? a.share_milli / 1000.0 : a.gpus.size();
    }
    return g;
  }
  return j.req.Shared() ? j.req.gpu_share_milli / 1000.0 : j.req.TotalGpus();
}

struct Acc {
  WaitStats s;
  std::vector<Duration> waits;
  void Finish() {
    s.samples = static_cast<int>(waits.size());
    s.wait_p50 = Percentile(waits, 50);
    s.wait_p95 = Percentile(std::move(waits), 95);
  }
};

}  // namespace

Duration Percentile(std::vector<Duration> values, int p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  // Nearest rank: the smallest value with at least p% of the values at or below it.
  size_t rank = (static_cast<size_t>(p) * values.size() + 99) / 100;
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

JobStats ComputeStats(const std::vector<state::JobRecord>& jobs, Time now,
                      Duration window, Duration alert_threshold, int total_gpus) {
  const Time from = now - window;
  std::map<std::string, Acc> parts;
  std::map<std::pair<std::string, int>, Acc> rows;
  JobStats out;
  out.now = now;
  out.window = window;
  out.alert_threshold = alert_threshold;
  out.total_gpus = total_gpus;

  for (const state::JobRecord& j : jobs) {
    const bool pending = j.state == state::JobState::kPending;
    const bool started_in_window =
        j.start_time > 0 && j.start_time > from && j.start_time <= now && !pending;
    double used = 0;
    if (j.start_time > 0 && !pending) {
      Time end = j.state == state::JobState::kRunning ? now : std::min(j.end_time, now);
      Time begin = std::max(j.start_time, from);
      if (end > begin) used = static_cast<double>(end - begin) * JobGpus(j);
    }
    if (!pending && !started_in_window && used <= 0) continue;

    const int gpus = j.req.Shared() ? 0 : j.req.TotalGpus();
    for (Acc* acc : {&parts[j.req.partition], &rows[{j.req.partition, gpus}]}) {
      acc->s.gpu_seconds += used;
      if (pending && j.held) {
        ++acc->s.held;
      } else if (pending) {
        ++acc->s.pending;
        acc->waits.push_back(std::max<Duration>(0, now - j.submit_time));
      } else if (started_in_window) {
        ++acc->s.started;
        acc->waits.push_back(std::max<Duration>(0, j.start_time - j.submit_time));
      }
    }
    out.gpu_seconds += used;
  }

  for (auto& [name, acc] : parts) {
    PartitionStats p;
    acc.s.partition = name;
    acc.s.gpus = -1;
    acc.Finish();
    p.all = acc.s;
    p.alert = p.all.samples > 0 && p.all.wait_p50 > alert_threshold;
    for (auto& [key, row] : rows) {
      if (key.first != name) continue;
      row.s.partition = name;
      row.s.gpus = key.second;
      row.Finish();
      p.by_gpus.push_back(row.s);
    }
    out.partitions.push_back(std::move(p));
  }
  if (total_gpus > 0 && window > 0) {
    out.utilisation = out.gpu_seconds / (static_cast<double>(total_gpus) * window);
  }
  return out;
}

namespace {

nlohmann::json WaitJson(const WaitStats& w) {
  return {{"partition", w.partition},
          {"gpus", w.gpus},
          {"started", w.started},
          {"pending", w.pending},
          {"held", w.held},
          {"samples", w.samples},
          {"wait_p50_s", w.wait_p50},
          {"wait_p95_s", w.wait_p95},
          {"gpu_seconds", w.gpu_seconds}};
}

nlohmann::json LoadJson(const PartitionLoad& l) {
  return {{"partition", l.partition},
          {"nodes", l.nodes},
          {"nodes_up", l.nodes_up},
          {"gpus", l.gpus},
          {"allocated_gpus", l.allocated_gpus},
          {"free_gpus", l.free_gpus},
          {"largest_free", l.largest_free},
          {"largest_free_node", l.largest_free_node},
          {"pending_jobs", l.pending_jobs},
          {"pending_gpus", l.pending_gpus},
          {"pending_gpu_hours", l.pending_gpu_hours},
          {"quota_jobs", l.quota_jobs},
          {"fragmented_jobs", l.fragmented_jobs},
          {"needed_gpus", l.needed_gpus},
          {"top_user", l.top_user},
          {"top_user_jobs", l.top_user_jobs},
          {"top_user_gpus", l.top_user_gpus},
          {"reasons", l.reasons}};
}

// Reads `key` of object `j` into `out`; false (and *error) when missing or of another
// type.
template <typename T>
bool Get(const nlohmann::json& j, const char* key, const std::string& path, T* out,
         std::string* error) {
  auto it = j.find(key);
  const bool ok = it != j.end() && (std::is_same_v<T, std::string> ? it->is_string()
                                    : std::is_same_v<T, bool>      ? it->is_boolean()
                                                                   : it->is_number());
  if (!ok) {
    *error = path + "." + key + ": missing or not a " +
             (std::is_same_v<T, std::string> ? "string"
              : std::is_same_v<T, bool>      ? "boolean"
                                             : "number");
    return false;
  }
  *out = it->get<T>();
  return true;
}

bool ReadWait(const nlohmann::json& j, const std::string& path, WaitStats* w,
              std::string* error) {
  if (!j.is_object()) {
    *error = path + ": not an object";
    return false;
  }
  return Get(j, "partition", path, &w->partition, error) &&
         Get(j, "gpus", path, &w->gpus, error) &&
         Get(j, "started", path, &w->started, error) &&
         Get(j, "pending", path, &w->pending, error) &&
         Get(j, "held", path, &w->held, error) &&
         Get(j, "samples", path, &w->samples, error) &&
         Get(j, "wait_p50_s", path, &w->wait_p50, error) &&
         Get(j, "wait_p95_s", path, &w->wait_p95, error) &&
         Get(j, "gpu_seconds", path, &w->gpu_seconds, error);
}

bool ReadLoad(const nlohmann::json& j, const std::string& path, PartitionLoad* l,
              std::string* error) {
  if (!j.is_object()) {
    *error = path + ": not an object";
    return false;
  }
  if (!(Get(j, "partition", path, &l->partition, error) &&
        Get(j, "nodes", path, &l->nodes, error) &&
        Get(j, "nodes_up", path, &l->nodes_up, error) &&
        Get(j, "gpus", path, &l->gpus, error) &&
        Get(j, "allocated_gpus", path, &l->allocated_gpus, error) &&
        Get(j, "free_gpus", path, &l->free_gpus, error) &&
        Get(j, "largest_free", path, &l->largest_free, error) &&
        Get(j, "largest_free_node", path, &l->largest_free_node, error) &&
        Get(j, "pending_jobs", path, &l->pending_jobs, error) &&
        Get(j, "pending_gpus", path, &l->pending_gpus, error) &&
        Get(j, "pending_gpu_hours", path, &l->pending_gpu_hours, error) &&
        Get(j, "quota_jobs", path, &l->quota_jobs, error) &&
        Get(j, "fragmented_jobs", path, &l->fragmented_jobs, error) &&
        Get(j, "needed_gpus", path, &l->needed_gpus, error) &&
        Get(j, "top_user", path, &l->top_user, error) &&
        Get(j, "top_user_jobs", path, &l->top_user_jobs, error) &&
        Get(j, "top_user_gpus", path, &l->top_user_gpus, error))) {
    return false;
  }
  auto r = j.find("reasons");
  if (r == j.end() || !r->is_object()) {
    *error = path + ".reasons: missing or not an object";
    return false;
  }
  for (auto it = r->begin(); it != r->end(); ++it) {
    if (!it->is_number_integer()) {
      *error = path + ".reasons." + it.key() + ": not an integer";
      return false;
    }
    l->reasons[it.key()] = it->get<int>();
  }
  return true;
}

bool ReadCauses(const nlohmann::json& j, const std::string& path,
                std::vector<AlertCause>* out, std::string* error) {
  if (!j.is_array()) {
    *error = path + ": not an array";
    return false;
  }
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = path + "[" + std::to_string(i) + "]";
    AlertCause c;
    if (!j[i].is_object()) {
      *error = at + ": not an object";
      return false;
    }
    if (!Get(j[i], "kind", at, &c.kind, error) ||
        !Get(j[i], "text", at, &c.text, error)) {
      return false;
    }
    out->push_back(std::move(c));
  }
  return true;
}

}  // namespace

void AttachLoads(JobStats* stats, const std::vector<PartitionLoad>& loads) {
  for (PartitionStats& p : stats->partitions) {
    for (const PartitionLoad& l : loads) {
      if (l.partition != p.all.partition) continue;
      p.has_load = true;
      p.load = l;
      p.causes = p.alert ? ClassifyAlert(l) : std::vector<AlertCause>{};
      break;
    }
  }
}

Result<JobStats> JobStatsFromJson(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgument("stats: not a JSON object");
  JobStats s;
  std::string error;
  const std::string root = "stats";
  if (!Get(j, "now", root, &s.now, &error) ||
      !Get(j, "window_s", root, &s.window, &error) ||
      !Get(j, "alert_threshold_s", root, &s.alert_threshold, &error) ||
      !Get(j, "gpu_seconds", root, &s.gpu_seconds, &error) ||
      !Get(j, "total_gpus", root, &s.total_gpus, &error) ||
      !Get(j, "utilisation", root, &s.utilisation, &error)) {
    return InvalidArgument(error);
  }
  auto parts = j.find("partitions");
  if (parts == j.end() || !parts->is_array()) {
    return InvalidArgument("stats.partitions: missing or not an array");
  }
  for (size_t i = 0; i < parts->size(); ++i) {
    const nlohmann::json& p = (*parts)[i];
    const std::string path = "stats.partitions[" + std::to_string(i) + "]";
    PartitionStats ps;
    if (!p.is_object() || !p.contains("all") ||
        !ReadWait(p["all"], path + ".all", &ps.all, &error) ||
        !Get(p, "alert", path, &ps.alert, &error)) {
      return InvalidArgument(error.empty() ? path + ": not an object" : error);
    }
    auto by = p.find("by_gpus");
    if (by == p.end() || !by->is_array()) {
      return InvalidArgument(path + ".by_gpus: missing or not an array");
    }
    if (auto l = p.find("load"); l != p.end()) {
      if (!ReadLoad(*l, path + ".load", &ps.load, &error)) return InvalidArgument(error);
      ps.has_load = true;
    }
    if (auto c = p.find("causes"); c != p.end()) {
      if (!ReadCauses(*c, path + ".causes", &ps.causes, &error))
        return InvalidArgument(error);
    }
    for (size_t k = 0; k < by->size(); ++k) {
      WaitStats w;
      if (!ReadWait((*by)[k], path + ".by_gpus[" + std::to_string(k) + "]", &w, &error)) {
        return InvalidArgument(error);
      }
      ps.by_gpus.push_back(std::move(w));
    }
    s.partitions.push_back(std::move(ps));
  }
  return s;
}

std::string JobStatsToJson(const JobStats& s) {
  nlohmann::json parts = nlohmann::json::array();
  for (const PartitionStats& p : s.partitions) {
    nlohmann::json by = nlohmann::json::array();
    for (const WaitStats& w : p.by_gpus) by.push_back(WaitJson(w));
    nlohmann::json part{{"all", WaitJson(p.all)}, {"by_gpus", by}, {"alert", p.alert}};
    if (p.has_load) {
      nlohmann::json causes = nlohmann::json::array();
      for (const AlertCause& c : p.causes)
        causes.push_back({{"kind", c.kind}, {"text", c.text}});
      part["load"] = LoadJson(p.load);
      part["causes"] = std::move(causes);
    }
    parts.push_back(std::move(part));
  }
  return nlohmann::json{{"now", s.now},
                        {"window_s", s.window},
                        {"alert_threshold_s", s.alert_threshold},
                        {"partitions", parts},
                        {"gpu_seconds", s.gpu_seconds},
                        {"total_gpus", s.total_gpus},
                        {"utilisation", s.utilisation}}
      .dump(2);
}

}  // namespace hachi::report
