#include "cli/slurm_format.h"

#include <algorithm>
#include <cstdio>

#include "cli/slurm_job_text.h"
#include "cli/table.h"
#include "core/hostlist.h"
#include "core/printable.h"
#include "core/strings.h"
#include "core/time_format.h"

namespace hachi::cli {
namespace {

using slurm_job::DependencyText;
using slurm_job::EndReasonWord;
using slurm_job::GpusText;
using slurm_job::IdleWarned;
using slurm_job::JobIdText;
using slurm_job::LimitText;
using slurm_job::NodeCount;
using slurm_job::NodeNames;
using slurm_job::Or;
using slurm_job::PendingReason;
using slurm_job::ReqMemPerNode;
using slurm_job::RunTime;
using slurm_job::TimeOrNa;
using slurm_job::TotalCpus;
using state::JobRecord;
using state::JobState;
using state::NodeStatus;

std::string_view StateName(JobState s) { return state::JobStateName(s); }
std::string_view StateCode(JobState s) { return state::JobStateCode(s); }

std::string QueueTitle(char code) {
  switch (code) {
    case 'i':
      return "JOBID";
    case 'F':
      return "ARRAY_JOB_ID";
    case 'K':
      return "ARRAY_TASK_ID";
    case 'P':
      return "PARTITION";
    case 'j':
      return "NAME";
    case 'u':
      return "USER";
    case 'a':
      return "ACCOUNT";
    case 'q':
      return "QOS";
    case 't':
      return "ST";
    case 'T':
      return "STATE";
    case 'M':
      return "TIME";
    case 'l':
      return "TIME_LIMIT";
    case 'L':
      return "TIME_LEFT";
    case 'D':
      return "NODES";
    case 'R':
      return "NODELIST(REASON)";
    case 'r':
      return "REASON";
    case 'N':
      return "NODELIST";
    case 'C':
      return "CPUS";
    case 'm':
      return "MIN_MEMORY";
    case 'V':
      return "SUBMIT_TIME";
    case 'S':
      return "START_TIME";
    case 'e':
      return "END_TIME";
    case 'b':
      return "GPUS";
    case 'k':
      return "COMMENT";
    case 'Z':
      return "WORK_DIR";
    case 'E':
      return "DEPENDENCY";
    case 'f':
      return "FEATURES";
  }
  return "?";
}

std::string QueueValue(const JobRecord& j, Time now, char code) {
  const bool pending = j.state == JobState::kPending;
  switch (code) {
    case 'i':
      return JobIdText(j);
    case 'F':
      return std::to_string(j.spec.array_task_id >= 0 ? j.spec.array_job_id : j.id);
    case 'K':
      return j.spec.array_task_id >= 0 ? std::to_string(j.spec.array_task_id) : "N/A";
    case 'P':
      return j.req.partition;
    case 'j':
      return PrintableText(j.spec.name);
    case 'u':
      return j.req.user;
    case 'a':
      return Or(j.req.account, "(null)");
    case 'q':
      return Or(j.req.qos, "(null)");
    case 't':
      return std::string(StateCode(j.state));
    case 'T':
      return std::string(StateName(j.state));
    case 'M':
      return FormatElapsed(RunTime(j, now));
    case 'l':
      return LimitText(j.req.time_limit, false);
    case 'L':
      if (j.req.time_limit <= 0) return "N/A";
      if (state::IsFinal(j.state)) return "0:00";
      return FormatElapsed(std::max<Duration>(0, j.req.time_limit - RunTime(j, now)));
    case 'D':
      return std::to_string(NodeCount(j));
    case 'R':
      if (pending || j.allocations.empty()) {
        return "(" + (pending ? PendingReason(j) : EndReasonWord(j)) + ")";
      }
      // A running job its partition's idle-GPU policy warned about.
      return CompressHostList(NodeNames(j)) + (IdleWarned(j) ? " (IdleGpus)" : "");
    case 'r':
      if (IdleWarned(j)) return "IdleGpus";
      return pending ? PendingReason(j) : EndReasonWord(j);
    case 'N':
      return CompressHostList(NodeNames(j));
    case 'C':
      return std::to_string(TotalCpus(j));
    case 'm':
      return std::to_string(ReqMemPerNode(j)) + "M";
    case 'V':
      return TimeOrNa(j.submit_time);
    case 'S':
      return pending ? "N/A" : TimeOrNa(j.start_time);
    case 'e':
      if (j.state == JobState::kRunning && j.req.time_limit > 0) {
        return FormatSlurmLocal(j.start_time + j.req.time_limit);
      }
      return state::IsFinal(j.state) ? TimeOrNa(j.end_time) : "N/A";
    case 'b':
      return GpusText(j);
    case 'k':
      return Or(PrintableText(j.spec.comment), "(null)");
    case 'Z':
      return j.spec.workdir;
    case 'E':
      return DependencyText(j);
    case 'f':  // -C/--constraint as given
      return Or(j.req.constraint, "(null)");
  }
  return "";
}

}  // namespace

// Slurm front-ends (cli/slurm/): squeue's codes one at a time.
std::string QueueFieldTitle(char code) { return QueueTitle(code); }
std::string QueueFieldValue(const JobRecord& j, Time now, char code) {
  return QueueValue(j, now, code);
}

// ---- pieces ----

namespace {

// [D-]HH:MM:SS; without days, hours are left out when zero unless `always_hours`.
std::string FormatClock(Duration d, bool always_hours) {
  if (d < 0) d = 0;
  long long days = d / kDay, h = (d % kDay) / kHour, m = (d % kHour) / kMinute,
            s = d % kMinute;
  char buf[48];
  if (days > 0) {
    std::snprintf(buf, sizeof buf, "%lld-%02lld:%02lld:%02lld", days, h, m, s);
  } else if (h > 0) {
    std::snprintf(buf, sizeof buf,
                  always_hours ? "%02lld:%02lld:%02lld" : "%lld:%02lld:%02lld", h, m, s);
  } else if (always_hours) {
    std::snprintf(buf, sizeof buf, "00:%02lld:%02lld", m, s);
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", m, s);
  }
  return buf;
}

}  // namespace

std::string FormatElapsed(Duration d) { return FormatClock(d, false); }

std::string FormatHms(Duration d) { return FormatClock(d, true); }

// ---- queue ----

Result<std::vector<JobState>> ParseStateList(std::string_view csv) {
  std::vector<JobState> out;
  for (std::string_view item : Split(csv, ',')) {
    std::string want = ToLower(Trim(item));
    if (want == "all") {
      out.assign(std::begin(state::kAllJobStates), std::end(state::kAllJobStates));
      return out;
    }
    JobState parsed;
    if (state::ParseJobState(want, &parsed)) {
      out.push_back(parsed);
    } else {
      return InvalidArgument(
          "--states '" + std::string(csv) + "': '" + std::string(item) +
          "' is not a job state (use PD, R, CD, F, CA, TO, NF, OOM or all)");
    }
  }
  return out;
}

std::vector<JobRecord> FilterJobs(const std::vector<JobRecord>& jobs,
                                  const QueueFilter& f) {
  auto has = [](const auto& list, const auto& v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  std::vector<JobRecord> out;
  for (const JobRecord& j : jobs) {
    bool state_ok = f.states.empty() ? !state::IsFinal(j.state) : has(f.states, j.state);
    bool id_ok = f.ids.empty() || has(f.ids, j.id) ||
                 (j.spec.array_task_id >= 0 && has(f.ids, j.spec.array_job_id));
    if (state_ok && id_ok && has(f.users, j.req.user) &&
        has(f.partitions, j.req.partition)) {
      out.push_back(j);
    }
  }
  return out;
}

void SortForQueue(std::vector<JobRecord>* jobs) {
  std::stable_sort(jobs->begin(), jobs->end(),
                   [](const JobRecord& a, const JobRecord& b) {
                     if (a.req.partition != b.req.partition)
                       return a.req.partition < b.req.partition;
                     if (StateCode(a.state) != StateCode(b.state))
                       return StateCode(a.state) < StateCode(b.state);
                     return a.id < b.id;
                   });
}

Result<std::string> FormatQueue(const std::vector<JobRecord>& jobs, Time now,
                                std::string_view format) {
  if (format.empty()) format = kDefaultQueueFormat;
  Result<std::vector<FormatItem>> items =
      ParseFormatString(format, "iFKPjuaqtTMlLDRrNCmVSebkZE");
  if (!items.ok()) return items.status();
  std::string out = RenderFormatLine(*items, QueueTitle) + "\n";
  for (const JobRecord& j : jobs) {
    out += RenderFormatLine(*items, [&](char c) { return QueueValue(j, now, c); }) + "\n";
  }
  return out;
}

// ---- stats ----

std::string FormatStats(const report::JobStats& s) {
  std::string o = "Jobs in the last " + FormatDuration(s.window) + ", as of " +
                  FormatSlurmLocal(s.now) + "\n";
  Table t({{"PARTITION"},
           {"GPUS", Align::kRight},
           {"STARTED", Align::kRight},
           {"PENDING", Align::kRight},
           {"HELD", Align::kRight},
           {"WAIT_P50", Align::kRight},
           {"WAIT_P95", Align::kRight},
           {"GPU_HOURS", Align::kRight},
           {"ALERT"}});
  auto hours = [](double secs) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", secs / 3600.0);
    return std::string(buf);
  };
  auto add = [&](const report::WaitStats& w, const std::string& alert) {
    std::string gpus = w.gpus < 0 ? "all" : w.gpus == 0 ? "<1" : std::to_string(w.gpus);
    bool waits = w.samples > 0;
    t.AddRow({Or(w.partition, "(none)"), gpus, std::to_string(w.started),
              std::to_string(w.pending), std::to_string(w.held),
              waits ? FormatDuration(w.wait_p50) : "-",
              waits ? FormatDuration(w.wait_p95) : "-", hours(w.gpu_seconds), alert});
  };
  for (const report::PartitionStats& p : s.partitions) {
    add(p.all, p.alert ? "median wait over " + FormatDuration(s.alert_threshold) : "");
    for (const report::WaitStats& w : p.by_gpus) add(w, "");
  }
  o += s.partitions.empty() ? "no jobs\n" : t.Render();
  // A flagged partition's likely cause, then the other explanations the numbers support
  // (report/stats_cause.h; the server sends them when it knows the partition).
  auto cause_name = [](const std::string& kind) -> std::string {
    if (kind == "user_burst") return "one user's burst";
    if (kind == "too_few_nodes") return "too few nodes";
    return kind;
  };
  for (const report::PartitionStats& p : s.partitions) {
    if (!p.alert || p.causes.empty()) continue;
    o += Or(p.all.partition, "(none)") + ": median wait " +
         FormatDuration(p.all.wait_p50) + " > " + FormatDuration(s.alert_threshold) +
         "; likely cause: " + cause_name(p.causes[0].kind) + ": " + p.causes[0].text +
         "\n";
    for (size_t i = 1; i < p.causes.size(); ++i) {
      o += "  also: " + cause_name(p.causes[i].kind) + ": " + p.causes[i].text + "\n";
    }
  }
  if (s.utilisation >= 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "GPU utilisation: %.1f%% of %d GPUs (%.1f of %.1f GPU-hours)\n",
                  s.utilisation * 100.0, s.total_gpus, s.gpu_seconds / 3600.0,
                  static_cast<double>(s.total_gpus) * s.window / 3600.0);
    o += buf;
  } else {
    o += "GPU time used: " + hours(s.gpu_seconds) + " GPU-hours\n";
  }
  return o;
}

}  // namespace hachi::cli
