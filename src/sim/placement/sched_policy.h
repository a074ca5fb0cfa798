// The benchmark's `hachi` policy: the openb pods placed by the scheduler that ships
// (sched::Scheduler, policy "hachi", DESIGN.md §4.4), not by benchmark code.
//
// The openb cluster becomes a sched::ClusterState: one node per openb node, in the
// protocol's tie-break order (node i = the node of rank i, so the scheduler's "lowest
// index" tie-break is the protocol's "smallest rank"); GPU count and model as listed;
// CPUs in milli-cores (Node::cpus is a plain count); memory in MiB; a generic topology
// per GPU count, since openb lists no links: every GPU pair through the host bridge
// (PHB), one NUMA node. One shared partition that allows GPU shares. The workload
// (ClusterState::workload) is FGD's typical tasks (frag.h): the measure FGD uses.
//
// Every event is a pending job (id = event + 1, equal priority, so the queue is the
// event order), and ONE cycle with no reservations (backfill depth 0) places them:
// each job sees the starts before it booked into the cycle's context, a job that fits
// nowhere stays pending, nothing leaves — the protocol's sequential loop. Each start is
// then applied to the ClusterState by sched::PlanApplier (sched/apply.h), the applier
// of the server and the simulator, which refuses an overcommit.
// Thread-compatible.
#pragma once

#include <vector>

#include "core/status.h"
#include "sim/placement/bench.h"
#include "sim/placement/frag.h"
#include "sim/placement/openb.h"

namespace hachi::placement {

// Placements per event (node: index into cluster.nodes, -1: failed). `pods` sorted by
// name; `events` index into it; `order` lists node indices by rank.
Result<std::vector<Placement>> PlaceWithScheduler(const Cluster& cluster,
                                                  const std::vector<OpenbPod>& pods,
                                                  const std::vector<int>& events,
                                                  const std::vector<int>& order,
                                                  const std::vector<TypicalTask>& tasks);

}  // namespace hachi::placement
