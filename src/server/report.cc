// `hachi report` on the server (issue 21, docs/efficiency.md): GPU-hours from the job
// records, counted under the lock without copying them (a record is a few KB; a
// report over 100,000 finished jobs adds numbers, it does not need their scripts).
#include <map>
#include <string>

#include "server/controller.h"

namespace hachi::server {

state::GpuReport Controller::Report(const state::ReportQuery& q) const {
  MutexLock lock(&mu_);
  std::map<std::string, std::string> groups;
  if (q.by == state::ReportBy::kNodeGroup) {
    for (const auto& [name, hw] : hardware_) groups[name] = hw.gpu_model;
  }
  state::GpuReportBuilder report(q, options_.clock->Now(), &groups);
  for (const auto& [id, job] : image_.jobs) {
    // A running job's summary is set when its run ends: until then it is in usage_.
    auto track = usage_.find(id);
    if (job.state == state::JobState::kRunning && track != usage_.end()) {
      report.Add(job, state::Summarize(track->second.usage));
    } else {
      report.Add(job, job.usage);
    }
  }
  return report.Finish();
}

}  // namespace hachi::server
