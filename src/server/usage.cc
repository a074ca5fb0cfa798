// Job usage on the server (issue 21, docs/efficiency.md): the agents' samples summed
// into each running job's current run (state/usage.h), the summary put on the run's
// JobEnded, the runs written to the store's usage table (at the end, and every
// usage_flush_s while they run), and read back for GET /jobs/ID/usage.
#include <iostream>
#include <variant>

#include "server/controller.h"

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
      UsageTrack t{NewUsage(job->second), true};
      // A run that began before this server process: resume what was stored of it.
      if (Result<std::vector<state::JobUsage>> stored = store_->LoadUsage(s.job);
          stored.ok()) {
        for (state::JobUsage& u : *stored) {
          if (u.start_time == s.start_time) t.usage = std::move(u);
        }
      }
      track = usage_.insert_or_assign(s.job, std::move(t)).first;
    }
    if (state::AddSample(&track->second.usage, node, s)) track->second.dirty = true;
    NoteGpuUtilLocked(node, s);
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
