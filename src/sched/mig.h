// MIG devices as devices of their own (docs/scheduler.md "MIG devices"). A
// GPU in MIG mode is split into GPU instances (1g.10gb, 3g.40gb, ...) by its admin;
// Hachi uses the layout the node's agent found. Such a GPU is never given whole
// (Node::mig_gpus, never in free_gpus); its devices are Node::mig slots, and a job that
// asks for `gpus` devices of one profile (JobRequest::mig_profile, single node) gets
// that many free slots of that profile on one node (Allocation::mig, their UUIDs;
// Allocation::gpus, their parent GPUs).
//
// Accounting rules:
//   - Placement: among nodes with enough free slots of the profile, the one with the
//     fewest left after (best fit), then the lowest index; the lowest free slots there.
//     Every style places them so.
//   - Backfill: a MIG job holds no reservation, and the timeline never counts on its
//     GPUs (Allocation::WholeGpus); its CPUs and memory come back as any job's.
//   - Preemption: a MIG job does not preempt (its victims' slots are not modelled).
//   - Quotas count the job's parent GPUs (its allocation's GPU set), as for shares.
// Pure functions on plain values; thread-compatible.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sched/cluster.h"

namespace hachi::sched {

// Whether `s` is written like a MIG profile: [<n>c.]<n>g.<n>gb[+me|+gfx|...]
// ("1g.10gb", "3g.40gb", "1c.3g.40gb", "1g.10gb+me"), as Slurm's gres types for MIG.
bool LooksLikeMigProfile(std::string_view s);

// The slot of `node` whose device has `uuid`; -1 when none.
int FindMigSlot(const Node& node, std::string_view uuid);

// Slots of `profile` on `node`: all of them, and those `busy` leaves free (busy: per
// slot, non-zero when taken; shorter than node.mig: the rest are Node::mig's own).
int CountMigSlots(const Node& node, const std::string& profile);
int CountFreeMigSlots(const Node& node, const std::vector<uint8_t>& busy,
                      const std::string& profile);

// The `count` lowest free slots of `profile` (fewer when there are not so many).
std::vector<int> PickMigSlots(const Node& node, const std::vector<uint8_t>& busy,
                              const std::string& profile, int count);

// The parent GPUs of those slots.
GpuSet MigParents(const Node& node, const std::vector<int>& slots);

// The profiles of the nodes `nodes` of `state` have, sorted and unique: "1g.10gb,
// 3g.40gb" ("none" when they have none), for the submit's refusal.
std::string MigProfilesText(const ClusterState& state, const std::vector<int>& nodes);

// Whether allocation `a` of a job asking for `gpus` devices of `profile` names that
// many distinct slots of `node` of that profile whose parents are exactly a.gpus, each
// free or (`held`) the job's own. Internal error naming what is wrong.
Status CheckMig(const Node& node, const Allocation& a, const std::string& profile,
                int gpus, JobId job, bool held);

// Books / releases the slots of `a` (checked by CheckMig) for `job`. Release frees only
// slots the job holds.
void ApplyMig(Node& node, const Allocation& a, JobId job);
void ReleaseMig(Node& node, const Allocation& a, JobId job);

}  // namespace hachi::sched
