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
// Pure functions on plain values; thread-compatible.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "sched/cluster.h"

namespace hachi::sched {

inline constexpr int kFullGpuMilli = 1000;

// Milli and memory the shares on `gpu` of `node` use (zeros when none).
GpuShareUse ShareUse(const Node& node, int gpu);

// Whether a share of `milli` and `memory_mib` fits on `gpu` of `node` next to the
// shares already there (the GPU must be free or shared).
bool ShareFits(const Node& node, int gpu, int milli, int64_t memory_mib);

// Applies / releases a shared allocation `a` on `node` (a.share_milli > 0). Apply
// refuses a GPU that is neither free nor shared, or that the share would overcommit.
Status ApplyShare(Node& node, const Allocation& a);
void ReleaseShare(Node& node, const Allocation& a);

}  // namespace hachi::sched
