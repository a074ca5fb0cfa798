#include "sched/gpu_share.h"

#include <algorithm>
#include <cstdio>

namespace hachi::sched {

std::string ShareText(int milli) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%d.%03d", milli / 1000, milli % 1000);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();  // 1000 -> "1"
  return s;
}

const GpuShareUse& NoShareUse() {
  // docs/benchmarks.md, "Process start".
  static const GpuShareUse* no_share = new GpuShareUse;
  return *no_share;
}

const GpuShareUse& ShareUse(const Node& node, int gpu) {
  if (gpu < 0 || gpu >= static_cast<int>(node.share_use.size())) return NoShareUse();
  return node.share_use[gpu];
}

ShareRoom RoomFor(const GpuShareUse& u, int64_t gpu_memory_mib, int milli,
                  int64_t memory_mib, const std::string& user) {
  if (u.milli + milli > kFullGpuMilli ||
      (memory_mib > 0 && u.memory_mib + memory_mib > gpu_memory_mib)) {
    return ShareRoom::kFull;
  }
  // An empty GPU takes anyone; a shared one only its owner (one MPS server, one uid).
  if (u.milli > 0 && (u.mixed || u.user != user)) return ShareRoom::kOtherUser;
  return ShareRoom::kFits;
}

bool ShareFits(const Node& node, int gpu, int milli, int64_t memory_mib,
               const std::string& user) {
  return RoomFor(ShareUse(node, gpu), node.gpu_memory_mib, milli, memory_mib, user) ==
         ShareRoom::kFits;
}

void AddShareUse(GpuShareUse* u, const Allocation& a, const std::string& user) {
  if (u->milli <= 0) {
    u->user = user;
    u->mixed = false;
  } else if (u->user != user) {
    u->mixed = true;
  }
  u->milli += a.share_milli;
  u->memory_mib += a.gpu_memory_mib;
}

Status ApplyShare(Node& node, const Allocation& a, const std::string& user,
                  bool already_running) {
  if (a.gpus.size() != 1 || a.share_milli <= 0 || a.share_milli >= kFullGpuMilli) {
    return Internal("a GPU share needs one GPU and 1..999 milli (got {" +
                    a.gpus.ToString() + "}, " + std::to_string(a.share_milli) + ")");
  }
  const int gpu = a.gpus.First();
  if (!a.gpus.IsSubsetOf(node.free_gpus | node.shared_gpus)) {
    return Internal("GPU " + std::to_string(gpu) + " of node " + node.name +
                    " is neither free nor shared");
  }
  const GpuShareUse& u = ShareUse(node, gpu);
  const ShareRoom room =
      RoomFor(u, node.gpu_memory_mib, a.share_milli, a.gpu_memory_mib, user);
  if (room == ShareRoom::kFull) {
    return Internal("share of " + std::to_string(a.share_milli) + " milli, " +
                    std::to_string(a.gpu_memory_mib) + " MiB overcommits GPU " +
                    std::to_string(gpu) + " of node " + node.name + " (holds " +
                    std::to_string(u.milli) + " milli, " + std::to_string(u.memory_mib) +
                    " MiB)");
  }
  if (room == ShareRoom::kOtherUser && !already_running) {
    return Internal("GPU " + std::to_string(gpu) + " of node " + node.name +
                    " holds shares of user " + u.user + (u.mixed ? " and others" : "") +
                    "; a share of user " + user +
                    " cannot join them (an MPS server serves one user per GPU)");
  }
  if (static_cast<int>(node.share_use.size()) <= gpu) {
    node.share_use.resize(std::max(node.gpu_count(), gpu + 1));
  }
  node.free_gpus = node.free_gpus - a.gpus;
  node.shared_gpus = node.shared_gpus | a.gpus;
  AddShareUse(&node.share_use[gpu], a, user);
  return Status::Ok();
}

void ReleaseShare(Node& node, const Allocation& a) {
  if (a.gpus.size() != 1 || a.share_milli <= 0) return;
  const int gpu = a.gpus.First();
  if (gpu >= static_cast<int>(node.share_use.size())) return;
  GpuShareUse& u = node.share_use[gpu];
  u.milli -= a.share_milli;
  u.memory_mib -= a.gpu_memory_mib;
  if (u.milli <= 0) {  // the last share left: the GPU is whole again, and nobody's
    u = {};
    node.shared_gpus = node.shared_gpus - a.gpus;
    node.free_gpus = node.free_gpus | a.gpus;
  }
}

}  // namespace hachi::sched
