#include "server/master_ports.h"

namespace hachi::server {

int MasterPortOf(const state::JobRecord& job, const PortRange& range) {
  return job.master_port != 0 ? job.master_port
                              : range.base + static_cast<int>(job.id % 1000);
}

std::string PortKey(const state::StateImage& image, const std::string& node) {
  auto n = image.nodes.find(node);
  return n == image.nodes.end() || n->second.address.empty() ? "node " + node
                                                             : n->second.address;
}

PortsInUse MasterPortsInUse(const state::StateImage& image,
                            const std::set<state::JobId>& active,
                            const PortRange& range) {
  PortsInUse used;
  for (state::JobId id : active) {
    auto it = image.jobs.find(id);
    if (it == image.jobs.end() || it->second.state != state::JobState::kRunning ||
        it->second.allocations.empty()) {
      continue;
    }
    used[PortKey(image, it->second.allocations[0].node)].insert(
        MasterPortOf(it->second, range));
  }
  return used;
}

int LowestFreePort(const std::set<int>& used, const PortRange& range) {
  for (int p = range.base; p < range.base + range.count; ++p) {
    if (!used.count(p)) return p;
  }
  return 0;
}

}  // namespace hachi::server
