// AgentDaemon's reports to the server: GPU health events, the GPU processes (and the
// soft memory limits of shares no MPS serves), usage samples, burn-in results and job
// exits, sent by the report thread until the server has acknowledged them.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agent/agent_http.h"
#include "agent/daemon.h"
#include "agent/gpu_processes.h"
#include "api/protocol_json.h"

namespace hachi::agent {

void AgentDaemon::ReportHealth(const api::GpuHealthEvent& e) {
  MutexLock lock(&mu_);
  if (health_.size() >= kHealthQueued) health_.erase(health_.begin());  // bounded
  health_.push_back(e);
  cv_.SignalAll();
}

namespace {

// The same processes, each within 256 MiB of its memory: the server hears of a job's
// GPU memory as it grows (its peak against its promise), not of every MiB.
bool SameProcesses(const std::vector<api::GpuProcessReport>& a,
                   const std::vector<api::GpuProcessReport>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const api::GpuProcessReport& x, const api::GpuProcessReport& y) {
                      return x.gpu == y.gpu && x.pid == y.pid && x.job == y.job &&
                             std::abs(x.used_mib - y.used_mib) < 256;
                    });
}

}  // namespace

void AgentDaemon::ReportProcesses(std::vector<api::GpuProcessReport> processes) {
  std::vector<std::pair<state::JobId, std::string>> over;
  {
    MutexLock lock(&mu_);
    if (!soft_limits_.empty()) {
      std::map<state::JobId, ShareMemoryLimit> limits;
      for (const auto& [job, l] : soft_limits_) {
        if (!l.stopped) limits[job] = ShareMemoryLimit{l.gpu, l.promised_mib};
      }
      over = OverSoftLimit(processes, limits);
      for (const auto& [job, why] : over) soft_limits_[job].stopped = true;
    }
  }
  for (const auto& [job, why] : over) {
    std::cerr << "hachi agent: " << options_.node << ": job " << job << ": " << why
              << ": stopping it\n";
    launcher_->Stop(job, api::ExitKind::kOutOfMemory, why);
  }
  MutexLock lock(&mu_);
  const Time now = options_.clock->Now();
  const bool changed = !SameProcesses(processes, processes_);
  const bool refresh = !processes.empty() && now - processes_sent_at_ >= 60;
  processes_ = std::move(processes);
  if (changed || refresh) {
    processes_due_ = true;
    cv_.SignalAll();
  }
}

bool AgentDaemon::SendHealth(HttpClientHolder& http, const std::string& base,
                             const std::vector<api::GpuHealthEvent>& health,
                             bool send_processes,
                             const std::vector<api::GpuProcessReport>& processes,
                             const std::vector<state::JobUsageSample>& usage) {
  // GPU faults first: the server takes the GPU out before it hears of the exits the
  // fault caused. A report it refuses (400: an index it does not know) is dropped.
  api::AgentHealth report{instance_, health, send_processes, processes, usage};
  Result<std::string> r =
      http.Call("POST", base + "/health", api::AgentHealthToJson(report), 10000);
  if (!r.ok() && r.status().code() == StatusCode::kInvalidArgument && !usage.empty()) {
    // A server older than the usage samples refuses the whole report:
    // the GPU faults go again without them, and this agent stops sampling.
    std::fprintf(stderr,
                 "hachi agent: the server refused job usage samples (%s); sending "
                 "none from now on\n",
                 r.status().message().c_str());
    report.usage.clear();
    r = http.Call("POST", base + "/health", api::AgentHealthToJson(report), 10000);
    MutexLock lock(&mu_);
    usage_refused_ = true;
    usage_.clear();
  }
  MutexLock lock(&mu_);
  if (r.ok() || r.status().code() == StatusCode::kInvalidArgument) {
    if (send_processes) {
      processes_sent_at_ = options_.clock->Now();
      processes_due_ = !SameProcesses(processes, processes_);
    }
    if (!r.ok()) {
      std::fprintf(stderr, "hachi agent: the server refused a GPU health report: %s\n",
                   r.status().message().c_str());
    }
    health_.erase(health_.begin(), health_.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                         health.size(), health_.size())));
    for (const state::JobUsageSample& u : usage) {
      auto it = usage_.find(u.job);
      if (it != usage_.end() && it->second.at == u.at) usage_.erase(it);  // not newer
    }
    return true;
  }
  if (r.status().code() == StatusCode::kNotFound) registered_ = false;
  return false;
}

