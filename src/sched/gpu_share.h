// GPU shares: a job that asks for a fraction of one GPU (JobRequest::gpu_share_milli,
// 1..999 thousandths) and/or promised GPU memory. Shares of one GPU are packed; their
// sum never exceeds 1000 milli nor the GPU's memory. A GPU holding shares leaves
// Node::free_gpus and joins Node::shared_gpus, so whole-GPU jobs never land on it; it
// goes back when its last share leaves.
//
// Accounting rules (docs/scheduler.md, "GPU shares"):
//   - Backfill is conservative: the timeline never counts on a shared GPU coming back
//     (a release of a share frees its CPUs and memory, not the GPU), and a reservation
//     for a shared job holds a whole free GPU.
//   - Quotas count a shared job as 1 GPU (its allocation's GPU set).
//   - One user per GPU: the agent runs an MPS control daemon per shared GPU, and an
//     MPS server serves one Linux user at a time (another user's client waits until
//     the first user's server has no clients). So a GPU's shares all belong to one
//     user (GpuShareUse::user), set by the first share and cleared by the last;
//     placement, the applier and the diagnosis all ask RoomFor.
// Pure functions on plain values; thread-compatible.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "sched/cluster.h"

namespace hachi::sched {

inline constexpr int kFullGpuMilli = 1000;

// A share as --gpu-share writes it: 250 -> "0.25", 100 -> "0.1", 333 -> "0.333".
std::string ShareText(int milli);

// Milli, memory and user of the shares on `gpu` of `node` (zeros and "" when none).
// A reference into the node, or to an empty use: valid while the node is unchanged.
const GpuShareUse& ShareUse(const Node& node, int gpu);
// The empty use (zeros and ""), made at first use and never destroyed: no static
// initialiser or exit-time destructor in every process of the binary.
const GpuShareUse& NoShareUse();

// Whether a share of `milli` and `memory_mib` of `user` fits on a GPU of
// `gpu_memory_mib` next to the shares `u` already there. kOtherUser: there is room, but
// the shares there are another user's (or two users', GpuShareUse::mixed).
enum class ShareRoom : uint8_t { kFits, kFull, kOtherUser };
ShareRoom RoomFor(const GpuShareUse& u, int64_t gpu_memory_mib, int milli,
                  int64_t memory_mib, const std::string& user);

// RoomFor on `gpu` of `node` is kFits (the GPU must be free or shared).
bool ShareFits(const Node& node, int gpu, int milli, int64_t memory_mib,
               const std::string& user);

// Adds a share of `user` (allocation `a`) to the use `u` of its GPU: the first share
// makes `user` the owner; one of another user (only ApplyShare's `already_running`)
// marks the GPU mixed.
void AddShareUse(GpuShareUse* u, const Allocation& a, const std::string& user);

// Applies / releases a shared allocation `a` of `user` on `node` (a.share_milli > 0).
// Apply refuses a GPU that is neither free nor shared, that the share would
// overcommit, or whose shares are another user's — unless `already_running`: a share
// that runs there already (the server's records, which may predate the one-user rule)
// is booked beside another user's, and the GPU is then mixed. Release clears the owner
// when the last share leaves.
Status ApplyShare(Node& node, const Allocation& a, const std::string& user,
                  bool already_running = false);
void ReleaseShare(Node& node, const Allocation& a);

}  // namespace hachi::sched
