// Filter phase: may this job start now — first as a whole (held, dependencies,
// quotas), then on one node (state, eligibility, isolation, free GPUs/CPUs/memory,
// reservations). Each check passes or names a reason; nothing is formatted here
// (diagnose.cc turns reasons into text). Pure functions of the cycle context.
#pragma once

#include <array>
#include <cstdint>

#include "sched/context.h"
#include "sched/plan.h"
#include "sched/timeline.h"

namespace hachi::sched {

// Job-level gates: held, dependencies, --begin and --deadline, quotas.
// kNone when the job may be placed; else the reason, with the quota numbers in *used /
// *limit for the quota reasons.
Reason CheckJob(const CycleContext& ctx, const JobShape& job, int* used, int* limit);

// Why one node cannot take one share of a job.
enum class NodeVerdict : uint8_t {
  kFits = 0,
  kDown,        // drained or down
  kIneligible,  // not in the partition, wrong GPU model/memory, too small
  kIsolation,   // whole-node job there (or reserved) for a shared job, or vice versa
  kGpus,        // too few free GPUs
  kReserved,    // enough free GPUs, but reserved for a job ahead
  kCpus,
  kMemory,
  kWindow,  // another partition's time window owns the node then (or soon after)
};
inline constexpr int kNodeVerdicts = 9;

// Counts of verdicts over the nodes a placement looked at: the diagnosis' raw data.
struct VerdictTally {
  std::array<int, kNodeVerdicts> count{};
  // A GPU share: shared GPUs with room for it, on nodes that passed CheckNode, that
  // hold another user's shares (an MPS server serves one user per GPU, gpu_share.h).
  int other_user_gpus = 0;
  // MIG devices (mig.h): of the job's profile, on the eligible up nodes looked at,
  // free and in all; the most free on one node.
  int mig_free = 0, mig_total = 0, mig_most_free = 0;
  void Add(NodeVerdict v) { ++count[static_cast<int>(v)]; }
  // The verdict that blocked most nodes, among the "busy" ones (ignores kFits,
  // kIneligible); kGpus when nothing was seen.
  NodeVerdict Main() const;
};

// What `node` offers a job running over [t, t + limit) and whether a share fits in it.
// At t == now hard isolation also refuses shared jobs on a node that any whole-node
// reservation holds.
NodeVerdict CheckNode(const CycleContext& ctx, const JobShape& job, int node, Time t,
                      Timeline::Offer* offer);

// Whether a share of `job` fits in `offer` on a node of `size` GPUs: kFits, or
// kIsolation, kGpus, kCpus, kMemory (CheckNode's last steps; the preemption phase asks
// it about offers with victims gone).
NodeVerdict FitsOffer(const JobShape& job, int size, const Timeline::Offer& offer);

}  // namespace hachi::sched
