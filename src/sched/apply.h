// The plan applier (DESIGN.md §4.5, STYLE.md: one writer re-checks; Nomad
// `nomad/plan_apply.go`): the one place that checks a start against a ClusterState and
// books it there. The server (Controller::ApplyPlanLocked re-checks a plan against the
// records as they are now, and BuildSnapshot books running jobs), the simulator
// (sim::Run) and the placement benchmark (sim/placement/sched_policy.cc) all apply
// plans through it, so a policy measured in `hachi sim` is applied exactly as the
// server applies it.
//
// A start is checked as a whole, then applied: all parts of a gang or none, and the
// state is untouched when a check fails. The checks (each failure an Internal error
// naming the job, the node and what failed):
//   - one allocation per node the job asks for (JobRequest::nodes), no node twice;
//   - the node index is valid, the node is up and has a model, it belongs to the
//     job's partition, its GPUs suit the request (NodeMatchesStatic: model, memory);
//   - a gang's nodes share one interconnect class;
//   - whole GPUs: GpusPerNode() GPUs (a whole-node job: every GPU of the node, as
//     the placer gives it), all free (never unhealthy), no share fields;
//   - a GPU share: one GPU, free or shared and healthy, share_milli and
//     gpu_memory_mib as requested, room on it, and no other user's shares there (an
//     MPS server serves one user per GPU; RoomFor, gpu_share.h);
//   - CPUs and memory free;
//   - isolation as the filter phase defines it (filter.cc CheckNode): a whole-node job
//     (IsWholeNode, eligibility.h) never joins shared jobs on a node, a shared job
//     never joins a whole-node job.
//
// Pure: no I/O, no clock. Thread-compatible (it writes the state it was given).
#pragma once

#include "core/status.h"
#include "sched/cluster.h"
#include "sched/plan.h"

namespace hachi::sched {

class PlanApplier {
 public:
  explicit PlanApplier(ClusterState* state) : state_(state) {}

  // Every check above for `start` of the pending `job`; changes nothing.
  Status Check(const Job& job, const Start& start) const;
  // Check, then books the allocations on their nodes (free GPUs, shares, CPUs,
  // memory, isolation counters). On error the state is as it was.
  Status Apply(const Job& job, const Start& start);
  // Books one allocation of a job already running (the server's records): only that
  // it still fits — node index, GPUs free (a share: room on its GPU), CPUs and memory.
  // Its node may have been drained and its partition changed since it started, a GPU
  // of it may have left service (unhealthy: its job is being stopped and keeps it
  // until it has), and a share may sit beside another user's (records from before the
  // one-user rule: the GPU is then mixed and takes no new share until it empties);
  // none of that undoes a start. On error the state is as it was.
  Status Take(const Job& job, const Allocation& a);
  // Gives back every allocation of `job` (booked by Apply or Take): the nodes'
  // free resources and counters are as before it was booked; a GPU that left service
  // meanwhile is not free again.
  void Release(const Job& job);

 private:
  Status CheckPart(const Job& job, bool whole, const Allocation& a) const;
  // `held`: the job runs there already, so a GPU of it that left service still counts.
  Status CheckCapacity(const Job& job, const Allocation& a, bool held = false) const;
  // `held`: as CheckCapacity's; a share then joins another user's (gpu_share.h).
  void Book(const Job& job, bool whole, const Allocation& a, bool held);

  ClusterState* state_;
};

}  // namespace hachi::sched
