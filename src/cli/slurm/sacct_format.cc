#include "cli/slurm/sacct_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <utility>

#include "cli/slurm/print_fields.h"
#include "cli/slurm_format.h"
#include "core/hostlist.h"
#include "core/printable.h"
#include "core/strings.h"
#include "core/time_format.h"

namespace hachi::cli::slurm {
namespace {

using state::JobRecord;
using state::JobState;

// Built at the first parse, not at the start of every command (the binary's static
// initialisers are part of what each process pays: docs/benchmarks.md, "Process start").
const std::vector<OptDef>& SacctOpts() {
  static const auto* opts = new std::vector<OptDef>{{'j', "jobs", true},
                                                    {'u', "user", true},
                                                    {'A', "account", true},
                                                    {0, "name", true},
                                                    {'r', "partition", true},
                                                    {'S', "starttime", true},
                                                    {'E', "endtime", true},
                                                    {'s', "state", true},
                                                    {'X', "allocations", false},
                                                    {'P', "parsable2", false},
                                                    {'p', "parsable", false},
                                                    {'n', "noheader", false},
                                                    {'a', "allusers", false},
                                                    {'o', "format", true},
                                                    {'b', "brief", false},
                                                    {'D', "duplicates", false},
                                                    {'L', "allclusters", false},
                                                    {0, "noconvert", false},
                                                    {'M', "clusters", true},
                                                    {0, "help", false},
                                                    {0, "usage", false},
                                                    {0, "server", true},
                                                    {0, "uid", true}};
  return *opts;
}

// One output line: a job, its batch step, or one of its steps (srun).
struct Line {
  const JobRecord* job;
  bool batch_step;
  const state::StepRecord* step = nullptr;
};

// A job step's line (ID.N): the step's own nodes, CPUs, GPUs, times, state and exit.
std::string StepValue(const JobRecord& j, const state::StepRecord& st,
                      const std::string& f, Time now) {
  auto elapsed = [&]() -> Duration {
    return std::max<Duration>(
        0, (st.state == JobState::kRunning ? now : st.end_time) - st.start_time);
  };
  if (f == "jobid") return JobIdText(j) + "." + std::to_string(st.step);
  if (f == "jobidraw") return std::to_string(j.id) + "." + std::to_string(st.step);
  if (f == "jobname") return st.name;
  if (f == "state") return std::string(state::JobStateName(st.state));
  if (f == "exitcode" || f == "derivedexitcode") {
    return std::to_string(st.exit_code) + ":" + std::to_string(st.signal);
  }
  if (f == "elapsed") return FormatHms(elapsed());
  if (f == "elapsedraw") return std::to_string(elapsed());
  if (f == "start" || f == "submit" || f == "eligible")
    return FormatSlurmLocal(st.start_time);
  if (f == "end") {
    return st.state != JobState::kRunning && st.end_time > 0
               ? FormatSlurmLocal(st.end_time)
               : "Unknown";
  }
  if (f == "nodelist") return CompressHostList(st.nodes);
  if (f == "account") return j.req.account;
  if (f == "alloccpus" || f == "ncpus" || f == "reqcpus") return std::to_string(st.cpus);
  if (f == "nnodes" || f == "allocnodes" || f == "reqnodes") {
    return std::to_string(st.nodes.size());
  }
  if (f == "alloctres") {
    return "cpu=" + std::to_string(st.cpus) +
           (st.gpus > 0 ? ",gres/gpu=" + std::to_string(st.gpus) : "") +
           ",node=" + std::to_string(st.nodes.size());
  }
  if (f == "reason") return st.reason;
  return "";
}

// sacct's fields: the name it prints and its default width (negative: left-aligned);
// then what the job used, from its usage summary (UsageValue).
constexpr FieldDef kFields[] = {
    {"Account", 10},
    {"AllocCPUS", 10},
    {"AllocNodes", 10},
    {"AllocTRES", -10},
    {"Comment", -15},
    {"DerivedExitCode", 15},
    {"Elapsed", 10},
    {"ElapsedRaw", 10},
    {"End", 19},
    {"ExitCode", 8},
    {"GID", 6},
    {"Group", 9},
    {"JobID", -12},
    {"JobIDRaw", -12},
    {"JobName", 10},
    {"NCPUS", 10},
    {"NNodes", 8},
    {"NodeList", -15},
    {"Partition", 10},
    {"Priority", 10},
    {"QOS", 10},
    {"Reason", -20},
    {"ReqCPUS", 8},
    {"ReqMem", 10},
    {"ReqNodes", 8},
    {"ReqTRES", -10},
    {"Start", 19},
    {"State", 10},
    {"Submit", 19},
    {"Timelimit", 10},
    {"TimelimitRaw", 12},
    {"UID", 6},
    {"User", 9},
    {"WorkDir", -15},
    {"Eligible", 19},
    {"Restarts", 8},
    {"AveCPU", 10},
    {"MaxRSS", 10},
    {"TotalCPU", 10},
    {"TRESUsageInAve", 14},
    {"TRESUsageInMax", 14},
    {"TRESUsageInTot", 14},
};

Result<std::vector<FieldColumn>> ParseFields(std::string_view spec) {
  return ParseFieldList(spec, kFields, FieldMatch::kExact);
}

// 4096 -> "4G", 7500 -> "7500M" (Slurm's convert_num_unit: the largest exact unit).
std::string MemText(int64_t mib) {
  if (mib > 0 && mib % (1024 * 1024) == 0) return std::to_string(mib / 1024 / 1024) + "T";
  if (mib > 0 && mib % 1024 == 0) return std::to_string(mib / 1024) + "G";
  return std::to_string(mib) + "M";
}

// Bytes as sacct prints usage (convert_num_unit, CONVERT_NUM_UNIT_EXACT): up a unit
// while the figure stays a multiple of half that unit: 61000 MiB -> "61000M", 1536 MiB
// -> "1.50G".
std::string UsageBytesText(int64_t mib) {
  if (mib <= 0) return "0";
  double num = static_cast<double>(mib) * 1024 * 1024;
  int unit = 0;  // index into "\0KMGTP"
  while (num >= 1024 && static_cast<uint64_t>(num) % 512 == 0 && unit < 5) {
    num /= 1024;
    ++unit;
  }
  const std::string suffix = unit == 0 ? "" : std::string(1, "_KMGTP"[unit]);
  char buf[32];
  if (num == static_cast<double>(static_cast<uint64_t>(num))) {
    std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(num));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f", num);
  }
  return buf + suffix;
}

// sacct's TotalCPU/AveCPU (_elapsed_time): "2-01:00:00", "01:02:03", "05:01.250" (under
// an hour with milliseconds), "00:05:01".
std::string CpuTimeText(double seconds) {
  const auto ms = static_cast<int64_t>(seconds * 1000 + 0.5);
  const int64_t secs = ms / 1000, sub = ms % 1000;
  char buf[48];
  if (secs >= 86400) {
    std::snprintf(
        buf, sizeof buf, "%lld-%02lld:%02lld:%02lld",
        static_cast<long long>(secs / 86400), static_cast<long long>(secs / 3600 % 24),
        static_cast<long long>(secs / 60 % 60), static_cast<long long>(secs % 60));
  } else if (secs >= 3600) {
    std::snprintf(
        buf, sizeof buf, "%02lld:%02lld:%02lld", static_cast<long long>(secs / 3600),
        static_cast<long long>(secs / 60 % 60), static_cast<long long>(secs % 60));
  } else if (sub > 0) {
    std::snprintf(buf, sizeof buf, "%02lld:%02lld.%03lld",
                  static_cast<long long>(secs / 60), static_cast<long long>(secs % 60),
                  static_cast<long long>(sub));
  } else {
    std::snprintf(buf, sizeof buf, "00:%02lld:%02lld", static_cast<long long>(secs / 60),
                  static_cast<long long>(secs % 60));
  }
  return buf;
}

// The job's usage fields from its usage summary, in Slurm's forms; "" for
// what was not measured, as Slurm leaves a field it has no figure for. Slurm fills them
// on step lines; Hachi measures the allocation, so they are on the job's line. A
// node's CPU time stands for a task's: AveCPU and the "Ave" cpu are per node.
std::string UsageValue(const JobRecord& j, const std::string& f) {
  const state::UsageSummary& u = j.usage;
  const bool cpu = u.cpu_seconds >= 0;
  const bool gpu = u.samples > 0 && u.gpu_util >= 0;
  const double nodes = static_cast<double>(std::max<size_t>(1, j.allocations.size()));
  // TRES strings: name=value, sorted by name, as sacct prints them.
  auto tres = [](std::vector<std::pair<std::string, std::string>> items) {
    std::string out;
    for (const auto& [name, value] : items) {
      out += (out.empty() ? "" : ",") + name + "=" + value;
    }
    return out;
  };
  if (f == "totalcpu") return cpu ? CpuTimeText(u.cpu_seconds) : "";
  if (f == "avecpu") return cpu ? CpuTimeText(std::floor(u.cpu_seconds / nodes)) : "";
  if (f == "maxrss") return u.mem_peak_mib >= 0 ? UsageBytesText(u.mem_peak_mib) : "";
  std::vector<std::pair<std::string, std::string>> items;
  const auto secs = [](double s) { return FormatHms(static_cast<Duration>(s)); };
  if (f == "tresusageinave") {
    if (cpu) items.emplace_back("cpu", secs(u.cpu_seconds / nodes));
    if (gpu) items.emplace_back("gres/gpuutil", std::to_string(std::lround(u.gpu_util)));
  } else if (f == "tresusageinmax") {
    if (j.gpu_memory_peak_mib > 0) {
      items.emplace_back("gres/gpumem", UsageBytesText(j.gpu_memory_peak_mib));
    }
    if (u.mem_peak_mib >= 0) items.emplace_back("mem", UsageBytesText(u.mem_peak_mib));
  } else if (f == "tresusageintot") {
    if (cpu) items.emplace_back("cpu", secs(u.cpu_seconds));
  }
  return tres(std::move(items));
}

int CpusPerNodeReq(const JobRecord& j) {
  return std::max(1, j.req.cpus + j.req.cpus_per_gpu * j.req.GpusPerNode());
}
int64_t MemPerNodeReq(const JobRecord& j) {
  return j.req.memory_mib > 0 ? j.req.memory_mib
                              : j.req.memory_mib_per_gpu * j.req.GpusPerNode();
}
int AllocCpus(const JobRecord& j) {
  int c = 0;
  for (const auto& a : j.allocations) c += a.cpus;
  // An allocation without a CPU count (no CPUs asked for): what the job asked for.
  if (c == 0 && !j.allocations.empty()) c = CpusPerNodeReq(j) * j.req.nodes;
  return c;
}
bool Started(const JobRecord& j) {
  return j.start_time > 0 && !j.allocations.empty() && j.state != JobState::kPending;
}

// Slurm's TRES strings, in its order: billing, cpu, gres/gpu, mem, node.
std::string Tres(int cpus, int gpus, int64_t mem, int nodes) {
  std::string s = "billing=" + std::to_string(cpus) + ",cpu=" + std::to_string(cpus);
  if (gpus > 0) s += ",gres/gpu=" + std::to_string(gpus);
  return s + ",mem=" + MemText(mem) + ",node=" + std::to_string(nodes);
}

std::string Value(const Line& l, std::string_view field, Time now, const UidOf& uid_of) {
  const JobRecord& j = *l.job;
  if (l.step != nullptr) return StepValue(j, *l.step, ToLower(field), now);
  const bool step = l.batch_step;
  const bool started = Started(j);
  const std::string f = ToLower(field);
  auto elapsed = [&]() -> Duration {
    if (!started) return 0;
    return std::max<Duration>(
        0, (j.state == JobState::kRunning ? now : j.end_time) - j.start_time);
  };
  if (f == "jobid") return JobIdText(j) + (step ? ".batch" : "");
  if (f == "jobidraw") return std::to_string(j.id) + (step ? ".batch" : "");
  if (f == "jobname") return step ? "batch" : PrintableText(j.spec.name);
  if (f == "state") {
    std::string s = SacctState(j, uid_of);
    if (step && StartsWith(s, "CANCELLED")) return "CANCELLED";
    if (step && s == "REQUEUED") return "CANCELLED";
    return s;
  }
  if (f == "exitcode" || f == "derivedexitcode") return ExitCodeText(j);
  if (f == "elapsed") return FormatHms(elapsed());
  if (f == "elapsedraw") return std::to_string(elapsed());
  if (f == "start") return started ? FormatSlurmLocal(j.start_time) : "Unknown";
  if (f == "end") {
    return started && state::IsFinal(j.state) && j.end_time > 0
               ? FormatSlurmLocal(j.end_time)
               : "Unknown";
  }
  if (f == "submit" || f == "eligible") return FormatSlurmLocal(j.submit_time);
  if (f == "nodelist") {
    if (!started && j.allocations.empty()) return "None assigned";
    if (step) return j.allocations.empty() ? "" : j.allocations[0].node;
    std::vector<std::string> names;
    for (const auto& a : j.allocations) names.push_back(a.node);
    return CompressHostList(names);
  }
  if (f == "partition") return step ? "" : j.req.partition;
  if (f == "account") return j.req.account;
  if (f == "qos") return step ? "" : j.req.qos;
  if (f == "user") return step ? "" : j.req.user;
  if (f == "uid") return step ? "" : std::to_string(j.spec.uid);
  if (f == "gid" || f == "group") return step ? "" : std::to_string(j.spec.gid);
  if (f == "alloctres") {
    if (!started && j.allocations.empty()) return "";
    if (step) {
      const auto& a = j.allocations[0];
      return "cpu=" + std::to_string(a.cpus) +
             (a.gpus.size() > 0 ? ",gres/gpu=" + std::to_string(a.gpus.size()) : "") +
             ",mem=" + MemText(a.memory_mib) + ",node=1";
    }
    int64_t mem = 0;
    for (const auto& a : j.allocations) mem += a.memory_mib;
    return Tres(AllocCpus(j), j.req.TotalGpus(), mem,
                static_cast<int>(j.allocations.size()));
  }
  if (f == "reqtres") {
    if (step) return "";
    return Tres(CpusPerNodeReq(j) * j.req.nodes, j.req.TotalGpus(),
                MemPerNodeReq(j) * j.req.nodes, j.req.nodes);
  }
  if (f == "alloccpus" || f == "ncpus") {
    if (step) {
      if (j.allocations.empty()) return "0";
      return std::to_string(j.allocations[0].cpus > 0 ? j.allocations[0].cpus
                                                      : CpusPerNodeReq(j));
    }
    return std::to_string(AllocCpus(j));
  }
  if (f == "reqcpus") return std::to_string(CpusPerNodeReq(j) * j.req.nodes);
  if (f == "nnodes") {
    if (step) return "1";
    return std::to_string(j.allocations.empty() ? j.req.nodes
                                                : static_cast<int>(j.allocations.size()));
  }
  if (f == "allocnodes") {
    return std::to_string(step ? 1 : static_cast<int>(j.allocations.size()));
  }
  if (f == "reqnodes") return std::to_string(j.req.nodes);
  if (f == "reqmem") return step ? "" : MemText(MemPerNodeReq(j));
  if (f == "timelimit") {
    if (step) return "";
    return j.req.time_limit > 0 ? FormatHms(j.req.time_limit) : "UNLIMITED";
  }
  if (f == "timelimitraw") {
    if (step) return "";
    return j.req.time_limit > 0 ? std::to_string(j.req.time_limit / 60) : "UNLIMITED";
  }
  if (f == "comment") return step ? "" : PrintableText(j.spec.comment);
  if (f == "reason") return step ? "" : QueueFieldValue(j, now, 'r');
  if (f == "workdir") return step ? "" : j.spec.workdir;
  if (f == "priority") return step ? "" : "0";
  if (f == "restarts") return step ? "" : std::to_string(j.requeues);
  if (f == "avecpu" || f == "maxrss" || f == "totalcpu" || StartsWith(f, "tresusagein")) {
    return step ? "" : UsageValue(j, f);
  }
  return "";
}

bool InWindow(const SacctOptions& o, const JobRecord& j, Time now) {
  const Time end = o.end > 0 ? o.end : now;
  if (j.submit_time > end) return false;
  if (o.start > 0 && state::IsFinal(j.state) && j.end_time > 0 && j.end_time < o.start) {
    return false;
  }
  return true;
}

}  // namespace

