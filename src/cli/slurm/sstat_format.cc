#include "cli/slurm/sstat_format.h"

#include "cli/slurm/sacct_format.h"
#include "core/hostlist.h"
#include "core/strings.h"

namespace hachi::cli::slurm {
namespace {

// sstat.c's fields, in its order (a prefix picks the first match).
constexpr FieldDef kSstatFields[] = {
    {"AveCPU", 10},
    {"AveCPUFreq", 10},
    {"AveDiskRead", 12},
    {"AveDiskWrite", 12},
    {"AvePages", 10},
    {"AveRSS", 10},
    {"AveVMSize", 10},
    {"ConsumedEnergy", 14},
    {"ConsumedEnergyRaw", 17},
    {"JobID", -12},
    {"MaxDiskRead", 12},
    {"MaxDiskReadNode", 15},
    {"MaxDiskReadTask", 15},
    {"MaxDiskWrite", 12},
    {"MaxDiskWriteNode", 16},
    {"MaxDiskWriteTask", 16},
    {"MaxPages", 8},
    {"MaxPagesNode", 12},
    {"MaxPagesTask", 14},
    {"MaxRSS", 10},
    {"MaxRSSNode", 10},
    {"MaxRSSTask", 10},
    {"MaxVMSize", 10},
    {"MaxVMSizeNode", 14},
    {"MaxVMSizeTask", 14},
    {"MinCPU", 10},
    {"MinCPUNode", 10},
    {"MinCPUTask", 10},
    {"Nodelist", 20},
    {"NTasks", 8},
    {"Pids", 20},
    {"ReqCPUFreq", 10},
    {"ReqCPUFreqMin", 13},
    {"ReqCPUFreqMax", 13},
    {"ReqCPUFreqGov", 13},
    {"TRESUsageInAve", 14},
    {"TRESUsageInMax", 14},
    {"TRESUsageInMaxNode", 18},
    {"TRESUsageInMaxTask", 18},
    {"TRESUsageInMin", 14},
    {"TRESUsageInMinNode", 18},
    {"TRESUsageInMinTask", 18},
    {"TRESUsageInTot", 14},
    {"TRESUsageOutAve", 15},
    {"TRESUsageOutMax", 15},
    {"TRESUsageOutMaxNode", 19},
    {"TRESUsageOutMaxTask", 19},
    {"TRESUsageOutMin", 15},
    {"TRESUsageOutMinNode", 19},
    {"TRESUsageOutMinTask", 19},
    {"TRESUsageOutTot", 15},
};
// sstat.h's STAT_FIELDS and STAT_FIELDS_PID.
constexpr std::string_view kSstatDefault =
    "jobid,maxvmsize,maxvmsizenode,maxvmsizetask,avevmsize,maxrss,maxrssnode,maxrsstask,"
    "averss,maxpages,maxpagesnode,maxpagestask,avepages,mincpu,mincpunode,mincputask,"
    "avecpu,ntasks,avecpufreq,reqcpufreqmin,reqcpufreqmax,reqcpufreqgov,consumedenergy,"
    "maxdiskread,maxdiskreadnode,maxdiskreadtask,avediskread,maxdiskwrite,"
    "maxdiskwritenode,maxdiskwritetask,avediskwrite,tresusageinave,tresusageinmax,"
    "tresusageinmaxn,tresusageinmaxt,tresusageinmin,tresusageinminn,tresusageinmint,"
    "tresusageintot,tresusageoutave,tresusageoutmax,tresusageoutmaxn,tresusageoutmaxt,"
    "tresusageoutmin,tresusageoutminn,tresusageoutmint,tresusageouttot";
constexpr std::string_view kSstatPids = "jobid,nodelist,pids";

const std::vector<OptDef>& SstatOpts() {
  static const auto* opts = new std::vector<OptDef>{
      {'a', "allsteps", false},  {'e', "helpformat", false}, {'h', "help", false},
      {'i', "pidformat", false}, {'j', "jobs", true},        {'n', "noheader", false},
      {'o', "format", true},     {'p', "parsable", false},   {'P', "parsable2", false},
      {'v', "verbose", false},   {0, "fields", true},        {0, "noconvert", false},
      {0, "usage", false},       {0, "server", true}};
  return *opts;
}

std::string NodeList(const state::JobRecord& j) {
  std::vector<std::string> nodes;
  for (const state::NodeAllocation& a : j.allocations) nodes.push_back(a.node);
  return CompressHostList(nodes);
}

FieldValue SstatValue(const FieldDef& f, const state::JobRecord& j) {
  const std::string name = ToLower(f.name);
  std::string v;
  if (name == "jobid") {
    v = JobIdText(j);
  } else if (name == "nodelist") {
    v = NodeList(j);
  } else {
    v = UsageFieldValue(j, name);
  }
  return v.empty() ? FieldValue::Unset() : FieldValue::Str(v);
}

}  // namespace

Result<SstatOptions> ParseSstatArgs(const std::vector<std::string>& args) {
  Result<ParsedArgs> p = ParseArgs(args, SstatOpts());
  if (!p.ok()) return p.status();
  SstatOptions o;
  o.help = p->Has("help");
  o.usage = p->Has("usage");
  if (o.help || o.usage) return o;
  std::vector<std::string> words = p->List("jobs");
  for (const std::string& w : p->positional) {
    for (std::string_view part : Split(w, ',')) words.emplace_back(part);
  }
  // "123.0": sstat names steps; Hachi's figures are the job's.
  for (std::string& w : words) w = w.substr(0, w.find('.'));
  Result<std::vector<JobSelector>> sel = ParseJobSelectors(words);
  if (!sel.ok()) return sel.status();
  o.jobs = *sel;
  if (o.jobs.empty()) return InvalidArgument("You didn't give me any jobs to stat.");
  o.all_steps = p->Has("allsteps");
  o.pids = p->Has("pidformat");
  o.format = p->Has("format") ? p->Get("format") : p->Get("fields");
  o.out = FieldOutputOf(*p);
  o.server = p->Get("server");
  if (!o.format.empty()) {
    Result<std::vector<FieldColumn>> cols =
        ParseFieldList(o.format, kSstatFields, FieldMatch::kPrefix);
    if (!cols.ok()) return cols.status();
  }
  return o;
}

SstatOutput RenderSstat(const SstatOptions& o,
                        const std::vector<state::JobRecord>& jobs) {
  SstatOutput out;
  const std::string_view spec = !o.format.empty() ? std::string_view(o.format)
                                : o.pids          ? kSstatPids
                                                  : kSstatDefault;
  Result<std::vector<FieldColumn>> cols =
      ParseFieldList(spec, kSstatFields, FieldMatch::kPrefix);
  if (!cols.ok()) {
    out.errors.push_back(cols.status().message());
    return out;
  }
  std::vector<std::vector<FieldValue>> rows;
  for (const JobSelector& s : o.jobs) {
    bool found = false, running = false;
    for (const state::JobRecord& j : jobs) {
      if (!Matches(s, j)) continue;
      found = true;
      if (j.state != state::JobState::kRunning) continue;
      running = true;
      std::vector<FieldValue> row;
      for (const FieldColumn& c : *cols)
        row.push_back(SstatValue(kSstatFields[c.def], j));
      rows.push_back(std::move(row));
    }
    const std::string id = SelectorText(s);
    if (!found) {
      out.errors.push_back("couldn't get steps for job " + id);
    } else if (!running) {
      out.errors.push_back("No steps running for job " + id);
    }
  }
  out.text = PrintFields(*cols, kSstatFields, rows, o.out);
  return out;
}

}  // namespace hachi::cli::slurm
