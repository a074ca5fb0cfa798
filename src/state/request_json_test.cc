#include "state/request_json.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hachi::state {
namespace {

// The shared list is exactly the fields both codecs write always; the later ones
// (written always by the API, only when set by a row) are not in it.
TEST(RequestCommonJsonTest, TheSharedFieldsOnly) {
  sched::JobRequest req;
  req.gpus = 2;
  req.partition = "gpu8";
  req.user = "ada";
  req.dependencies = {{sched::DependencyKind::kAfterNotOk, 7},
                      {sched::DependencyKind::kSingleton, 0}};
  req.nodelist = "gpu[01-02]";
  req.nice = 5;
  req.mig_profile = "1g.10gb";
  const nlohmann::json j = RequestCommonJson(req);
  std::vector<std::string> keys;
  for (const auto& [key, value] : j.items()) keys.push_back(key);
  EXPECT_EQ(keys,
            (std::vector<std::string>{
                "account", "cpus", "cpus_per_gpu", "dependencies", "exclusive",
                "gpu_memory_mib", "gpu_model", "gpu_share_milli", "gpus", "gpus_per_node",
                "memory_mib", "memory_mib_per_gpu", "min_gpu_memory_mib", "nodes",
                "partition", "qos", "time_limit", "user"}));
  EXPECT_EQ(j["gpus"], 2);
  EXPECT_EQ(j["partition"], "gpu8");
  EXPECT_EQ(j["dependencies"].dump(),
            R"([{"job":7,"kind":"afternotok"},{"job":0,"kind":"singleton"}])");
}

}  // namespace
}  // namespace hachi::state