bool AgentDaemon::SendBurnIn(HttpClientHolder& http, const std::string& base,
                             const std::vector<api::BurnInReport>& burn_in) {
  // A refused burn-in report (400) is dropped; the server fails a run it never
  // hears of at its timeout.
  bool sent_all = true;
  for (const api::BurnInReport& b : burn_in) {
    Result<std::string> r =
        http.Call("POST", base + "/burn-in", api::BurnInReportToJson(b), 10000);
    if (!r.ok() && r.status().code() != StatusCode::kInvalidArgument) {
      MutexLock lock(&mu_);
      if (r.status().code() == StatusCode::kNotFound) registered_ = false;
      sent_all = false;
      break;
    }
    MutexLock lock(&mu_);
    if (!burn_in_reports_.empty()) burn_in_reports_.erase(burn_in_reports_.begin());
  }
  return sent_all;
}

void AgentDaemon::ReportLoop() {
  HttpClientHolder http(options_.server, options_.cluster_secret, options_.epoch_floor);
  const std::string base = std::string(api::kApiPrefix) + "/agents/" + options_.node;
  const std::string path = base + "/exits";
  int backoff_ms = 100;
  for (;;) {
    std::vector<api::JobExit> batch;
    std::vector<api::GpuHealthEvent> health;
    bool send_processes = false;
    std::vector<api::GpuProcessReport> processes;
    std::vector<state::JobUsageSample> usage;
    std::vector<api::BurnInReport> burn_in;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && ready_.empty() && !(ReportDueLocked() && registered_)) {
        cv_.Wait();
      }
      if (!ready_.empty() &&
          !stopping_) {  // runs that waited for their job's earlier run
        std::vector<api::LaunchSpec> ready, now;
        ready.swap(ready_);
        for (api::LaunchSpec& l : ready) {
          if (AcceptRunLocked(l)) now.push_back(std::move(l));  // else launched already
        }
        lock.Unlock();
        for (const api::LaunchSpec& l : now) LaunchNow(l);
        continue;
      }
      if (!ReportDueLocked() || !registered_) {
        if (stopping_) return;
        continue;
      }
      burn_in = burn_in_reports_;
      // An exit not dated yet on the monotonic clock (one queued without OnExit) ended
      // about now.
      const int64_t mono = options_.clock->MonotonicMs();
      for (api::JobExit& e : unreported_) {
        if (e.ended_mono_ms == 0) e.ended_mono_ms = mono;
      }
      batch = unreported_;
      health = health_;
      send_processes = processes_due_;
      if (send_processes) processes = processes_;
      for (const auto& [job, u] : usage_) usage.push_back(u);
    }
    const bool sent =
        ((health.empty() && !send_processes && usage.empty()) ||
         SendHealth(http, base, health, send_processes, processes, usage)) &&
        (burn_in.empty() || SendBurnIn(http, base, burn_in));
    if (!sent) {
      MutexLock lock(&mu_);
      if (stopping_) return;
      BackoffLocked(&backoff_ms);
      continue;
    }
    if (batch.empty()) continue;
    const int64_t sent_at = options_.clock->MonotonicMs();
    for (api::JobExit& e : batch) {
      e.ended_ago_ms = std::max<int64_t>(0, sent_at - e.ended_mono_ms);
    }
    Result<std::string> r = http.Call("POST", path, api::JobExitsToJson(batch), 10000);
    MutexLock lock(&mu_);
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kNotFound) registered_ = false;
      if (stopping_) return;
      BackoffLocked(&backoff_ms);
      continue;
    }
    backoff_ms = 100;
    RenewLeaseLocked(sent_at);
    // Acknowledged: remember them (a repeated launch re-reports), drop from the queue.
    for (const api::JobExit& e : batch) {
      if (finished_.emplace(e.job, e).second) finished_order_.push_back(e.job);
    }
    while (finished_order_.size() > kFinishedKept) {
      finished_.erase(finished_order_.front());
      finished_order_.pop_front();
    }
    unreported_.erase(unreported_.begin(),
                      unreported_.begin() + static_cast<std::ptrdiff_t>(batch.size()));
    cv_.SignalAll();  // CancelAll waits for the queue to empty
  }
}

}  // namespace hachi::agent
