#include "state/request_json.h"

#include <utility>

#include "sched/dependencies.h"
#include "state/json_values.h"

namespace hachi::state {

nlohmann::json RequestCommonJson(const sched::JobRequest& req) {
  nlohmann::json deps = nlohmann::json::array();
  for (const sched::Dependency& d : req.dependencies) {
    deps.push_back({{"kind", sched::DependencyKindName(d.kind)}, {"job", d.job}});
  }
  return {
      {"gpus", req.gpus},
      {"nodes", req.nodes},
      {"gpus_per_node", req.gpus_per_node},
      {"cpus_per_gpu", req.cpus_per_gpu},
      {"cpus", req.cpus},
      {"memory_mib_per_gpu", req.memory_mib_per_gpu},
      {"memory_mib", req.memory_mib},
      // Text fields, but written as bytes when they are not UTF-8 so that a reader
      // refuses them by name instead of the writer replacing them.
      {"gpu_model", JsonBytes(req.gpu_model)},
      {"min_gpu_memory_mib", req.min_gpu_memory_mib},
      {"partition", JsonBytes(req.partition)},
      {"qos", JsonBytes(req.qos)},
      {"user", JsonBytes(req.user)},
      {"account", JsonBytes(req.account)},
      {"time_limit", req.time_limit},
      {"exclusive", req.exclusive},
      {"dependencies", std::move(deps)},
      {"gpu_share_milli", req.gpu_share_milli},
      {"gpu_memory_mib", req.gpu_memory_mib},
  };
}

}  // namespace hachi::state
