// AgentDaemon's usage sampling (state/usage.h, docs/efficiency.md): every
// usage_interval_ms a sample of each running job, queued for the report thread.
#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "agent/daemon.h"
#include "agent/job_usage.h"

namespace hachi::agent {

void AgentDaemon::UsageLoop() {
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (WaitStoppingLocked(std::chrono::milliseconds(options_.usage_interval_ms))) {
        return;
      }
    }
    SampleUsage();
  }
}

void AgentDaemon::SampleUsage() {
  std::vector<std::pair<state::JobId, Time>> runs;
  {
    MutexLock lock(&mu_);
    if (usage_refused_) return;
    for (const auto& [job, start] : live_) runs.emplace_back(job, start);
  }
  if (runs.empty()) return;
  const std::vector<state::GpuSample> gpus =
      options_.sample_gpus ? options_.sample_gpus() : std::vector<state::GpuSample>{};
  const Time now = options_.clock->Now();
  std::vector<state::JobUsageSample> samples;
  for (const auto& [job, start] : runs) {
    std::optional<StepContext> c = launcher_->StepContextOf(job, start);
    if (!c) continue;  // adopted (its launch unknown) or stopping
    state::JobUsageSample u = JobSample(job, start, now, c->spec.gpus.Indices(), gpus,
                                        ReadCgroupUse(c->cgroup_procs));
    // Nothing measured (simulated GPUs without cgroups): nothing to send.
    if (u.gpus.empty() && u.cpu_usec < 0 && u.mem_mib < 0) continue;
    samples.push_back(std::move(u));
  }
  MutexLock lock(&mu_);
  if (usage_refused_) return;
  for (state::JobUsageSample& u : samples) {
    if (live_.count(u.job) == 0) continue;  // exited meanwhile
    usage_[u.job] = std::move(u);
  }
  if (!usage_.empty()) cv_.SignalAll();
}

}  // namespace hachi::agent
