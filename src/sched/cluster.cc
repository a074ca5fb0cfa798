#include "sched/cluster.h"

namespace hachi::sched {

int ClusterState::PartitionIndex(const std::string& name) const {
  for (size_t i = 0; i < partitions.size(); ++i) {
    if (partitions[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace hachi::sched
