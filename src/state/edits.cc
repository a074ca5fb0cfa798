#include "state/edits.h"

#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>

namespace hachi::state {
namespace {

std::string JobName(JobId id) { return "job " + std::to_string(id); }

// Finds the job an edit names; kNotFound when there is none.
Result<const JobRecord*> FindJob(const StateImage& image, JobId id) {
  auto it = image.jobs.find(id);
  if (it == image.jobs.end()) return NotFound(JobName(id) + ": no such job");
  return &it->second;
}

Status Check(const StateImage& image, const JobSubmitted& e) {
  const JobRecord& job = e.record;
  if (job.id <= 0) return InvalidArgument(JobName(job.id) + ": job ids start at 1");
  if (image.jobs.count(job.id) != 0) {
    return InvalidArgument(JobName(job.id) + ": already submitted");
  }
  if (job.state != JobState::kPending) {
    return InvalidArgument(JobName(job.id) + ": submitted as " +
                           std::string(JobStateName(job.state)) + ", not PENDING");
  }
  return Status::Ok();
}

Status Check(const StateImage& image, const JobStarted& e) {
  Result<const JobRecord*> job = FindJob(image, e.id);
  if (!job.ok()) return job.status();
  if ((*job)->state != JobState::kPending) {
    return InvalidArgument(JobName(e.id) + ": cannot start, it is " +
                           std::string(JobStateName((*job)->state)));
  }
  if ((*job)->held) return InvalidArgument(JobName(e.id) + ": cannot start, it is held");
  return Status::Ok();
}

Status Check(const StateImage& image, const JobEnded& e) {
  Result<const JobRecord*> job = FindJob(image, e.id);
  if (!job.ok()) return job.status();
  if (!IsFinal(e.state)) {
    return InvalidArgument(JobName(e.id) + ": cannot end as " +
                           std::string(JobStateName(e.state)) + ", not a final state");
  }
  if (IsFinal((*job)->state)) {
    return InvalidArgument(JobName(e.id) + ": already ended (" +
                           std::string(JobStateName((*job)->state)) + ")");
  }
  return Status::Ok();
}

Status Check(const StateImage& image, const JobRequeued& e) {
  Result<const JobRecord*> job = FindJob(image, e.id);
  if (!job.ok()) return job.status();
  // Running (its run ended: preempted, lost, scontrol requeue) or, as Slurm allows for
  // batch jobs, finished (scontrol requeue, issue 17); never pending.
  if ((*job)->state == JobState::kPending) {
    return InvalidArgument(JobName(e.id) + ": cannot requeue, it is " +
                           std::string(JobStateName((*job)->state)));
  }
  return Status::Ok();
}

Status Check(const StateImage& image, const JobHeld& e) {
  Result<const JobRecord*> job = FindJob(image, e.id);
  if (!job.ok()) return job.status();
  if ((*job)->state != JobState::kPending) {
    return InvalidArgument(JobName(e.id) + ": cannot " + (e.held ? "hold" : "release") +
                           ", it is " + std::string(JobStateName((*job)->state)));
  }
  return Status::Ok();
}

Status Check(const StateImage& image, const JobUpdated& e) {
  Result<const JobRecord*> job = FindJob(image, e.id);
  if (!job.ok()) return job.status();
  const JobRecord& j = **job;
  if (j.state == JobState::kPending) return Status::Ok();
  if (j.state == JobState::kRunning) {
    if (RunningRequestMayBecome(j.req, e.req)) return Status::Ok();
    return InvalidArgument(JobName(e.id) +
                           ": cannot change the request of a running job, only its "
                           "time limit, name and comment");
  }
  return InvalidArgument(JobName(e.id) + ": cannot update it, it is " +
                         std::string(JobStateName(j.state)));
}

Status Check(const StateImage&, const NodeUpserted& e) {
  if (e.record.name.empty()) return InvalidArgument("node: empty name");
  return Status::Ok();
}

Status Check(const StateImage& image, const NodeStateChanged& e) {
  if (image.nodes.count(e.name) == 0)
    return NotFound("node " + e.name + ": no such node");
  return Status::Ok();
}

Status Check(const StateImage& image, const NodeHealthChanged& e) {
  if (image.nodes.count(e.name) == 0)
    return NotFound("node " + e.name + ": no such node");
  for (const auto& [gpu, why] : e.reasons) {
    if (gpu < 0 || gpu >= GpuSet::kMaxGpus || !e.unhealthy.contains(gpu)) {
      return InvalidArgument(
          "node " + e.name + ": a reason for GPU " + std::to_string(gpu) +
          ", which is not among the unhealthy GPUs {" + e.unhealthy.ToString() + "}");
    }
  }
  return Status::Ok();
}

Status Check(const StateImage& image, const TokenIssued& e) {
  const TokenRecord& t = e.record;
  if (t.id.empty() || t.sha256.size() != 64 || t.user.empty()) {
    return InvalidArgument("token: needs an id, a SHA-256 and a user");
  }
  if (image.tokens.count(t.id) != 0)
    return InvalidArgument("token " + t.id + ": already issued");
  for (const auto& [id, other] : image.tokens) {
    if (other.sha256 == t.sha256)
      return InvalidArgument("token " + t.id + ": hash already in use");
  }
  return Status::Ok();
}

Status Check(const StateImage& image, const TokenRevoked& e) {
  if (image.tokens.count(e.token_id) == 0) return NotFound("no token " + e.token_id);
  return Status::Ok();
}

// Apply() runs only after Check() passed.
void Apply(StateImage* image, const JobSubmitted& e) {
  image->jobs[e.record.id] = e.record;
  // Concurrent submits may commit out of id order (group commit): keep the highest.
  image->last_job_id = std::max(image->last_job_id, e.record.id);
}

void Apply(StateImage* image, const JobStarted& e) {
  JobRecord& job = image->jobs.at(e.id);
  job.state = JobState::kRunning;
  job.start_time = e.start_time;
  job.allocations = e.allocations;
  job.master_port = e.master_port;
}

void Apply(StateImage* image, const JobEnded& e) {
  JobRecord& job = image->jobs.at(e.id);
  job.state = e.state;
  job.end_time = e.end_time;
  job.exit_code = e.exit_code;
  job.signal = e.signal;
  job.reason = e.reason;
}

void Apply(StateImage* image, const JobRequeued& e) {
  JobRecord& job = image->jobs.at(e.id);
  job.state = JobState::kPending;
  // A pending job holds no GPUs; start_time stays as "last start".
  job.allocations.clear();
  job.reason = e.reason;
  ++job.requeues;
  // A finished job's outcome is no longer its (issue 17: requeued after its end).
  job.end_time = 0;
  job.exit_code = 0;
  job.signal = 0;
}

void Apply(StateImage* image, const JobHeld& e) { image->jobs.at(e.id).held = e.held; }

void Apply(StateImage* image, const JobUpdated& e) {
  JobRecord& job = image->jobs.at(e.id);
  job.req = e.req;
  job.spec.name = e.name;
  job.spec.comment = e.comment;
}

void Apply(StateImage* image, const NodeUpserted& e) {
  image->nodes[e.record.name] = e.record;
}

void Apply(StateImage* image, const NodeStateChanged& e) {
  NodeRecord& node = image->nodes.at(e.name);
  node.state = e.state;
  node.state_reason = e.reason;
  node.state_since = e.since;
}

void Apply(StateImage* image, const NodeHealthChanged& e) {
  NodeRecord& node = image->nodes.at(e.name);
  node.unhealthy = e.unhealthy;
  node.unhealthy_reasons = e.reasons;
}

void Apply(StateImage* image, const TokenIssued& e) {
  image->tokens[e.record.id] = e.record;
}

void Apply(StateImage* image, const TokenRevoked& e) { image->tokens.erase(e.token_id); }

}  // namespace

bool RunningRequestMayBecome(const sched::JobRequest& from, const sched::JobRequest& to) {
  sched::JobRequest same = to;  // its agents are told a new time limit
  same.time_limit = from.time_limit;
  return same == from;
}

Status CheckEdit(const StateImage& image, const Edit& edit) {
  return std::visit([&](const auto& e) { return Check(image, e); }, edit);
}

Status ApplyEdit(StateImage* image, const Edit& edit) {
  return std::visit(
      [&](const auto& e) {
        Status s = Check(*image, e);
        if (s.ok()) Apply(image, e);
        return s;
      },
      edit);
}

}  // namespace hachi::state
