#include "sched/lint.h"

#include <map>

namespace hachi::sched {
namespace {

template <typename Key>
std::string Counts(const std::map<Key, int>& m) {
  std::string out;
  for (const auto& [k, n] : m) {
    if (!out.empty()) out += ", ";
    out += std::to_string(n) + " " + std::string(k);
  }
  return out;
}

}  // namespace

std::vector<PolicyWarning> LintPartitions(const ClusterState& state) {
  std::vector<PolicyWarning> out;
  for (const Partition& p : state.partitions) {
    if (p.nodes.empty()) {
      out.push_back({p.name, "no-nodes", "partition " + p.name + " has no nodes"});
      continue;
    }
    std::map<std::string_view, int> classes;
    std::map<std::string, int> models;
    for (int n : p.nodes) {
      const Node& node = state.nodes[static_cast<size_t>(n)];
      ++classes[topo::InterconnectClassName(node.interconnect)];
      ++models[node.gpu_model.empty() ? std::string("unknown model") : node.gpu_model];
    }
    if (classes.size() > 1) {
      out.push_back({p.name, "mixed-interconnect",
                     "partition " + p.name + " mixes interconnect classes (" +
                         Counts(classes) +
                         " nodes): a multi-node job only ever gets nodes of one class"});
    }
    if (models.size() > 1) {
      out.push_back({p.name, "mixed-gpu-models",
                     "partition " + p.name + " mixes GPU models (" + Counts(models) +
                         " nodes): jobs without a GPU model may land on either"});
    }
  }
  return out;
}

}  // namespace hachi::sched