std::string UsageFieldValue(const JobRecord& j, std::string_view lower_name) {
  return UsageValue(j, std::string(lower_name));
}

Result<Time> ParseSacctTime(std::string_view text, Time now) {
  const Status bad = InvalidArgument("Invalid time specification (pos=0): " + Clip(text));
  std::string t = ToLower(Trim(text));
  const std::time_t now_t = static_cast<std::time_t>(now);
  std::tm base{};
  localtime_r(&now_t, &base);
  auto at = [](std::tm tm) {
    tm.tm_isdst = -1;
    return static_cast<Time>(std::mktime(&tm));
  };
  auto midnight = [&] {
    std::tm m = base;
    m.tm_hour = m.tm_min = m.tm_sec = 0;
    return at(m);
  };
  if (t == "now") return now;
  if (t == "today" || t == "midnight") return midnight();
  if (StartsWith(t, "now-") || StartsWith(t, "now+")) {
    const int sign = t[3] == '-' ? -1 : 1;
    std::string rest = t.substr(4);
    size_t k = 0;
    while (k < rest.size() && rest[k] >= '0' && rest[k] <= '9') ++k;
    std::optional<long long> n = ParseInt(rest.substr(0, k));
    if (!n) return bad;
    const std::string unit = rest.substr(k);
    long long mult = 0;
    if (unit.empty() || unit == "s" || unit == "seconds") mult = 1;
    if (unit == "minutes" || unit == "min") mult = 60;
    if (unit == "hours" || unit == "h") mult = 3600;
    if (unit == "days" || unit == "d") mult = 86400;
    if (unit == "weeks" || unit == "w") mult = 7 * 86400;
    if (mult == 0) return bad;
    return now + sign * *n * mult;
  }
  std::tm tm = base;
  tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  char tail = 0;
  if (std::sscanf(t.c_str(), "%4d-%2d-%2dt%2d:%2d:%2d%c", &y, &mo, &d, &h, &mi, &s,
                  &tail) >= 3 &&
      t.size() >= 10 && t[4] == '-') {
    if (tail != 0) return bad;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = s;
  } else if (t.find('/') != std::string::npos) {
    const int n = std::sscanf(t.c_str(), "%2d/%2d/%2d%c", &mo, &d, &y, &tail);
    if (n < 2 || tail != 0) return bad;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    if (n >= 3) tm.tm_year = 100 + y;
  } else if (t.find(':') != std::string::npos) {
    const int n = std::sscanf(t.c_str(), "%2d:%2d:%2d%c", &h, &mi, &s, &tail);
    if (n < 2 || tail != 0) return bad;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = n >= 3 ? s : 0;
  } else {
    return bad;
  }
  if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
      tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60) {
    return bad;
  }
  return at(tm);
}

