#include "sched/gpu_share.h"

#include <algorithm>

namespace hachi::sched {

GpuShareUse ShareUse(const Node& node, int gpu) {
  if (gpu < 0 || gpu >= static_cast<int>(node.share_use.size())) return {};
  return node.share_use[gpu];
}

bool ShareFits(const Node& node, int gpu, int milli, int64_t memory_mib) {
  const GpuShareUse u = ShareUse(node, gpu);
  return u.milli + milli <= kFullGpuMilli &&
         (memory_mib == 0 || u.memory_mib + memory_mib <= node.gpu_memory_mib);
}

Status ApplyShare(Node& node, const Allocation& a) {
  if (a.gpus.size() != 1 || a.share_milli <= 0 || a.share_milli >= kFullGpuMilli) {
    return Internal("a GPU share needs one GPU and 1..999 milli (got {" +
                    a.gpus.ToString() + "}, " + std::to_string(a.share_milli) + ")");
  }
  const int gpu = a.gpus.First();
  if (!a.gpus.IsSubsetOf(node.free_gpus | node.shared_gpus)) {
    return Internal("GPU " + std::to_string(gpu) + " of node " + node.name +
                    " is neither free nor shared");
  }
  if (!ShareFits(node, gpu, a.share_milli, a.gpu_memory_mib)) {
    const GpuShareUse u = ShareUse(node, gpu);
    return Internal("share of " + std::to_string(a.share_milli) + " milli, " +
                    std::to_string(a.gpu_memory_mib) + " MiB overcommits GPU " +
                    std::to_string(gpu) + " of node " + node.name + " (holds " +
                    std::to_string(u.milli) + " milli, " + std::to_string(u.memory_mib) +
                    " MiB)");
  }
  if (static_cast<int>(node.share_use.size()) <= gpu) {
    node.share_use.resize(std::max(node.gpu_count(), gpu + 1));
  }
  node.free_gpus = node.free_gpus - a.gpus;
  node.shared_gpus = node.shared_gpus | a.gpus;
  node.share_use[gpu].milli += a.share_milli;
  node.share_use[gpu].memory_mib += a.gpu_memory_mib;
  return Status::Ok();
}

void ReleaseShare(Node& node, const Allocation& a) {
  if (a.gpus.size() != 1 || a.share_milli <= 0) return;
  const int gpu = a.gpus.First();
  if (gpu >= static_cast<int>(node.share_use.size())) return;
  GpuShareUse& u = node.share_use[gpu];
  u.milli -= a.share_milli;
  u.memory_mib -= a.gpu_memory_mib;
  if (u.milli <= 0) {  // the last share left: the GPU is whole again
    u = {};
    node.shared_gpus = node.shared_gpus - a.gpus;
    node.free_gpus = node.free_gpus | a.gpus;
  }
}

}  // namespace hachi::sched
