// JobService::TestSubmit: sbatch --test-only. Submit's checks, then one
// scheduling cycle on a copy of the snapshot with the job added (sched/test_start.h), on
// a scheduler of its own so that the loop's is never shared.
#include <algorithm>

#include "sched/test_start.h"
#include "server/job_service.h"
#include "server/snapshot.h"

namespace hachi::server {

Result<JobService::TestSubmitAnswer> JobService::TestSubmit(const SubmitRequest& request,
                                                            const Caller& who) {
  HACHI_RETURN_IF_ERROR(CheckSubmit(request, who));
  sched::ClusterState snap;
  sched::Job job;
  Time now = 0;
  state::JobId next_id = 0;
  {
    MutexLock lock(&ledger_->mu());
    fleet_->Held(ledger_);
    if (fleet_->stopping) return Unavailable("the server is stopping");
    if (fleet_->base_dirty) HACHI_RETURN_IF_ERROR(fleet_->RebuildBaseLocked());
    Result<sched::JobRequest> req = CompleteRequestLocked(request, who);
    if (!req.ok()) return req.status();
    Result<sched::Job> valid = ValidateJobLocked(*req, ledger_->next_id());
    if (!valid.ok()) return valid.status();
    job = std::move(*valid);
    next_id = ledger_->next_id();
    snap = BuildSnapshot(fleet_->base, ledger_->image(), &ledger_->active());
    fleet_->HoldStaleNodesLocked(&snap);
    now = options_->clock->Now();
  }
  Result<std::unique_ptr<sched::Scheduler>> scheduler =
      sched::Scheduler::Create(options_->sched);
  if (!scheduler.ok()) return scheduler.status();
  const sched::PredictedStart p = sched::PredictStart(**scheduler, snap, job, now);
  TestSubmitAnswer a;
  a.job_id = next_id;
  a.known = p.known;
  a.start = p.start;
  if (job.partition >= 0 && job.partition < static_cast<int>(snap.partitions.size())) {
    a.partition = snap.partitions[job.partition].name;
  }
  for (const sched::Allocation& al : p.allocations) {
    if (al.node >= 0 && al.node < static_cast<int>(snap.nodes.size())) {
      a.nodes.push_back(snap.nodes[al.node].name);
    }
    a.cpus += al.cpus;
  }
  if (a.cpus == 0) {  // an allocation without a CPU count: what the job asks for
    a.cpus = std::max(1, job.req.cpus + job.req.cpus_per_gpu * job.req.GpusPerNode()) *
             std::max(1, job.req.nodes);
  }
  if (a.nodes.empty() && p.earliest_node >= 0 &&
      p.earliest_node < static_cast<int>(snap.nodes.size())) {
    a.nodes.push_back(snap.nodes[p.earliest_node].name);
  }
  return a;
}

}  // namespace hachi::server
