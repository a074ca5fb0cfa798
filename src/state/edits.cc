#include "state/edits.h"

#include <algorithm>
#include <limits>
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
  // batch jobs, finished (scontrol requeue); never pending.
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

Status Check(const StateImage& image, const NodeBurnInChanged& e) {
  auto it = image.nodes.find(e.name);
  if (it == image.nodes.end()) return NotFound("node " + e.name + ": no such node");
  if (e.run < it->second.burn_in_run) {
    return InvalidArgument("node " + e.name + ": burn-in run " + std::to_string(e.run) +
                           " is older than run " +
                           std::to_string(it->second.burn_in_run));
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

std::string StepName(const StepKey& k) {
  return "step " + std::to_string(k.job) + "." + std::to_string(k.step);
}

Status Check(const StateImage& image, const StepStarted& e) {
  const StepRecord& r = e.record;
  const StepKey key{r.job, r.job_start, r.step};
  const std::string name = StepName(key);
  auto it = image.jobs.find(r.job);
  if (it == image.jobs.end()) return NotFound(name + ": no such job");
  const JobRecord& job = it->second;
  if (job.state != JobState::kRunning) {
    return InvalidArgument(name + ": its job is " + std::string(JobStateName(job.state)) +
                           ", not RUNNING");
  }
  // A step of an earlier run (the job was requeued since) must not land in this one.
  if (r.job_start != job.start_time) {
    return InvalidArgument(
        name + ": for the run started at " + std::to_string(r.job_start) +
        ", but the job's run started at " + std::to_string(job.start_time));
  }
  if (image.steps.count(key) != 0) return InvalidArgument(name + ": already started");
  const int next = NextStepNumber(image, r.job, r.job_start);
  if (r.step != next) {
    return InvalidArgument(name + ": out of order, the run's next step is " +
                           std::to_string(next));
  }
  if (r.state != JobState::kRunning) {
    return InvalidArgument(name + ": started as " + std::string(JobStateName(r.state)) +
                           ", not RUNNING");
  }
  if (r.end_time != 0) return InvalidArgument(name + ": started with an end time");
  if (r.start_time < r.job_start) {
    return InvalidArgument(name + ": starts at " + std::to_string(r.start_time) +
                           ", before its job's run (" + std::to_string(r.job_start) +
                           ")");
  }
  if (r.ntasks < 1) {
    return InvalidArgument(name + ": needs at least one task, got " +
                           std::to_string(r.ntasks));
  }
  if (r.nodes.empty()) return InvalidArgument(name + ": runs on no node");
  for (size_t i = 0; i < r.nodes.size(); ++i) {
    const std::string& node = r.nodes[i];
    const bool allocated =
        std::any_of(job.allocations.begin(), job.allocations.end(),
                    [&](const NodeAllocation& a) { return a.node == node; });
    if (!allocated) {
      return InvalidArgument(name + ": node " + node + " is not one of its job's");
    }
    if (std::find(r.nodes.begin(), r.nodes.begin() + i, node) != r.nodes.begin() + i) {
      return InvalidArgument(name + ": node " + node + " is listed twice");
    }
  }
  return Status::Ok();
}

Status Check(const StateImage& image, const StepEnded& e) {
  const std::string name = StepName(e.key);
  auto it = image.steps.find(e.key);
  if (it == image.steps.end()) return NotFound(name + ": no such step");
  const StepRecord& step = it->second;
  if (step.state != JobState::kRunning) {
    return InvalidArgument(name + ": already ended (" +
                           std::string(JobStateName(step.state)) + ")");
  }
  if (!IsFinal(e.state)) {
    return InvalidArgument(name + ": cannot end as " +
                           std::string(JobStateName(e.state)) + ", not a final state");
  }
  if (e.end_time < step.start_time) {
    return InvalidArgument(name + ": ends at " + std::to_string(e.end_time) +
                           ", before it started (" + std::to_string(step.start_time) +
                           ")");
  }
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
  if (e.gpu_memory_peak_mib > 0) job.gpu_memory_peak_mib = e.gpu_memory_peak_mib;
  job.usage = e.usage;
}

void Apply(StateImage* image, const JobRequeued& e) {
  JobRecord& job = image->jobs.at(e.id);
  job.state = JobState::kPending;
  // A pending job holds no GPUs; start_time stays as "last start".
  job.allocations.clear();
  job.reason = e.reason;
  ++job.requeues;
  // A finished job's outcome is no longer its (requeued after its end).
  job.end_time = 0;
  job.exit_code = 0;
  job.signal = 0;
}

void Apply(StateImage* image, const JobHeld& e) {
  JobRecord& job = image->jobs.at(e.id);
  job.held = e.held;
  job.held_by_admin = e.held && e.by_admin;
}

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

void Apply(StateImage* image, const NodeBurnInChanged& e) {
  NodeRecord& node = image->nodes.at(e.name);
  node.burn_in_passed = e.passed;
  node.burn_in_run = e.run;
  node.burn_in = e.phase;
  node.burn_in_gpus = e.gpus;
}

void Apply(StateImage* image, const TokenIssued& e) {
  image->tokens[e.record.id] = e.record;
}

void Apply(StateImage* image, const TokenRevoked& e) { image->tokens.erase(e.token_id); }

void Apply(StateImage* image, const StepStarted& e) {
  const StepRecord& r = e.record;
  image->steps[StepKey{r.job, r.job_start, r.step}] = r;
}

void Apply(StateImage* image, const StepEnded& e) {
  StepRecord& step = image->steps.at(e.key);
  step.state = e.state;
  step.end_time = e.end_time;
  step.exit_code = e.exit_code;
  step.signal = e.signal;
  step.reason = e.reason;
}

}  // namespace

bool RunningRequestMayBecome(const sched::JobRequest& from, const sched::JobRequest& to) {
  sched::JobRequest same = to;  // its agents are told a new time limit
  same.time_limit = from.time_limit;
  return same == from;
}

int NextStepNumber(const StateImage& image, JobId job, Time job_start) {
  // The first key past the run's, then one back: the run's last step, if it has one.
  auto it =
      image.steps.upper_bound(StepKey{job, job_start, std::numeric_limits<int>::max()});
  if (it == image.steps.begin()) return 0;
  --it;
  if (it->first.job != job || it->first.job_start != job_start) return 0;
  return it->first.step + 1;
}

std::vector<StepKey> RunningSteps(const StateImage& image, JobId job, Time job_start) {
  std::vector<StepKey> out;
  for (auto it = image.steps.lower_bound(
           StepKey{job, job_start, std::numeric_limits<int>::min()});
       it != image.steps.end() && it->first.job == job &&
       it->first.job_start == job_start;
       ++it) {
    if (it->second.state == JobState::kRunning) out.push_back(it->first);
  }
  return out;
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
