#include "sched/apply.h"

#include <algorithm>
#include <string>

#include "sched/eligibility.h"
#include "sched/features.h"
#include "sched/gpu_share.h"
#include "sched/mig.h"

namespace hachi::sched {
namespace {

// Formatting happens on the error path only: a start that passes costs no string.
std::string JobOn(const Job& job, const Node& n) {
  return "job " + std::to_string(job.id) + " on node " + n.name + ": ";
}

bool InPartition(const Node& n, int partition) {
  return partition >= 0 && std::find(n.partitions.begin(), n.partitions.end(),
                                     partition) != n.partitions.end();
}

}  // namespace

Status PlanApplier::CheckCapacity(const Job& job, const Allocation& a, bool held) const {
  const Node& n = state_->nodes[a.node];
  const GpuSet unhealthy = held ? n.unhealthy - a.gpus : n.unhealthy;
  const GpuSet free = held ? n.free_gpus | (a.gpus & n.unhealthy) : n.free_gpus;
  if (job.req.Mig() || !a.mig.empty()) {
    // MIG devices (mig.h): free slots of the profile (held: the job's own); a device
    // whose GPU left service is refused unless the job holds it already.
    HACHI_RETURN_IF_ERROR(
        CheckMig(n, a, job.req.mig_profile, job.req.gpus, job.id, held));
    if (!(a.gpus & unhealthy).empty()) {
      return Internal(JobOn(job, n) + "GPUs {" + a.gpus.ToString() +
                      "} of its MIG devices are out of service");
    }
  } else if (a.share_milli > 0) {
    if (a.gpus.size() != 1 || a.share_milli >= kFullGpuMilli) {
      return Internal(JobOn(job, n) +
                      "a GPU share needs one GPU and 1..999 milli (got {" +
                      a.gpus.ToString() + "}, " + std::to_string(a.share_milli) + ")");
    }
    if (!a.gpus.IsSubsetOf(free | n.shared_gpus) || !(a.gpus & unhealthy).empty()) {
      return Internal(JobOn(job, n) + "GPU {" + a.gpus.ToString() +
                      "} is neither free nor shared");
    }
    const GpuShareUse& u = ShareUse(n, a.gpus.First());
    const ShareRoom room =
        RoomFor(u, n.gpu_memory_mib, a.share_milli, a.gpu_memory_mib, job.req.user);
    if (room == ShareRoom::kFull) {
      return Internal(JobOn(job, n) + "a share of " + std::to_string(a.share_milli) +
                      " milli, " + std::to_string(a.gpu_memory_mib) +
                      " MiB overcommits GPU " + a.gpus.ToString() + " (holds " +
                      std::to_string(u.milli) + " milli, " +
                      std::to_string(u.memory_mib) + " MiB)");
    }
    // A running share is a fact (Take): it may predate the one-user rule.
    if (room == ShareRoom::kOtherUser && !held) {
      return Internal(JobOn(job, n) + "GPU " + a.gpus.ToString() +
                      " holds shares of user " + u.user + (u.mixed ? " and others" : "") +
                      "; a share of user " + job.req.user +
                      " cannot join them (an MPS server serves one user per GPU)");
    }
  } else if (!a.gpus.IsSubsetOf(free - n.mig_gpus) || !(a.gpus & unhealthy).empty()) {
    return Internal(JobOn(job, n) + "GPUs {" + a.gpus.ToString() +
                    "} are not free (free {" + n.free_gpus.ToString() + "})");
  }
  if (a.cpus > n.free_cpus) {
    return Internal(JobOn(job, n) + std::to_string(a.cpus) + " CPUs, " +
                    std::to_string(n.free_cpus) + " free");
  }
  if (a.memory_mib > n.free_memory_mib) {
    return Internal(JobOn(job, n) + std::to_string(a.memory_mib) + " MiB of memory, " +
                    std::to_string(n.free_memory_mib) + " free");
  }
  return Status::Ok();
}

Status PlanApplier::CheckPart(const Job& job, bool whole, const Allocation& a) const {
  if (a.node < 0 || a.node >= static_cast<int>(state_->nodes.size())) {
    return Internal("job " + std::to_string(job.id) + ": node index " +
                    std::to_string(a.node) + " of " +
                    std::to_string(state_->nodes.size()));
  }
  const Node& n = state_->nodes[a.node];
  const JobRequest& r = job.req;
  if (n.state != NodeState::kUp || n.model == nullptr) {
    return Internal(JobOn(job, n) + "the node is not up");
  }
  if (!InPartition(n, job.partition)) {
    return Internal(
        JobOn(job, n) + "the node is not in the job's partition " +
        (job.partition >= 0 && job.partition < static_cast<int>(state_->partitions.size())
             ? state_->partitions[job.partition].name
             : "(none: index " + std::to_string(job.partition) + ")"));
  }
  if (!NodeMatchesStatic(n, r)) {
    return Internal(
        JobOn(job, n) + "its GPUs (" + n.gpu_model + ", " +
        std::to_string(n.gpu_memory_mib) + " MiB) do not suit a request for " +
        (r.gpu_model.empty() ? "any model" : r.gpu_model) + " with " +
        std::to_string(std::max(r.min_gpu_memory_mib, r.gpu_memory_mib)) + " MiB");
  }
  // -C/-w/-x (features.h), as the cycle's eligible sets have them.
  if (!r.constraint.empty() || !r.nodelist.empty() || !r.exclude.empty()) {
    Result<NodeSelection> sel = ResolveSelection(*state_, r);
    if (!sel.ok()) return Internal(JobOn(job, n) + sel.status().message());
    if (!SelectionAllows(*state_, *sel, r.nodes, a.node)) {
      return Internal(JobOn(job, n) + "the node is not one its -C/-w/-x allow");
    }
  }
  if (a.share_milli != r.gpu_share_milli || a.gpu_memory_mib != r.gpu_memory_mib) {
    return Internal(JobOn(job, n) + "a share of " + std::to_string(a.share_milli) +
                    " milli, " + std::to_string(a.gpu_memory_mib) + " MiB; it asks for " +
                    std::to_string(r.gpu_share_milli) + ", " +
                    std::to_string(r.gpu_memory_mib));
  }
  if (r.Mig() && (whole || r.nodes != 1)) {
    return Internal(JobOn(job, n) +
                    "MIG devices are for single-node jobs that are not "
                    "whole-node jobs");
  }
  // Whole GPUs: the request's count per node; a whole-node job every GPU of the node
  // (ChooseGpus; the same count once ValidateRequest rounded the job up to whole nodes).
  if (!r.Mig() && a.share_milli == 0 && whole && a.gpus != n.model->all_gpus()) {
    return Internal(JobOn(job, n) + "GPUs {" + a.gpus.ToString() +
                    "}; a whole-node job takes every GPU of the node {" +
                    n.model->all_gpus().ToString() + "}");
  }
  // (MIG devices: CheckCapacity counts them, CheckMig.)
  if (!r.Mig() && a.share_milli == 0 && !whole && a.gpus.size() != r.GpusPerNode()) {
    return Internal(JobOn(job, n) + std::to_string(a.gpus.size()) + " GPUs {" +
                    a.gpus.ToString() + "}; it asks for " +
                    std::to_string(r.GpusPerNode()) + " per node");
  }
  // Isolation as filter.cc CheckNode has it: a whole-node job never joins shared
  // jobs, a shared job never joins a whole-node job.
  if (whole ? n.shared_jobs > 0 : n.whole_node_jobs > 0) {
    return Internal(JobOn(job, n) +
                    (whole ? "a whole-node job on a node that runs shared jobs"
                           : "a shared job on a node that runs a whole-node job"));
  }
  return CheckCapacity(job, a);
}

Status PlanApplier::Check(const Job& job, const Start& start) const {
  if (start.job != job.id) {
    return Internal("plan starts job " + std::to_string(start.job) +
                    " with the request of job " + std::to_string(job.id));
  }
  if (static_cast<int>(start.allocations.size()) != job.req.nodes) {
    return Internal("job " + std::to_string(job.id) + ": " +
                    std::to_string(start.allocations.size()) + " nodes; it asks for " +
                    std::to_string(job.req.nodes));
  }
  const bool whole = IsWholeNode(*state_, job);
  if (!job.req.nodelist.empty()) {  // every -w node is in the gang
    Result<NodeSelection> sel = ResolveSelection(*state_, job.req);
    if (!sel.ok())
      return Internal("job " + std::to_string(job.id) + ": " + sel.status().message());
    for (int want : sel->required) {
      if (std::none_of(start.allocations.begin(), start.allocations.end(),
                       [&](const Allocation& a) { return a.node == want; })) {
        return Internal("job " + std::to_string(job.id) + ": node " +
                        state_->nodes[want].name +
                        " of its --nodelist is not in the plan");
      }
    }
  }
  for (size_t i = 0; i < start.allocations.size(); ++i) {
    const Allocation& a = start.allocations[i];
    HACHI_RETURN_IF_ERROR(CheckPart(job, whole, a));
    if (i == 0) continue;
    const Node& n = state_->nodes[a.node];
    const Node& first = state_->nodes[start.allocations[0].node];
    if (n.interconnect != first.interconnect) {
      return Internal(JobOn(job, n) + "a gang across interconnect classes (node " +
                      first.name + " is of another)");
    }
    for (size_t k = 0; k < i; ++k) {
      if (start.allocations[k].node == a.node) {
        return Internal(JobOn(job, n) + "two parts of the gang on one node");
      }
    }
  }
  return Status::Ok();
}

void PlanApplier::Book(const Job& job, bool whole, const Allocation& a, bool held) {
  Node& n = state_->nodes[a.node];
  if (!a.mig.empty()) {
    ApplyMig(n, a, job.id);  // checked (CheckMig)
  } else if (a.share_milli > 0) {
    // Checked (CheckCapacity covers every refusal of ApplyShare): cannot fail.
    (void)ApplyShare(n, a, job.req.user, /*already_running=*/held);
  } else {
    n.free_gpus = n.free_gpus - a.gpus;
  }
  n.free_cpus -= a.cpus;
  n.free_memory_mib -= a.memory_mib;
  ++(whole ? n.whole_node_jobs : n.shared_jobs);
}

Status PlanApplier::Apply(const Job& job, const Start& start) {
  HACHI_RETURN_IF_ERROR(Check(job, start));
  // Distinct nodes, each checked: booking one part cannot invalidate another.
  const bool whole = IsWholeNode(*state_, job);
  for (const Allocation& a : start.allocations) Book(job, whole, a, /*held=*/false);
  return Status::Ok();
}

Status PlanApplier::Take(const Job& job, const Allocation& a) {
  if (a.node < 0 || a.node >= static_cast<int>(state_->nodes.size())) {
    return Internal("job " + std::to_string(job.id) + ": node index " +
                    std::to_string(a.node) + " of " +
                    std::to_string(state_->nodes.size()));
  }
  HACHI_RETURN_IF_ERROR(CheckCapacity(job, a, /*held=*/true));
  Node& n = state_->nodes[a.node];
  // A GPU of it that left service is not in free_gpus: put it there for Book to take.
  // (Not a MIG device's GPU: never free.)
  const GpuSet gpus = a.mig.empty() ? a.gpus : GpuSet();
  n.free_gpus = n.free_gpus | ((gpus & n.unhealthy) - n.shared_gpus);
  Book(job, IsWholeNode(*state_, job), a, /*held=*/true);
  return Status::Ok();
}

void PlanApplier::Release(const Job& job) {
  const bool whole = IsWholeNode(*state_, job);
  for (const Allocation& a : job.allocations) {
    if (a.node < 0 || a.node >= static_cast<int>(state_->nodes.size())) continue;
    Node& n = state_->nodes[a.node];
    if (!a.mig.empty()) {
      ReleaseMig(n, a, job.id);
    } else if (a.share_milli > 0) {
      ReleaseShare(n, a);  // the GPU is whole again when its last share leaves
    } else {
      n.free_gpus = n.free_gpus | (a.gpus - n.unhealthy);
    }
    n.free_cpus += a.cpus;
    n.free_memory_mib += a.memory_mib;
    --(whole ? n.whole_node_jobs : n.shared_jobs);
  }
}

}  // namespace hachi::sched