Result<SacctOptions> ParseSacctArgs(const std::vector<std::string>& args, Time now,
                                    const std::string& me, bool root) {
  Result<ParsedArgs> p = ParseArgs(args, SacctOpts());
  if (!p.ok()) return p.status();
  if (!p->positional.empty()) {
    return InvalidArgument("Unrecognized argument: " + Clip(p->positional[0]));
  }
  SacctOptions o;
  o.help = p->Has("help");
  o.usage = p->Has("usage");
  Result<std::vector<JobSelector>> sel = ParseJobSelectors(p->List("jobs"));
  if (!sel.ok()) return sel.status();
  o.jobs = *sel;
  o.users = p->List("user");
  o.accounts = p->List("account");
  o.names = p->List("name");
  o.partitions = p->List("partition");
  o.all_users = p->Has("allusers");
  for (const std::string& s : p->List("state")) {
    Result<std::vector<state::JobState>> st = ParseStateList(s);
    if (!st.ok()) return InvalidArgument("Invalid state: " + Clip(s));
    o.states.insert(o.states.end(), st->begin(), st->end());
  }
  o.allocations = p->Has("allocations");
  o.parsable = p->Has("parsable");
  o.parsable2 = p->Has("parsable2");
  o.noheader = p->Has("noheader");
  o.fields = p->Has("brief") ? "JobID,State,ExitCode" : p->Get("format");
  if (!o.fields.empty()) {
    Result<std::vector<FieldColumn>> cols = ParseFields(o.fields);
    if (!cols.ok()) return cols.status();
  }
  o.server = p->Get("server");
  if (p->Has("starttime")) {
    Result<Time> t = ParseSacctTime(p->Get("starttime"), now);
    if (!t.ok()) return t.status();
    o.start = *t;
  } else if (o.jobs.empty()) {
    Result<Time> t = ParseSacctTime("midnight", now);
    if (t.ok()) o.start = *t;
  }
  if (p->Has("endtime")) {
    Result<Time> t = ParseSacctTime(p->Get("endtime"), now);
    if (!t.ok()) return t.status();
    o.end = *t;
  }
  // A user sees their own jobs unless they name users or ask for all (root: all).
  if (o.users.empty() && !o.all_users && !root && o.jobs.empty()) o.users.push_back(me);
  return o;
}

