#include "server/burn_in.h"

#include "core/sha256.h"
#include "topo/topology_file.h"

namespace hachi::server {

Result<std::string> BurnInFingerprint(const std::string& gpu_driver,
                                      const std::string& topology_json,
                                      const std::string& node) {
  Result<topo::Topology> t = topo::ParseTopologyJson(topology_json, node);
  if (!t.ok()) return t.status();
  // One line per fact, in a fixed order: what the hardware is, not how we spell it.
  std::string canon = "driver " + gpu_driver + "\n";
  for (const topo::Gpu& g : t->gpus()) {
    canon += "gpu " + std::to_string(g.index) + " " + g.uuid + " " + g.model + " " +
             std::to_string(g.memory_mib) + " " + g.pci_bus_id + "\n";
  }
  for (int a = 0; a < t->gpu_count(); ++a) {
    for (int b = 0; b < t->gpu_count(); ++b) {
      if (a != b) canon += t->link(a, b).Label() + (b + 1 == t->gpu_count() ? "\n" : " ");
    }
  }
  return Sha256Hex(canon).substr(0, 16);
}

std::string BurnInCheckNames(const std::vector<std::string>& checks) {
  std::string out;
  for (const std::string& c : checks) {
    if (!out.empty()) out += ", ";
    out += c.substr(0, c.find(' '));
  }
  return out;
}

std::string BurnInRunningReason(const std::vector<std::string>& checks, GpuSet gpus) {
  std::string out = "burn-in: running " + BurnInCheckNames(checks);
  if (!gpus.empty()) {
    out += std::string(gpus.size() > 1 ? " (GPUs " : " (GPU ") + gpus.ToString() + ")";
  }
  return out;
}

std::string BurnInFailedReason(const std::string& check, const std::string& why) {
  return "burn-in failed: " + check.substr(0, check.find(' ')) + ": " + why;
}

}  // namespace hachi::server
