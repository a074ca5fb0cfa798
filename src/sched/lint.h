// Checks of a cluster's policy that are not errors but deserve a warning: a partition
// whose nodes mix interconnect classes (DESIGN.md §4.3: a job never spans classes, so
// such a partition behaves as several smaller ones for gangs) or GPU models (a job
// without --gpu-model may land on either). Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "sched/cluster.h"

namespace hachi::sched {

struct PolicyWarning {
  std::string partition;
  std::string code;     // "mixed-interconnect", "mixed-gpu-models", "no-nodes"
  std::string message;  // names the classes/models and how many nodes of each
};

std::vector<PolicyWarning> LintPartitions(const ClusterState& state);

}  // namespace hachi::sched
