#include "cli/placement_cmd.h"

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "sim/placement/bench.h"

namespace hachi::cli {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitBadInput = 2;

int Fail(const Status& s) {
  std::fprintf(stderr, "hachi sim: %s\n", s.ToString().c_str());
  return kExitBadInput;
}

}  // namespace

int RunPlacement(const PlacementFlags& f) {
  const auto t0 = std::chrono::steady_clock::now();
  if (f.trace != "openb") {
    return Fail(InvalidArgument("--placement: '" + f.trace + "' is not openb"));
  }
  Result<placement::Policy> policy = placement::ParsePolicy(f.policy);
  if (!policy.ok()) return Fail(policy.status());
  if (f.pods.empty() || f.pods.find_first_of("/.") != std::string::npos) {
    return Fail(InvalidArgument("--pods: '" + f.pods + "' is not a pod list name"));
  }
  const std::string dir = placement::OpenbDir();
  Result<placement::Cluster> cluster =
      placement::LoadNodes(dir + "/openb_node_list_gpu_node.csv");
  if (!cluster.ok()) return Fail(cluster.status());
  Result<std::vector<placement::OpenbPod>> pods =
      placement::LoadPods(dir + "/openb_pod_list_" + f.pods + ".csv", *cluster);
  if (!pods.ok()) return Fail(pods.status());

  Result<placement::BenchResult> run =
      placement::RunBench(*cluster, std::move(*pods), f.seed, *policy);
  if (!run.ok()) return Fail(run.status());
  const placement::BenchResult& r = *run;
  const std::vector<double> alloc =
      placement::DiscreteCurve(r.arrived, r.capacity_milli, placement::AllocValues(r));
  std::vector<double> frag_pct(r.frag_ratio.size());
  for (size_t i = 0; i < frag_pct.size(); ++i) frag_pct[i] = r.frag_ratio[i] * 100.0;
  const std::vector<double> frag =
      placement::DiscreteCurve(r.arrived, r.capacity_milli, frag_pct);
  const double gpus = static_cast<double>(r.capacity_milli) / 1000.0;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (f.json) {
    nlohmann::ordered_json j;
    j["placement"] = f.trace;
    j["pods"] = f.pods;
    j["seed"] = f.seed;
    j["policy"] = placement::PolicyName(*policy);
    j["nodes"] = cluster->nodes.size();
    j["cluster_gpus"] = gpus;
    j["events"] = r.event_pods.size();
    j["failed"] = r.failed;
    // Columns of the published curve (bin means, notes/fgd-protocol.md §5), as ratios.
    j["alloc_ratio_at_100"] = alloc[100] / 100.0;
    j["alloc_ratio_at_130"] = alloc[130] / 100.0;
    j["unallocated_gpus_at_130"] = gpus * (1.0 - alloc[130] / 100.0);
    j["frag_ratio_at_80"] = frag[80] / 100.0;
    j["wall_s"] = wall;
    if (f.curve) {
      j["curve"] = {{"x_pct", nlohmann::json::array()},
                    {"alloc_pct", alloc},
                    {"frag_ratio_pct", frag}};
      for (int x = 0; x <= 130; ++x) j["curve"]["x_pct"].push_back(x);
    }
    std::printf("%s\n", j.dump().c_str());
    return kExitOk;
  }
  std::printf(
      "placement openb, pods %s, seed %lld, policy %s: %zu events on %zu nodes "
      "(%.0f GPUs), %d failed\n",
      f.pods.c_str(), static_cast<long long>(f.seed), placement::PolicyName(*policy),
      r.event_pods.size(), cluster->nodes.size(), gpus, r.failed);
  std::printf(
      "alloc %% at 100 %% arrived: %.2f   at 130 %%: %.2f   unallocated GPUs at 130 %%: "
      "%.1f   frag ratio %% at 80 %%: %.2f   wall %.2f s\n",
      alloc[100], alloc[130], gpus * (1.0 - alloc[130] / 100.0), frag[80], wall);
  if (f.curve) {
    std::printf("x_pct alloc_pct frag_ratio_pct\n");
    for (int x = 0; x <= 130; ++x) std::printf("%d %.2f %.2f\n", x, alloc[x], frag[x]);
  }
  return kExitOk;
}

}  // namespace hachi::cli
