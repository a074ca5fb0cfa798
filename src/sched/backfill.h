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

#include <vector>

#include "sched/context.h"
#include "sched/placement.h"
#include "sched/plan.h"

namespace hachi::sched {

class Backfill {
 public:
  Backfill(int depth, Placer* placer) : depth_(depth), placer_(placer) {}

  bool HasRoom(const CycleContext& ctx) const { return ctx.reservations < depth_; }

  // The earliest start for `job` on the timeline, booked as a reservation into the
  // context (holds on the timeline, whole-node marks). False when the job fits on no
  // eligible node that is up, however long it waits.
  bool Reserve(CycleContext& ctx, const JobShape& job, Reservation* out,
               Diagnosis* diag);

 private:
  bool EarliestSingle(CycleContext& ctx, const JobShape& job, Reservation* out,
                      Diagnosis* diag);
  bool EarliestGang(CycleContext& ctx, const JobShape& job, Reservation* out,
                    Diagnosis* diag);
  void Book(CycleContext& ctx, const JobShape& job, const Reservation& r);

  int depth_;
  Placer* placer_;
  std::vector<Time> points_;  // scratch
};

}  // namespace hachi::sched
