#include "server/usage_service.h"

#include <algorithm>
#include <ctime>
#include <iostream>
#include <variant>

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

const state::JobRecord* RunningJob(const state::StateImage& image, state::JobId id) {
  auto job = image.jobs.find(id);
  return job == image.jobs.end() || job->second.state != state::JobState::kRunning
             ? nullptr
             : &job->second;
}

}  // namespace

UsageService::UsageService(Ledger* ledger, const config::ClusterConfig* config,
                           const Clock* clock)
    : OnLedger(ledger), config_(config), clock_(clock) {}

void UsageService::ResumeLocked() {
  for (const state::JobId id : ledger_->active()) {
    const state::JobRecord* job = RunningJob(ledger_->image(), id);
    if (job == nullptr) continue;
    Result<std::vector<state::JobUsage>> stored = ledger_->LoadUsage(id);
    if (!stored.ok()) {
      std::cerr << "hachi server: job " << id
                << "'s usage so far not read: " << stored.status().message() << "\n";
      continue;
    }
    for (state::JobUsage& u : *stored) {
      if (u.start_time == job->start_time) runs_[id] = Track{std::move(u), false};
    }
  }
}

void UsageService::AddSamplesLocked(const std::string& node,
                                    const std::vector<state::JobUsageSample>& samples) {
  for (const state::JobUsageSample& s : samples) {
    const state::JobRecord* job = RunningJob(ledger_->image(), s.job);
    if (job == nullptr || job->start_time != s.start_time) {
      continue;  // an ended or requeued run's late sample
    }
    auto track = runs_.find(s.job);
    if (track == runs_.end() || track->second.usage.start_time != s.start_time) {
      // A run's first sample (a run from before a restart was resumed at start).
      track = runs_.insert_or_assign(s.job, Track{NewUsage(*job), true}).first;
    }
    Track& t = track->second;
    if (!state::AddSample(&t.usage, node, s)) continue;
    t.dirty = true;
    NoteGpuUtilLocked(node, s);  // the node's gpu_util (the dashboard's shading)
    // Each GPU's latest figures, and whether the run is idle by its partition's policy.
    if (t.latest.size() != t.usage.gpus.size()) {
      t.latest.clear();
      for (const state::GpuUsage& g : t.usage.gpus) t.latest.push_back({g.node, g.gpu});
    }
    for (const state::GpuSample& g : s.gpus) {
      for (Track::Latest& l : t.latest) {
        if (l.node == node && l.gpu == g.gpu) {
          l.util = g.util;
          l.mem_mib = g.mem_mib;
        }
      }
    }
    const config::IdleGpuPolicy* policy = IdlePolicy(job->req.partition);
    if (policy == nullptr) continue;
    const bool idle =
        !t.latest.empty() &&
        std::all_of(t.latest.begin(), t.latest.end(), [&](const Track::Latest& l) {
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

std::optional<state::UsageSummary> UsageService::SoFarLocked(state::JobId id) const {
  auto t = runs_.find(id);
  if (t == runs_.end()) return std::nullopt;
  return state::Summarize(t->second.usage);
}

int UsageService::GpuUtilLocked(const std::string& node, int gpu, state::JobId job,
                                Time start_time) const {
  auto util = gpu_util_.find(node);
  if (util == gpu_util_.end() || gpu < 0 ||
      gpu >= static_cast<int>(util->second.size())) {
    return -1;
  }
  const GpuUtilSeen& u = util->second[gpu];
  return u.job == job && u.start_time == start_time ? u.util : -1;
}

void UsageService::GaugesLocked(ClusterGauges* g) const {
  for (const auto& entry : runs_) {
    const state::JobRecord* job = RunningJob(ledger_->image(), entry.first);
    if (job == nullptr) continue;
    if (entry.second.usage.idle_warned) ++g->idle_jobs;
    for (const Track::Latest& l : entry.second.latest) {
      g->job_gpus.push_back({entry.first, job->req.user, job->req.account, l.node, l.gpu,
                             l.util, l.mem_mib});
    }
  }
}

const config::IdleGpuPolicy* UsageService::IdlePolicy(
    const std::string& partition) const {
  if (config_ == nullptr) return nullptr;
  for (const config::PartitionConfig& p : config_->partitions) {
    if (p.partition.name == partition) return p.idle.after > 0 ? &p.idle : nullptr;
  }
  return nullptr;
}

std::string UsageService::IdleNoteLocked(const state::JobRecord& job) const {
  auto t = runs_.find(job.id);
  if (t == runs_.end() || !t->second.usage.idle_warned) return "";
  const config::IdleGpuPolicy* policy = IdlePolicy(job.req.partition);
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

std::vector<UsageService::IdleVerdict> UsageService::DueIdleLocked(Time now) {
  std::vector<IdleVerdict> due;
  // On the scheduling cycle's path: nothing to scan unless a partition has a policy.
  if (config_ == nullptr ||
      std::none_of(config_->partitions.begin(), config_->partitions.end(),
                   [](const config::PartitionConfig& p) { return p.idle.after > 0; })) {
    return due;
  }
  for (auto& entry : runs_) {
    state::JobUsage& u = entry.second.usage;
    if (u.idle_since == 0 || u.idle_warned) continue;
    const state::JobRecord* job = RunningJob(ledger_->image(), entry.first);
    if (job == nullptr) continue;
    const config::IdleGpuPolicy* policy = IdlePolicy(job->req.partition);
    if (policy == nullptr || now - u.idle_since < policy->after) continue;
    u.idle_warned = true;
    entry.second.dirty = true;
    due.push_back({entry.first, policy->action, IdleNoteLocked(*job)});
  }
  return due;
}

void UsageService::NoteGpuUtilLocked(const std::string& node,
                                     const state::JobUsageSample& s) {
  std::vector<GpuUtilSeen>& seen = gpu_util_[node];
  for (const state::GpuSample& g : s.gpus) {
    if (g.gpu < 0 || g.gpu >= GpuSet::kMaxGpus || g.util < 0) continue;
    if (g.gpu >= static_cast<int>(seen.size())) seen.resize(g.gpu + 1);
    seen[g.gpu] = GpuUtilSeen{s.job, s.start_time, g.util};
  }
}

void UsageService::Seal(Ledger::Batch* batch) {
  ledger_->mu().AssertHeld();
  for (state::Edit& e : batch->edits) {
    state::JobId id = 0;
    state::JobEnded* end = std::get_if<state::JobEnded>(&e);
    if (end != nullptr) {
      id = end->id;
    } else if (const auto* r = std::get_if<state::JobRequeued>(&e)) {
      id = r->id;
    } else {
      continue;
    }
    auto track = runs_.find(id);
    if (track == runs_.end()) continue;
    if (end != nullptr) end->usage = state::Summarize(track->second.usage);
    batch->usage.push_back(std::move(track->second.usage));
    runs_.erase(track);
  }
}

void UsageService::Aborted(Ledger::Batch* batch) {
  ledger_->mu().AssertHeld();
  for (state::JobUsage& u : batch->usage) {  // the runs go on: their usage too
    const state::JobId id = u.job;
    runs_[id] = Track{std::move(u), true};
  }
}

void UsageService::Flush() {
  std::vector<state::JobUsage> save;
  {
    MutexLock lock(&ledger_->mu());
    for (auto& entry : runs_) {
      Track& t = entry.second;
      if (!t.dirty) continue;
      save.push_back(t.usage);
      t.dirty = false;
    }
  }
  if (save.empty()) return;
  Status s = ledger_->SaveUsage(save);
  if (!s.ok()) {
    std::cerr << "hachi server: job usage not written (" << save.size()
              << " runs): " << s.message() << "\n";
    MutexLock lock(&ledger_->mu());
    for (const state::JobUsage& u : save) {
      if (auto t = runs_.find(u.job); t != runs_.end()) t->second.dirty = true;
    }
  }
}

Result<std::vector<state::JobUsage>> UsageService::Runs(state::JobId id) {
  {
    MutexLock lock(&ledger_->mu());
    if (ledger_->image().jobs.count(id) == 0) {
      return NotFound("no job " + std::to_string(id));
    }
  }
  Result<std::vector<state::JobUsage>> runs = ledger_->LoadUsage(id);
  if (!runs.ok()) return runs.status();
  MutexLock lock(&ledger_->mu());
  auto track = runs_.find(id);
  if (track != runs_.end()) {  // newer than what was stored of it
    const state::JobUsage& now = track->second.usage;
    std::erase_if(
        *runs, [&](const state::JobUsage& u) { return u.start_time == now.start_time; });
    runs->push_back(now);
  }
  return runs;
}

// Counted under the lock without copying the records (a record is a few KB; a report
// over 100,000 finished jobs adds numbers, it does not need their scripts).
report::GpuReport UsageService::ReportLocked(
    const report::ReportQuery& q, const std::map<std::string, std::string>& groups,
    const std::map<std::string, double>& prices) const {
  report::GpuReportBuilder report(q, clock_->Now(), &groups, &prices);
  for (const auto& [id, job] : ledger_->image().jobs) {
    // A running job's summary is set when its run ends: until then it is here.
    auto track = runs_.find(id);
    if (job.state == state::JobState::kRunning && track != runs_.end()) {
      report.Add(job, state::Summarize(track->second.usage));
    } else {
      report.Add(job, job.usage);
    }
  }
  return report.Finish();
}

}  // namespace hachi::server
