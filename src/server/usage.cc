// Job usage on the server (issue 21, docs/efficiency.md): the agents' samples summed
// into each running job's current run (state/usage.h), the summary put on the run's
// JobEnded, the runs written to the store's usage table (at the end, and every
// usage_flush_s while they run), and read back for GET /jobs/ID/usage.
#include <algorithm>
#include <ctime>
#include <iostream>
#include <variant>

#include "server/controller.h"
#include "server/controller_metrics.h"

namespace hachi::server {
namespace {

// The run's usage as it starts: its nodes, CPUs, memory and GPUs, nothing sampled.
state::JobUsage NewUsage(const state::JobRecord& job) {
  std::vector<std::string> nodes;
  std::vector<sched::Allocation> alloc;
  for (const state::NodeAllocation& a : job.allocations) {
    nodes.push_back(a.node);
    sched::Allocation x;
    x.gpus = a.gpus;
    x.cpus = a.cpus;
    x.memory_mib = a.memory_mib;
    alloc.push_back(x);
  }
  return state::NewJobUsage(job.id, job.start_time, nodes, alloc);
}

}  // namespace

void Controller::ResumeUsageLocked() {
  for (const auto& entry : image_.jobs) {
    const state::JobRecord& job = entry.second;
    if (job.state != state::JobState::kRunning) continue;
    Result<std::vector<state::JobUsage>> stored = store_->LoadUsage(job.id);
    if (!stored.ok()) {
      std::cerr << "hachi server: job " << job.id
                << "'s usage so far not read: " << stored.status().message() << "\n";
      continue;
    }
    for (state::JobUsage& u : *stored) {
      if (u.start_time == job.start_time)
        usage_[job.id] = UsageTrack{std::move(u), false};
    }
  }
}

void Controller::AddUsageLocked(const std::string& node,
                                const std::vector<state::JobUsageSample>& samples) {
  for (const state::JobUsageSample& s : samples) {
    auto job = image_.jobs.find(s.job);
    if (job == image_.jobs.end() || job->second.state != state::JobState::kRunning ||
        job->second.start_time != s.start_time) {
      continue;  // an ended or requeued run's late sample
    }
    auto track = usage_.find(s.job);
    if (track == usage_.end() || track->second.usage.start_time != s.start_time) {
      // A run's first sample (a run from before a restart was resumed at Create).
      track =
          usage_.insert_or_assign(s.job, UsageTrack{NewUsage(job->second), true}).first;
    }
    UsageTrack& t = track->second;
    if (!state::AddSample(&t.usage, node, s)) continue;
    t.dirty = true;
    NoteGpuUtilLocked(node, s);  // the node's gpu_util (the dashboard's shading)
    // Each GPU's latest figures, and whether the run is idle by its partition's policy.
    if (t.latest.size() != t.usage.gpus.size()) {
      t.latest.clear();
      for (const state::GpuUsage& g : t.usage.gpus) t.latest.push_back({g.node, g.gpu});
    }
    for (const state::GpuSample& g : s.gpus) {
      for (UsageTrack::Latest& l : t.latest) {
        if (l.node == node && l.gpu == g.gpu) {
          l.util = g.util;
          l.mem_mib = g.mem_mib;
        }
      }
    }
    const config::IdleGpuPolicy* policy = IdlePolicyLocked(job->second.req.partition);
    if (policy == nullptr) continue;
    const bool idle =
        !t.latest.empty() &&
        std::all_of(t.latest.begin(), t.latest.end(), [&](const UsageTrack::Latest& l) {
          return l.util >= 0 && l.util < policy->below_pct;
        });
    if (!idle) {
      t.usage.idle_since = 0;  // a new spell must last the whole period again
      t.usage.idle_warned = false;
    } else if (t.usage.idle_since == 0) {
      t.usage.idle_since = s.at;
    }
  }
}

const config::IdleGpuPolicy* Controller::IdlePolicyLocked(
    const std::string& partition) const {
  if (!options_.config) return nullptr;
  for (const config::PartitionConfig& p : options_.config->partitions) {
    if (p.partition.name == partition) return p.idle.after > 0 ? &p.idle : nullptr;
  }
  return nullptr;
}

std::string Controller::IdleNoteLocked(const state::JobRecord& job) const {
  auto t = usage_.find(job.id);
  if (t == usage_.end() || !t->second.usage.idle_warned) return "";
  const config::IdleGpuPolicy* policy = IdlePolicyLocked(job.req.partition);
  if (policy == nullptr) return "";
  const std::time_t since = static_cast<std::time_t>(t->second.usage.idle_since);
  std::tm tm{};
  gmtime_r(&since, &tm);
  char at[32];
  std::strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return "idle GPUs: every GPU below " + std::to_string(policy->below_pct) + " % since " +
         at + " (over " + FormatDuration(policy->after) + ", partition " +
         job.req.partition + "'s idle policy)";
}

void Controller::CheckIdleLocked(Time now) {
  // On the scheduling cycle's path: nothing to scan unless a partition has a policy.
  if (!options_.config ||
      std::none_of(options_.config->partitions.begin(), options_.config->partitions.end(),
                   [](const config::PartitionConfig& p) { return p.idle.after > 0; })) {
    return;
  }
  std::vector<state::Edit> edits;
  for (auto& entry : usage_) {
    const state::JobId id = entry.first;
    state::JobUsage& u = entry.second.usage;
    if (u.idle_since == 0 || u.idle_warned) continue;
    auto job = image_.jobs.find(id);
    if (job == image_.jobs.end() || job->second.state != state::JobState::kRunning) {
      continue;
    }
    const config::IdleGpuPolicy* policy = IdlePolicyLocked(job->second.req.partition);
    if (policy == nullptr || now - u.idle_since < policy->after) continue;
    u.idle_warned = true;
    entry.second.dirty = true;
    const std::string note = IdleNoteLocked(job->second);
    metrics_->IdleAction(job->second.req.partition,
                         config::IdleActionName(policy->action));
    std::cerr << "hachi server: job " << id << ": " << note << ": "
              << config::IdleActionName(policy->action) << "\n";
    if (policy->action == config::IdleAction::kWarn) continue;
    RunInfo& info = runs_[id];
    // Stopping already (cancelled, or asked to requeue): a requeue would be refused.
    if (!Transition(info.state, RunEvent::kRequeueAsked).ok()) continue;
    if (policy->action == config::IdleAction::kCancel) {
      CancelOneLocked(id, "cancelled: " + note, &edits);
    } else {
      info.Take(RunEvent::kRequeueAsked);
      info.requeue_reason = "requeued: " + note;
      StopPartsLocked(job->second, &info);
      if (info.parts_left <= 0) {  // no part was delivered yet: requeued at once
        edits.push_back(state::JobRequeued{id, info.requeue_reason});
        runs_.erase(id);
      }
    }
  }
  if (!edits.empty()) {
    Status s = CommitAndApply(std::move(edits));
    if (!s.ok()) std::cerr << "hachi server: idle policy: " << s.message() << "\n";
  }
}

void Controller::JobGpuGaugesLocked(ClusterGauges* g) const {
  for (const auto& entry : usage_) {
    auto job = image_.jobs.find(entry.first);
    if (job == image_.jobs.end() || job->second.state != state::JobState::kRunning) {
      continue;
    }
    if (entry.second.usage.idle_warned) ++g->idle_jobs;
    for (const UsageTrack::Latest& l : entry.second.latest) {
      g->job_gpus.push_back({entry.first, job->second.req.user, job->second.req.account,
                             l.node, l.gpu, l.util, l.mem_mib});
    }
  }
}

void Controller::NoteGpuUtilLocked(const std::string& node,
                                   const state::JobUsageSample& s) {
  std::vector<GpuUtilSeen>& seen = gpu_util_[node];
  for (const state::GpuSample& g : s.gpus) {
    if (g.gpu < 0 || g.gpu >= GpuSet::kMaxGpus || g.util < 0) continue;
    if (g.gpu >= static_cast<int>(seen.size())) seen.resize(g.gpu + 1);
    seen[g.gpu] = GpuUtilSeen{s.job, s.start_time, g.util};
  }
}

void Controller::EndUsageLocked(std::vector<state::Edit>* edits,
                                std::vector<state::JobUsage>* save) {
  for (state::Edit& e : *edits) {
    state::JobId id = 0;
    state::JobEnded* end = std::get_if<state::JobEnded>(&e);
    if (end != nullptr) {
      id = end->id;
    } else if (const auto* r = std::get_if<state::JobRequeued>(&e)) {
      id = r->id;
    } else {
      continue;
    }
    auto track = usage_.find(id);
    if (track == usage_.end()) continue;
    if (end != nullptr) end->usage = state::Summarize(track->second.usage);
    save->push_back(std::move(track->second.usage));
    usage_.erase(track);
  }
}

void Controller::FlushUsage() {
  std::vector<state::JobUsage> save;
  {
    MutexLock lock(&mu_);
    for (auto& entry : usage_) {
      UsageTrack& t = entry.second;
      if (!t.dirty) continue;
      save.push_back(t.usage);
      t.dirty = false;
    }
  }
  if (save.empty()) return;
  Status s = store_->SaveUsage(save);
  if (!s.ok()) {
    std::cerr << "hachi server: job usage not written (" << save.size()
              << " runs): " << s.message() << "\n";
    MutexLock lock(&mu_);
    for (const state::JobUsage& u : save) {
      if (auto t = usage_.find(u.job); t != usage_.end()) t->second.dirty = true;
    }
  }
}

Result<std::vector<state::JobUsage>> Controller::Usage(state::JobId id) {
  {
    MutexLock lock(&mu_);
    if (image_.jobs.count(id) == 0) return NotFound("no job " + std::to_string(id));
  }
  Result<std::vector<state::JobUsage>> runs = store_->LoadUsage(id);
  if (!runs.ok()) return runs.status();
  MutexLock lock(&mu_);
  auto track = usage_.find(id);
  if (track != usage_.end()) {  // newer than what was stored of it
    const state::JobUsage& now = track->second.usage;
    std::erase_if(
        *runs, [&](const state::JobUsage& u) { return u.start_time == now.start_time; });
    runs->push_back(now);
  }
  return runs;
}

}  // namespace hachi::server
