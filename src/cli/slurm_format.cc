#include "cli/slurm_format.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "api/clock_offset.h"
#include "cli/slurm_job_text.h"
#include "cli/table.h"
#include "core/hostlist.h"
#include "core/printable.h"
#include "core/strings.h"
#include "core/time_format.h"
#include "sched/gpu_share.h"
#include "topo/topology_file.h"

namespace hachi::cli {
namespace {

using sched::ShareText;
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

// ---- nodes ----

struct GpuCounts {
  int alloc = 0, idle = 0, other = 0, total = 0;
  int busy_whole = 0;  // held by a job, whole or fully shared
  int partial = 0;     // shared, with room left
};

GpuCounts CountGpus(const NodeStatus& n) {
  GpuCounts c;
  c.total = n.gpus;
  const bool unavailable = n.record.state != state::NodeState::kUp;
  for (int g = 0; g < n.gpus; ++g) {
    const bool used = g < static_cast<int>(n.gpu_jobs.size()) && n.gpu_jobs[g] != 0;
    const int share =
        g < static_cast<int>(n.gpu_share_milli.size()) ? n.gpu_share_milli[g] : 0;
    if (used) {
      ++c.alloc;
      if (share > 0 && share < 1000) ++c.partial;
    } else if (unavailable || n.record.unhealthy.contains(g)) {
      ++c.other;
    } else {
      ++c.idle;
    }
  }
  return c;
}

std::string GresText(const NodeStatus& n) {
  if (n.gpus == 0) return "(null)";
  // A GRES type as admins write them: "NVIDIA H100 80GB HBM3" -> "h100",
  // "NVIDIA A100-SXM4-80GB" -> "a100", "NVIDIA GeForce RTX 4090" -> "rtx4090".
  std::string model = ToLower(n.gpu_model);
  for (std::string_view p : {"nvidia ", "geforce ", "tesla "}) {
    if (StartsWith(model, p)) model = model.substr(p.size());
  }
  std::replace(model.begin(), model.end(), '-', ' ');
  std::vector<std::string_view> words;
  for (std::string_view w : Split(model, ' ')) {
    if (!w.empty()) words.push_back(w);
  }
  auto has_digit = [](std::string_view w) {
    return std::any_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  model = words.empty() ? "" : std::string(words[0]);
  if (words.size() > 1 && !has_digit(words[0])) model += words[1];
  return model.empty() ? "gpu:" + std::to_string(n.gpus)
                       : "gpu:" + model + ":" + std::to_string(n.gpus);
}

std::string NodeTitle(char code) {
  switch (code) {
    case 'N':
      return "NODELIST";
    case 'n':
      return "HOSTNAMES";
    case 'P':
      return "PARTITION";
    case 't':
    case 'T':
      return "STATE";
    case 'G':
      return "GRES";
    case 'j':
      return "GPUS(A/I/O/T)";
    case 'C':
      return "CPUS(A/I/O/T)";
    case 'c':
      return "CPUS";
    case 'm':
      return "MEMORY";
    case 'e':
      return "FREE_MEM";
    case 'O':
      return "CPU_LOAD";
    case 'E':
      return "REASON";
    case 'D':
      return "NODES";
    case 'o':
      return "NODE_ADDR";
  }
  return "?";
}

std::string NodeValue(const NodeStatus& n, char code) {
  const state::NodeRecord& r = n.record;
  switch (code) {
    case 'N':
    case 'n':
      return r.name;
    case 'P': {
      std::string out;
      for (const auto& p : n.partitions) out += (out.empty() ? "" : ",") + p;
      return Or(out, "(none)");
    }
    case 't':  // hachi nodes says burn-in where sinfo says drain
      return InBurnIn(n) ? "burn-in" : NodeStateText(n, false);
    case 'T':
      return InBurnIn(n) ? "burn-in" : NodeStateText(n, true);
    case 'G':
      return GresText(n);
    case 'j': {
      GpuCounts c = CountGpus(n);
      return std::to_string(c.alloc) + "/" + std::to_string(c.idle) + "/" +
             std::to_string(c.other) + "/" + std::to_string(c.total);
    }
    case 'C': {
      int alloc = std::min(n.alloc_cpus, r.cpus);
      int rest = r.cpus - alloc;
      bool other = r.state != state::NodeState::kUp;
      return std::to_string(alloc) + "/" + std::to_string(other ? 0 : rest) + "/" +
             std::to_string(other ? rest : 0) + "/" + std::to_string(r.cpus);
    }
    case 'c':
      return std::to_string(r.cpus);
    case 'm':
      return std::to_string(r.memory_mib);
    case 'e':
      return std::to_string(std::max<int64_t>(0, r.memory_mib - n.alloc_memory_mib));
    case 'O':
      return "N/A";
    case 'E':
      return Or(r.state_reason, "none");
    case 'D':
      return "1";
    case 'o':
      return Or(r.address, "(null)");
    case 'f': {  // AVAIL_FEATURES
      std::string out;
      for (const std::string& f : n.features) out += (out.empty() ? "" : ",") + f;
      return Or(out, "(null)");
    }
  }
  return "";
}

}  // namespace

// Slurm front-ends (cli/slurm/): squeue's codes one at a time.
std::string QueueFieldTitle(char code) { return QueueTitle(code); }
std::string QueueFieldValue(const JobRecord& j, Time now, char code) {
  return QueueValue(j, now, code);
}
std::string NodeFieldValue(const NodeStatus& n, char code) { return NodeValue(n, code); }

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

namespace {

// A burst node's power as Slurm shows a powered node (docs/pools.md): the state it
// shows, sinfo's suffix and scontrol's flag. On (and in burn-in) shows as any node.
struct PowerShown {
  std::string_view power;
  std::string_view word;
  std::string_view suffix;
  std::string_view flag;
};
constexpr PowerShown kPowerShown[] = {
    {"off", "idle", "~", "+POWERED_DOWN"},
    {"resuming", "idle", "#", "+POWERING_UP"},
    {"suspending", "idle", "%", "+POWERING_DOWN"},
    {"resume-failed", "down", "~", "+POWERED_DOWN"},
};

const PowerShown* PowerOf(const NodeStatus& n) {
  for (const PowerShown& p : kPowerShown) {
    if (p.power == n.power) return &p;
  }
  return nullptr;
}

std::string StateWord(const NodeStatus& n, bool long_form) {
  GpuCounts c = CountGpus(n);
  const bool busy = c.alloc > 0 || n.alloc_cpus > 0;
  switch (n.record.state) {
    case state::NodeState::kDown:
      return "down";
    case state::NodeState::kDrained:
    case state::NodeState::kBurnIn:  // Slurm's word for out of service, with
                                     // the burn-in in the reason (sinfo -R)
      if (busy) return long_form ? "draining" : "drng";
      return long_form ? "drained" : "drain";
    case state::NodeState::kUp:
      break;
  }
  if (!busy) return "idle";
  const bool full = c.idle == 0 && c.partial == 0 && c.alloc > 0;
  if (full) return long_form ? "allocated" : "alloc";
  return long_form ? "mixed" : "mix";
}

}  // namespace

bool InBurnIn(const NodeStatus& n) {
  return n.record.state == state::NodeState::kBurnIn && PowerOf(n) == nullptr;
}

std::string NodeStateText(const NodeStatus& n, bool long_form) {
  if (const PowerShown* p = PowerOf(n))
    return std::string(p->word) + std::string(p->suffix);
  return StateWord(n, long_form);
}

std::string NodeStateFlags(const NodeStatus& n) {
  std::string out;
  const PowerShown* p = PowerOf(n);
  out = p != nullptr ? std::string(p->word) : StateWord(n, true);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!n.pool.empty()) out += "+CLOUD";  // Slurm's word for a node powered on demand
  if (p != nullptr) out += p->flag;
  return out;
}

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

// ---- nodes ----

Result<std::string> FormatNodes(const std::vector<NodeStatus>& nodes,
                                std::string_view format) {
  if (format.empty()) format = kDefaultNodesFormat;
  Result<std::vector<FormatItem>> items = ParseFormatString(format, "NnPtTGjCcmeOEDo");
  if (!items.ok()) return items.status();
  std::string out = RenderFormatLine(*items, NodeTitle) + "\n";
  for (const NodeStatus& n : nodes) {
    out += RenderFormatLine(*items, [&](char c) { return NodeValue(n, c); }) + "\n";
  }
  return out;
}

namespace {

// The devices of MIG GPU `gpu` that jobs hold ("1g.10gb job 12"), wrapped under it.
std::string MigInUse(const NodeStatus& n, int gpu) {
  std::string o, line;
  for (const state::NodeMigDevice& m : n.mig_devices) {
    if (m.gpu != gpu || m.job == 0) continue;
    const std::string item = m.profile + " job " + std::to_string(m.job);
    if (line.empty()) {
      line = "    in use: " + item;
    } else if (line.size() + 2 + item.size() > 78) {
      o += line + ",\n";
      line = "            " + item;
    } else {
      line += ", " + item;
    }
  }
  return line.empty() ? o : o + line + "\n";
}

// The GPUs of `n` in MIG mode and the devices each is split into, read from the topology
// its agent registered, with the jobs that hold them (scheduled as devices).
// The GPUs of `n` in MIG mode (with or without devices), from its topology.
GpuSet MigGpus(const NodeStatus& n) {
  GpuSet out;
  if (n.record.topology_json.find("\"mig_enabled\"") == std::string::npos) return out;
  Result<topo::Topology> t =
      topo::ParseTopologyJson(n.record.topology_json, n.record.name);
  if (!t.ok()) return out;
  for (const topo::Gpu& g : t->gpus()) {
    if (g.mig_enabled) out = out | GpuSet::FromIndices({g.index});
  }
  return out;
}

std::string MigLines(const NodeStatus& n) {
  // Only MIG GPUs write the key, so other nodes' topologies are not parsed at all.
  if (n.record.topology_json.find("\"mig_enabled\"") == std::string::npos) return "";
  Result<topo::Topology> t =
      topo::ParseTopologyJson(n.record.topology_json, n.record.name);
  if (!t.ok()) return "";
  std::string o;
  for (const topo::Gpu& g : t->gpus()) {
    if (!g.mig_enabled) continue;
    o += "  gpu" + std::to_string(g.index) + " MIG: " +
         (g.mig_devices.empty()
              ? std::string("on, no instances: cannot run jobs until they are created")
              : topo::MigLayoutText(g.mig_devices)) +
         "\n" + MigInUse(n, g.index);
  }
  return o;
}

}  // namespace

std::string FormatGpuPicture(const NodeStatus& n) {
  std::string head = n.record.name + "  " + std::to_string(n.gpus) + "x " +
                     Or(n.gpu_model, "GPU") + "  " + Or(n.interconnect, "unknown") +
                     "  " + (InBurnIn(n) ? "burn-in" : NodeStateText(n, true));
  if (!n.record.state_reason.empty()) head += " (" + n.record.state_reason + ")";
  if (!n.record.cgroup.empty()) head += "  cgroup " + n.record.cgroup;  // job isolation
  std::string o = head + "\n";
  // How its GPU shares are isolated, and what MPS did lately.
  if (n.record.gpu_sharing == "mps") {
    o += "GPU shares: MPS (a server per shared GPU holds each share to its limits)\n";
  } else if (StartsWith(n.record.gpu_sharing, "soft-limit: ")) {
    o += "GPU shares: no MPS (" + n.record.gpu_sharing.substr(12) +
         "): a share that uses more GPU memory than promised is ended\n";
  }
  for (const std::string& e : n.gpu_sharing_events) o += "  " + e + "\n";
  constexpr int kPerLine = 4;
  constexpr int kCell = 19;            // 2 + 4 * 19 = 78 columns
  const GpuSet mig_gpus = MigGpus(n);  // never given whole
  std::string row;
  for (int g = 0; g < n.gpus; ++g) {
    const state::JobId job = g < static_cast<int>(n.gpu_jobs.size()) ? n.gpu_jobs[g] : 0;
    const int share =
        g < static_cast<int>(n.gpu_share_milli.size()) ? n.gpu_share_milli[g] : 0;
    const bool bad = n.record.unhealthy.contains(g);
    std::string what;
    int mig = 0, mig_used = 0;  // its MIG devices, and those in use
    for (const state::NodeMigDevice& m : n.mig_devices) {
      mig += m.gpu == g;
      mig_used += m.gpu == g && m.job != 0;
    }
    if (mig > 0 || mig_gpus.contains(g)) {
      what = mig > 0
                 ? "MIG " + std::to_string(mig_used) + "/" + std::to_string(mig) + " used"
                 : std::string("MIG, none");
      if (bad) what += " !bad";
    } else if (job == 0) {
      what = bad ? "UNHEALTHY" : "free";
    } else {
      what = std::to_string(job);
      if (share > 0) what += " sh=" + std::to_string(share);
      if (bad) what += " !bad";
    }
    std::string cell = "gpu" + std::to_string(g) + " " + what;
    const bool last_in_line = g % kPerLine == kPerLine - 1 || g + 1 == n.gpus;
    if (!last_in_line) cell.resize(std::max(cell.size() + 1, size_t{kCell}), ' ');
    row += cell;
    if (last_in_line) {
      o += "  " + row + "\n";
      row.clear();
    }
  }
  o += MigLines(n);
  // Why each unhealthy GPU is out of service (hachi resume NODE --gpu N puts it back).
  for (const auto& [gpu, why] : n.record.unhealthy_reasons) {
    o += "  gpu" + std::to_string(gpu) + " unhealthy: " + why + "\n";
  }
  // Processes on GPUs no job of theirs was given: they take memory and compute from the
  // job placed there, and the scheduler cannot see them.
  for (const state::StrayGpuProcess& p : n.stray_processes) {
    o += "  gpu" + std::to_string(p.gpu) + " stray process: pid " +
         std::to_string(p.pid) + " (" + Or(p.user, "?") + ": " + Or(p.command, "?") + ")";
    if (p.used_mib >= 0) o += " " + std::to_string(p.used_mib) + " MiB";
    if (p.job != 0) {
      o += ", of job " + std::to_string(p.job) + ", which was not given this GPU";
    } else {
      o += ", not started by Hachi";
    }
    if (p.since > 0) o += ", since " + FormatSlurmLocal(p.since);
    o += "\n";
  }
  return o;
}

std::string FormatClockLine(const state::NodeStatus& n) {
  std::string o = "  clock: " + api::FormatClockOffset(n.clock_offset_ms);
  if (!n.clock_offset_ms)
    return o + " (its agent has not said since the server started)\n";
  // Within the picture's 80 columns for offsets under a day.
  o += " off the server's";
  if (api::ClockOffsetIsProblem(*n.clock_offset_ms)) {
    o += ": over " + std::to_string(api::kClockOffsetProblemMs / 1000) +
         "s, fix the node's time sync (NTP)";
  }
  return o + "\n";
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
