// Reserve phase: conservative backfill with a reservation depth (STYLE.md: one
// algorithm, one knob; EASY is depth 1). A job that cannot start now gets, while the
// cycle has reservations left, the earliest exact (nodes, GPUs, start) on the
// timeline (timeline.h) at which it fits around running jobs and earlier
// reservations; the reservation then holds those GPUs over [start, start + limit).
// Every later job that starts now goes through the same timeline, so it may use
// reserved GPUs only if it ends before the reservation starts: a backfilled job never
// delays a reserved one (property test in backfill_test.cc).
//
// Per cycle; not thread-safe.
#pragma once

#include <utility>
#include <vector>

#include "sched/context.h"
#include "sched/placement.h"
#include "sched/plan.h"

namespace hachi::sched {

class Backfill {
 public:
  Backfill(int depth, Placer* placer) : depth_(depth), placer_(placer) {}

  // Slots: a blocked job takes one when CanEverFit says it could be reserved — a
  // static fact of the cycle — whether or not the timeline then finds a start. This
  // makes the slots a cycle uses independent of when reservations are computed, so
  // the scheduler may compute them lazily (scheduler.cc) with the same plan.
  bool HasRoom(int taken) const { return taken < depth_; }
  // Some up, eligible node set could hold the job once everything there ends: enough
  // healthy GPUs (whole-node: all healthy), CPUs and memory, and for a gang enough
  // such nodes of one class.
  bool CanEverFit(CycleContext& ctx, const JobShape& job);

  // The earliest start for `job` on the timeline, booked as a reservation into the
  // context (holds on the timeline, whole-node marks). Takes no slot: the caller took
  // it when CanEverFit said yes (see HasRoom). False when the timeline finds no start.
  bool Reserve(CycleContext& ctx, const JobShape& job, Reservation* out, Diagnosis* diag);
  // The same question without booking anything or taking a slot (the preemption phase
  // asks whether a job would start soon anyway).
  bool Earliest(CycleContext& ctx, const JobShape& job, Reservation* out,
                Diagnosis* diag);
  // Books `r` as `job`'s hold on the timeline (and whole-node marks).
  void Book(CycleContext& ctx, const JobShape& job, const Reservation& r);

 private:
  bool EarliestSingle(CycleContext& ctx, const JobShape& job, Reservation* out,
                      Diagnosis* diag);
  bool EarliestGang(CycleContext& ctx, const JobShape& job, Reservation* out,
                    Diagnosis* diag);
  // ChangePoints plus, on another partition's window node, the window ends after
  // `from` (when the node becomes usable again).
  void Points(CycleContext& ctx, const JobShape& job, int node, Time from);

  int depth_;
  Placer* placer_;
  std::vector<Time> points_;  // scratch
  std::vector<int> class_counts_;
  std::vector<std::pair<Time, int>> lower_;  // (lower bound, node)
};

}  // namespace hachi::sched
