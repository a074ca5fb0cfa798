// Preempt phase (docs/scheduler.md, "Preemption" and "Time windows"): which running
// jobs to stop, and when. Two reasons, one mechanism (plan.h Preemption: a signal now,
// the stop after the grace of the victim's partition, then requeue or cancel per that
// partition's mode):
//
//   - Tiers (hachi policy): a pending job of a partition with `preempt_lower_tiers`
//     that cannot start now, and whose earliest start on the backfill timeline is
//     later than the victims could be gone (now + the largest grace of the lower
//     tiers), takes the cheapest set of running lower-tier jobs on one node (a gang:
//     on enough nodes of one class) whose exit lets it fit: least lost work
//     (GPU-seconds run so far), then fewest jobs, then the best GPU set, then the
//     lowest node. Equal or higher tiers are never touched, a job already being
//     preempted (Job::preempt_kill_at, or chosen earlier this cycle) is never chosen
//     again, and the set is minimal (dropping any victim makes it not fit). The job
//     then holds the GPUs it will use from that time, like a reservation, so backfill
//     cannot take them.
//   - Time windows (every policy): a job of another partition still running on a
//     window node when the window opens (by its time limit) is signalled `grace`
//     before the window start. Jobs started there outside the window must end by the
//     next window start (filter.cc), so this only catches jobs that were there first.
//
// Per cycle; not thread-safe (the scratch buffers are reused across cycles).
#pragma once

#include <vector>

#include "sched/backfill.h"
#include "sched/context.h"
#include "sched/placement.h"
#include "sched/plan.h"

namespace hachi::sched {

class Preempter {
 public:
  Preempter(Placer* placer, Backfill* backfill) : placer_(placer), backfill_(backfill) {}

  // Whether tier preemption can happen this cycle at all: some partition may preempt
  // and a job of a lower tier runs and is not being preempted. Cheap when no partition
  // preempts (the common case).
  static bool Possible(const CycleContext& ctx);

  // Tier preemption for `job`, which cannot start now. True when victims were chosen:
  // their preemptions go to plan->preemptions, the job's hold from their exit to
  // plan->reservations and the timeline, and *d says kPreempting with the numbers.
  bool ForJob(CycleContext& ctx, const JobShape& job, Plan* plan, Diagnosis* d);

  // Window preemptions that are due now, and plan->wake_at (the next window opening
  // or closing, or the next such preemption falling due). Runs before any job is
  // placed, so the owner's jobs can reserve the nodes from the victims' exit.
  void ForWindows(CycleContext& ctx, Plan* plan);

 private:
  // The cheapest victim set on one node, or false.
  struct NodeChoice {
    int node = -1;
    double lost = 0;  // GPU-seconds of work lost
    int count = 0;
    int quality = 0;  // bottleneck of the GPU set the job would get (higher is better)
    std::vector<int> victims;  // indices into state.running
    GpuSet gpus;               // the job's GPUs there
  };
  bool BestOnNode(CycleContext& ctx, const JobShape& job, int node, Time at,
                  bool allow_empty, NodeChoice* out);
  bool ChooseGang(CycleContext& ctx, const JobShape& job, std::vector<NodeChoice>& all,
                  std::vector<NodeChoice>* out) const;
  void Stop(CycleContext& ctx, int victim, JobId for_job, int for_partition, Plan* plan);

  Placer* placer_;
  Backfill* backfill_;
  // Scratch.
  std::vector<int> cands_;
  std::vector<JobId> gone_;
};

}  // namespace hachi::sched
