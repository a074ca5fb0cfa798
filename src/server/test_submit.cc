// Controller::TestSubmit: sbatch --test-only (issue 17). Submit's checks, then one
// scheduling cycle on a copy of the snapshot with the job added (sched/test_start.h), on
// a scheduler of its own so that the loop's is never shared.
#include <algorithm>

#include "core/bytes.h"
#include "sched/dependencies.h"
#include "sched/test_start.h"
#include "server/auth.h"
#include "server/controller.h"
#include "server/snapshot.h"

namespace hachi::server {

Result<Controller::TestSubmitAnswer> Controller::TestSubmit(const SubmitRequest& request,
                                                            const Caller& who) {
  HACHI_RETURN_IF_ERROR(authorizer_.Authorize(
      who, Action::kSubmit,
      Resource::Submit(request.req.account, request.req.partition)));
  HACHI_RETURN_IF_ERROR(CheckJobSpec(request.spec));
  sched::ClusterState snap;
  sched::Job job;
  Time now = 0;
  state::JobId next_id = 0;
  {
    MutexLock lock(&mu_);
    if (stopping_) return Unavailable("the server is stopping");
    if (base_dirty_) HACHI_RETURN_IF_ERROR(RebuildBaseLocked());
    sched::JobRequest req = request.req;
    if (!IsValidUtf8(who.user)) {
      return InvalidArgument("user: the name of uid " + std::to_string(who.uid) +
                             " is not valid UTF-8");
    }
    req.user = who.user;
    if (req.account.empty()) req.account = who.user;
    if (req.time_limit < 0) {  // --time=UNLIMITED: the partition's maximum
      const int p = req.partition.empty() ? 0 : base_.state.PartitionIndex(req.partition);
      req.time_limit = p >= 0 && p < static_cast<int>(base_.state.partitions.size())
                           ? base_.state.partitions[p].max_time
                           : 0;
    }
    Result<sched::Job> valid = sched::ValidateRequest(base_.state, req);
    if (!valid.ok()) return valid.status();
    sched::ApplyDefaultMemory(base_.state, &*valid);
    HACHI_RETURN_IF_ERROR(sched::CheckDependencies(next_id_, req.dependencies));
    for (const sched::Dependency& d : req.dependencies) {
      if (image_.jobs.find(d.job) == image_.jobs.end()) {
        return InvalidArgument("dependency on job " + std::to_string(d.job) +
                               ", which does not exist");
      }
    }
    job = std::move(*valid);
    next_id = next_id_;
    snap = BuildSnapshot(base_, image_, &active_);
    HoldStaleNodesLocked(&snap);
    now = options_.clock->Now();
  }
  Result<std::unique_ptr<sched::Scheduler>> scheduler =
      sched::Scheduler::Create(options_.sched);
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
