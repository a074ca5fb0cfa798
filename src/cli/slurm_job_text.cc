// The job fields Slurm's views share: squeue's and scontrol show job's words, counts and
// paths (slurm_format.cc, slurm_show_job.cc).
#include "cli/slurm_job_text.h"

#include <algorithm>

#include "cli/slurm_format.h"
#include "core/time_format.h"
#include "sched/dependencies.h"
#include "sched/gpu_share.h"

namespace hachi::cli::slurm_job {

using sched::ShareText;
using state::JobRecord;
using state::JobState;

namespace {

// The scheduler's pending reasons (sched/plan.cc's words) that Slurm lacks, in the word
// Slurm would print for the same wait; `hachi explain` keeps the detail.
constexpr std::pair<std::string_view, std::string_view> kSlurmReasons[] = {
    {"Held", "JobHeldUser"},  // a cycle's word for a job released since
    {"Fragmented", "Resources"},
    {"Isolation", "Resources"},  // whole-node and shared jobs kept apart
    {"MpsOtherUser", "Resources"},
    {"MigBusy", "Resources"},
    {"Preempting", "Resources"},         // waiting for what it preempts to end
    {"Reserved", "Priority"},            // nodes kept for a job ahead of it
    {"UserQuota", "QOSMaxGRESPerUser"},  // the user's GPUs at their limit
    {"AccountQuota", "AssocGrpGRES"},    // the account's
    {"NodesUnavailable", "ReqNodeNotAvail"},
    {"TimeWindow", "PartitionInactive"},  // its partition's window is closed
    {"Internal", "None"},
};

}  // namespace

std::string Or(std::string_view v, std::string_view fallback) {
  return std::string(v.empty() ? fallback : v);
}

std::string JobIdText(const JobRecord& j) {
  if (j.spec.array_task_id >= 0) {
    return std::to_string(j.spec.array_job_id) + "_" +
           std::to_string(j.spec.array_task_id);
  }
  return std::to_string(j.id);
}

std::vector<std::string> NodeNames(const JobRecord& j) {
  std::vector<std::string> names;
  for (const auto& a : j.allocations) names.push_back(a.node);
  return names;
}

// The pending reason word: the server's, in Slurm's words, or Slurm's defaults.
std::string PendingReason(const JobRecord& j) {
  // Who held it, as Slurm says: sbatch -H, uhold and a user's hold are the user's.
  if (j.held) return j.held_by_admin ? "JobHeldAdmin" : "JobHeldUser";
  if (j.reason.empty()) return "None";
  for (const auto& [ours, slurm] : kSlurmReasons) {
    if (j.reason == ours) return std::string(slurm);
  }
  return j.reason;
}

// Slurm's Reason word for a job that ended.
std::string EndReasonWord(const JobRecord& j) {
  switch (j.state) {
    case JobState::kFailed:
      return j.signal != 0 ? "RaisedSignal:" + std::to_string(j.signal)
                           : "NonZeroExitCode";
    case JobState::kTimeout:
      return "TimeLimit";
    case JobState::kNodeFail:
      return "NodeDown";
    case JobState::kOutOfMemory:
      return "OutOfMemory";
    case JobState::kDeadline:
      return "DeadLine";
    default:
      return "None";
  }
}

// A running job warned by its partition's idle-GPU policy: the server sets
// its reason to "idle GPUs: ...".
bool IdleWarned(const JobRecord& j) {
  return j.state == JobState::kRunning && j.reason.rfind("idle GPUs:", 0) == 0;
}

Duration RunTime(const JobRecord& j, Time now) {
  if (j.start_time == 0) return 0;
  if (j.state == JobState::kPending) return 0;
  Time end = j.state == JobState::kRunning ? now : j.end_time;
  return std::max<Duration>(0, end - j.start_time);
}

int NodeCount(const JobRecord& j) {
  return j.allocations.empty() ? j.req.nodes : static_cast<int>(j.allocations.size());
}

// CPUs and memory (MiB) on one node, as requested.
int ReqCpusPerNode(const JobRecord& j) {
  int c = j.req.cpus + j.req.cpus_per_gpu * j.req.GpusPerNode();
  return std::max(c, 1);
}
int64_t ReqMemPerNode(const JobRecord& j) {
  return j.req.memory_mib > 0 ? j.req.memory_mib
                              : j.req.memory_mib_per_gpu * j.req.GpusPerNode();
}
int TotalCpus(const JobRecord& j) {
  if (j.allocations.empty()) return ReqCpusPerNode(j) * j.req.nodes;
  int c = 0;
  for (const auto& a : j.allocations) c += a.cpus;
  return c;
}
int64_t TotalMem(const JobRecord& j) {
  if (j.allocations.empty()) return ReqMemPerNode(j) * j.req.nodes;
  int64_t m = 0;
  for (const auto& a : j.allocations) m += a.memory_mib;
  return m;
}

// GPUs of the whole job: "8", "16", a share as "0.25".
std::string GpusText(const JobRecord& j) {
  if (j.req.Shared()) return ShareText(j.req.gpu_share_milli);
  return std::to_string(j.req.TotalGpus());
}

std::string DependencyText(const JobRecord& j) {
  if (j.req.dependencies.empty()) return "(null)";
  std::string out;
  for (const auto& d : j.req.dependencies) {
    if (!out.empty()) out += ",";
    out += sched::DependencyKindName(d.kind);
    if (d.kind != sched::DependencyKind::kSingleton) out += ":" + std::to_string(d.job);
  }
  return out;
}

std::string TimeOrNa(Time t) { return t > 0 ? FormatSlurmLocal(t) : "N/A"; }

std::string LimitText(Duration d, bool hms) {
  if (d <= 0) return "N/A";
  return hms ? FormatHms(d) : FormatElapsed(d);
}

// Slurm's output-path patterns: %j %x %A %a %u %N %%; relative paths under workdir.
std::string ExpandPath(std::string_view pattern, const JobRecord& j) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 >= pattern.size()) {
      out += pattern[i];
      continue;
    }
    char c = pattern[++i];
    switch (c) {
      case 'j':
        out += std::to_string(j.id);
        break;
      case 'x':
        out += j.spec.name;
        break;
      case 'A':
        out += std::to_string(j.spec.array_task_id >= 0 ? j.spec.array_job_id : j.id);
        break;
      case 'a':
        out += j.spec.array_task_id >= 0 ? std::to_string(j.spec.array_task_id)
                                         : "4294967294";
        break;
      case 'u':
        out += j.req.user;
        break;
      case 'N':
        out += j.allocations.empty() ? "" : j.allocations[0].node;
        break;
      case '%':
        out += '%';
        break;
      default:
        out += '%';
        out += c;
    }
  }
  if (!out.empty() && out[0] != '/' && !j.spec.workdir.empty()) {
    out = j.spec.workdir + (j.spec.workdir.back() == '/' ? "" : "/") + out;
  }
  return out;
}

std::string JoinArgs(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += a;
  }
  return out;
}

}  // namespace hachi::cli::slurm_job