Result<std::string> RenderSacct(const SacctOptions& o, const std::vector<JobRecord>& jobs,
                                Time now, const UidOf& uid_of,
                                const std::vector<state::StepRecord>& steps) {
  Result<std::vector<FieldColumn>> cols =
      ParseFields(o.fields.empty() ? kSacctDefaultFields : o.fields);
  if (!cols.ok()) return cols.status();
  auto in = [](const std::vector<std::string>& list, const std::string& v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  std::vector<const JobRecord*> shown;
  for (const JobRecord& j : jobs) {
    if (!o.jobs.empty() &&
        std::none_of(o.jobs.begin(), o.jobs.end(),
                     [&](const JobSelector& s) { return Matches(s, j); })) {
      continue;
    }
    if (!o.states.empty() &&
        std::find(o.states.begin(), o.states.end(), j.state) == o.states.end()) {
      continue;
    }
    if (!in(o.users, j.req.user) || !in(o.accounts, j.req.account) ||
        !in(o.names, j.spec.name) || !in(o.partitions, j.req.partition) ||
        !InWindow(o, j, now)) {
      continue;
    }
    shown.push_back(&j);
  }
  std::sort(shown.begin(), shown.end(),
            [](const JobRecord* a, const JobRecord* b) { return a->id < b->id; });
  std::vector<Line> lines;
  for (const JobRecord* j : shown) {
    lines.push_back({j, false});
    const bool batch =
        !j->spec.interactive && (!j->spec.script().empty() || j->spec.argv().empty());
    if (!o.allocations && batch && Started(*j)) lines.push_back({j, true});
    if (o.allocations || !Started(*j)) continue;
    // The steps of the job's latest run, in order.
    for (const state::StepRecord& st : steps) {
      if (st.job == j->id && st.job_start == j->start_time) {
        lines.push_back({j, false, &st});
      }
    }
  }
  std::vector<std::vector<FieldValue>> rows;
  rows.reserve(lines.size());
  for (const Line& l : lines) {
    std::vector<FieldValue> row;
    for (const FieldColumn& c : *cols) {
      row.push_back(FieldValue::Str(Value(l, kFields[c.def].name, now, uid_of)));
    }
    rows.push_back(std::move(row));
  }
  FieldOutput out;
  out.header = !o.noheader;
  out.parsable = o.parsable2  ? Parsable::kNoEnding
                 : o.parsable ? Parsable::kEnding
                              : Parsable::kNo;
  return PrintFields(*cols, kFields, rows, out);
}

}  // namespace hachi::cli::slurm
