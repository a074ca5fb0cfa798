#include "sched/test_start.h"

#include <algorithm>

namespace hachi::sched {

PredictedStart PredictStart(Scheduler& scheduler, ClusterState state, Job job, Time now) {
  JobId top = 0;
  for (const Job& j : state.pending) top = std::max(top, j.id);
  for (const Job& j : state.running) top = std::max(top, j.id);
  job.id = top + 1;
  job.submit_time = now;
  job.held = false;
  state.pending.push_back(job);
  const Plan plan = scheduler.Schedule(state, now);
  PredictedStart out;
  for (const Start& s : plan.starts) {
    if (s.job != job.id) continue;
    out.known = true;
    out.start = now;
    out.allocations = s.allocations;
    return out;
  }
  for (const Reservation& r : plan.reservations) {
    if (r.job != job.id) continue;
    out.known = true;
    out.start = r.start;
    out.allocations = r.allocations;
    return out;
  }
  for (const Diagnosis& d : plan.pending) {
    if (d.job != job.id || d.earliest_start == kNever) continue;
    out.known = true;
    out.start = d.earliest_start;
    out.earliest_node = d.earliest_node;
    return out;
  }
  return out;
}

}  // namespace hachi::sched
