// Timeline: future availability per node, for backfill (docs/scheduler.md). It knows
// when each running job (and each job started this cycle) releases its GPUs, CPUs and
// memory — at its EndEstimate(), i.e. its time limit — and which GPUs are held by
// reservations made this cycle, over which interval.
//
// Offer(node, t, d) answers "what may a job running over [t, t + d) use on this node":
// the GPUs free now or released by t, minus those of every reservation overlapping
// [t, t + d). A job that starts now uses the same question with t = now, which is
// what makes backfill safe: it may take reserved GPUs only if it ends before the
// reservation starts. Thread-compatible; per cycle.
#pragma once

#include <cstdint>
#include <vector>

#include "core/gpu_set.h"
#include "core/time.h"
#include "sched/cluster.h"

namespace hachi::sched {

class Timeline {
 public:
  struct Release {  // a running job's share of a node, freed at `end`
    Time end = 0;
    GpuSet gpus;
    int cpus = 0;
    int64_t memory_mib = 0;
    bool whole = false;
    JobId job = 0;
  };
  struct Hold {  // a reservation's share of a node over [start, end)
    Time start = 0;
    Time end = 0;
    GpuSet gpus;
    int cpus = 0;
    int64_t memory_mib = 0;
    bool whole = false;
    JobId job = 0;
  };
  struct Offer {
    GpuSet gpus;
    int cpus = 0;
    int64_t memory_mib = 0;
    bool whole_running = false;   // a whole-node job still runs at t
    bool whole_held = false;      // a whole-node reservation overlaps [t, t + d)
    bool shared_running = false;  // a shared job still runs at t
    JobId last_release = 0;       // the job whose end made the latest release by t
    Time last_release_end = 0;    // and when it ends
  };

  void Reset(int nodes);
  // The caller clamps ends to now + 1 s at least: an overrunning job may end at any
  // moment, and nothing better is known.
  void AddRelease(int node, const Release& r);
  void AddHold(int node, const Hold& h);
  bool HasHolds(int node) const { return !holds_[node].empty(); }
  bool HasWholeHold(int node) const;

  // What a job over [t, t + d) may use on `node`, given what is free now.
  // `shared_now` says whether a shared job runs there now (from the snapshot).
  // `gone` (preemption): jobs taken to have left by t, whatever their release time.
  Offer At(int node, GpuSet free_now, int cpus_now, int64_t memory_now, bool whole_now,
           bool shared_now, Time now, Time t, Duration d,
           const std::vector<JobId>* gone = nullptr) const;
  // Moves `job`'s release on `node` to `end` if that is earlier (a preempted job
  // leaves at its kill time).
  void Advance(int node, JobId job, Time end);

  // The times >= from at which At(node, ., t, d) can change, ascending, starting with
  // `from`: release ends, hold ends, and the first second a hold overlaps.
  void ChangePoints(int node, Time from, Duration d, std::vector<Time>* out) const;

  // A lower bound on when `node` can offer `count` GPUs: the first time >= now at
  // which the GPUs free now plus those released reach `count`, ignoring holds; kNever
  // if never.
  Time EarliestCount(int node, GpuSet free_now, int count, Time now) const;

 private:
  std::vector<std::vector<Release>> releases_;  // per node, by end
  std::vector<std::vector<Hold>> holds_;        // per node
};

}  // namespace hachi::sched
