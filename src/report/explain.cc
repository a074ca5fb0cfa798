#include "report/explain.h"

#include <nlohmann/json.hpp>

namespace hachi::report {
namespace {

using nlohmann::json;

// Reads `key` of `j` into `out` when present; false (and *error) when of another type.
// Missing keys keep their defaults, so a newer server's extra-less reply still reads.
template <typename T>
bool Opt(const json& j, const char* key, const std::string& path, T* out,
         std::string* error) {
  auto it = j.find(key);
  if (it == j.end()) return true;
  bool ok;
  if constexpr (std::is_same_v<T, std::string>) {
    ok = it->is_string();
  } else {
    ok = it->is_number_integer();
  }
  if (!ok) {
    *error = path + "." + key + ": expected " +
             (std::is_same_v<T, std::string> ? "a string" : "an integer");
    return false;
  }
  *out = it->get<T>();
  return true;
}

}  // namespace

std::string JobExplainToJson(const JobExplain& e) {
  json nodes = json::array();
  for (const ExplainNodes& n : e.nodes) {
    nodes.push_back({{"reason", n.reason},
                     {"count", n.count},
                     {"largest_free", n.largest_free},
                     {"text", n.text}});
  }
  json history = json::array();
  for (const ExplainEvent& h : e.history) {
    history.push_back({{"time", h.time}, {"event", h.event}, {"text", h.text}});
  }
  return json{{"job", e.job},
              {"state", e.state},
              {"as_of", e.as_of},
              {"reason", e.reason},
              {"diagnosis", e.diagnosis},
              {"diagnosed_at", e.diagnosed_at},
              {"partition", e.partition},
              {"queue_position", e.queue_position},
              {"queue_length", e.queue_length},
              {"partition_position", e.partition_position},
              {"partition_length", e.partition_length},
              {"needed_gpus", e.needed_gpus},
              {"needed_nodes", e.needed_nodes},
              {"gpu_share_milli", e.gpu_share_milli},
              {"largest_free", e.largest_free},
              {"largest_free_node", e.largest_free_node},
              {"free_gpus", e.free_gpus},
              {"fitting_nodes", e.fitting_nodes},
              {"nodes", nodes},
              {"earliest_start", e.earliest_start},
              {"earliest_node", e.earliest_node},
              {"blocking_job", e.blocking_job},
              {"history", history}}
      .dump();
}

Result<JobExplain> JobExplainFromJson(std::string_view text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgument("explain: not a JSON object");
  JobExplain e;
  std::string err;
  const std::string p = "explain";
  const bool ok = Opt(j, "job", p, &e.job, &err) && Opt(j, "state", p, &e.state, &err) &&
                  Opt(j, "as_of", p, &e.as_of, &err) &&
                  Opt(j, "reason", p, &e.reason, &err) &&
                  Opt(j, "diagnosis", p, &e.diagnosis, &err) &&
                  Opt(j, "diagnosed_at", p, &e.diagnosed_at, &err) &&
                  Opt(j, "partition", p, &e.partition, &err) &&
                  Opt(j, "queue_position", p, &e.queue_position, &err) &&
                  Opt(j, "queue_length", p, &e.queue_length, &err) &&
                  Opt(j, "partition_position", p, &e.partition_position, &err) &&
                  Opt(j, "partition_length", p, &e.partition_length, &err) &&
                  Opt(j, "needed_gpus", p, &e.needed_gpus, &err) &&
                  Opt(j, "needed_nodes", p, &e.needed_nodes, &err) &&
                  Opt(j, "gpu_share_milli", p, &e.gpu_share_milli, &err) &&
                  Opt(j, "largest_free", p, &e.largest_free, &err) &&
                  Opt(j, "largest_free_node", p, &e.largest_free_node, &err) &&
                  Opt(j, "free_gpus", p, &e.free_gpus, &err) &&
                  Opt(j, "fitting_nodes", p, &e.fitting_nodes, &err) &&
                  Opt(j, "earliest_start", p, &e.earliest_start, &err) &&
                  Opt(j, "earliest_node", p, &e.earliest_node, &err) &&
                  Opt(j, "blocking_job", p, &e.blocking_job, &err);
  if (!ok) return InvalidArgument(err);
  for (const char* list : {"nodes", "history"}) {
    auto it = j.find(list);
    if (it == j.end()) continue;
    if (!it->is_array()) return InvalidArgument(p + "." + list + ": expected an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& x = (*it)[i];
      const std::string at = p + "." + list + "[" + std::to_string(i) + "]";
      if (!x.is_object()) return InvalidArgument(at + ": expected an object");
      if (std::string_view(list) == "nodes") {
        ExplainNodes n;
        if (!Opt(x, "reason", at, &n.reason, &err) ||
            !Opt(x, "count", at, &n.count, &err) ||
            !Opt(x, "largest_free", at, &n.largest_free, &err) ||
            !Opt(x, "text", at, &n.text, &err)) {
          return InvalidArgument(err);
        }
        e.nodes.push_back(std::move(n));
      } else {
        ExplainEvent h;
        if (!Opt(x, "time", at, &h.time, &err) || !Opt(x, "event", at, &h.event, &err) ||
            !Opt(x, "text", at, &h.text, &err)) {
          return InvalidArgument(err);
        }
        e.history.push_back(std::move(h));
      }
    }
  }
  return e;
}

}  // namespace hachi::report
