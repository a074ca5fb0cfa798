#include "agent/nccl_env.h"

#include <algorithm>

namespace hachi::agent {
namespace {

// "NIC3": a column name of `nvidia-smi topo -m` whose legend was cut off, not a device
// NCCL could be told to use.
bool Unnamed(const std::string& device) {
  return device.size() > 3 && device.compare(0, 3, "NIC") == 0 &&
         std::all_of(device.begin() + 3, device.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::vector<std::vector<std::string>> NearestNics(const topo::Topology& node) {
  std::vector<std::vector<std::string>> out(node.gpu_count());
  for (int g = 0; g < node.gpu_count(); ++g) {
    // The best relation any NIC has to this GPU (PciePath orders far to near).
    topo::PciePath best = topo::PciePath::kSys;
    for (const topo::Nic& nic : node.nics()) {
      if (g < static_cast<int>(nic.gpu_paths.size()))
        best = std::max(best, nic.gpu_paths[g]);
    }
    if (best <= topo::PciePath::kSys) continue;  // none on this GPU's side of the machine
    for (const topo::Nic& nic : node.nics()) {
      const std::string& device = nic.device.empty() ? nic.name : nic.device;
      if (g < static_cast<int>(nic.gpu_paths.size()) && nic.gpu_paths[g] == best &&
          !Unnamed(device)) {
        out[g].push_back(device);
      }
    }
  }
  return out;
}

void AddNcclEnvironment(const std::vector<std::vector<std::string>>& nearest_nics,
                        const GpuSet& gpus, EnvList* env) {
  if (std::any_of(env->begin(), env->end(),
                  [](const auto& kv) { return kv.first == "NCCL_IB_HCA"; })) {
    return;  // the job's own choice
  }
  std::vector<std::string> hcas;
  for (int g = 0; g < static_cast<int>(nearest_nics.size()); ++g) {
    if (!gpus.contains(g)) continue;
    for (const std::string& nic : nearest_nics[g]) {
      if (std::find(hcas.begin(), hcas.end(), nic) == hcas.end()) hcas.push_back(nic);
    }
  }
  if (hcas.empty()) return;
  std::string value = "=";  // exact names: "mlx5_1" alone would also match mlx5_10
  for (size_t i = 0; i < hcas.size(); ++i) value += (i ? "," : "") + hcas[i];
  env->emplace_back("NCCL_IB_HCA", std::move(value));
}

}  // namespace hachi::agent
