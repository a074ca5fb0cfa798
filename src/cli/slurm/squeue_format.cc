#include "cli/slurm/squeue_format.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/slurm/slurm_text.h"
#include "cli/slurm_format.h"
#include "cli/table.h"
#include "core/strings.h"
#include "core/time_format.h"

namespace hachi::cli::slurm {
namespace {

using state::JobRecord;
using state::JobState;

// Built at the first parse, not at the start of every command (the binary's static
// initialisers are part of what each process pays: docs/benchmarks.md, "Process start").
const std::vector<OptDef>& SqueueOpts() {
  static const auto* opts = new std::vector<OptDef>{
      {'h', "noheader", false}, {'r', "array", false},   {0, "start", false},
      {0, "json", false},       {'o', "format", true},   {'O', "Format", true},
      {'u', "user", true},      {'n', "name", true},     {'p', "partition", true},
      {'A', "account", true},   {'t', "states", true},   {'j', "jobs", true},
      {0, "me", false},         {'a', "all", false},     {'l', "long", false},
      {0, "noconvert", false},  {'v', "verbose", false}, {0, "help", false},
      {0, "usage", false},      {0, "server", true},     {0, "state", true},
      {0, "job", true},         {'M', "clusters", true}};  // one cluster: accepted
  return *opts;
}

// The value a row shows for a code, with Slurm's meaning where Hachi's `hachi queue`
// differs: %b is TRES_PER_NODE.
struct Row {
  const JobRecord* job;
  std::string id_text;    // "12" / "12_3" / "12_[3-9]"
  std::string task_text;  // ArrayTaskID
  // %A, Slurm's "unique value for each element of job arrays": the job's own id; for
  // an array's pending tasks shown as one row, the first one's (the array's own id
  // while none has started, as Slurm's array record).
  state::JobId number = 0;
};

std::string TresPerNode(const JobRecord& j) {
  if (j.req.TotalGpus() <= 0) return "N/A";
  return "gres:gpu:" + (j.req.gpu_model.empty() ? "" : j.req.gpu_model + ":") +
         std::to_string(j.req.GpusPerNode());
}

std::string TresAlloc(const JobRecord& j) {
  int cpus = 0;
  int64_t mem = 0;
  for (const auto& a : j.allocations) {
    cpus += a.cpus;
    mem += a.memory_mib;
  }
  const int nodes =
      j.allocations.empty() ? j.req.nodes : static_cast<int>(j.allocations.size());
  if (j.allocations.empty()) {
    cpus = std::max(1, j.req.cpus + j.req.cpus_per_gpu * j.req.GpusPerNode()) * nodes;
    mem = (j.req.memory_mib > 0 ? j.req.memory_mib
                                : j.req.memory_mib_per_gpu * j.req.GpusPerNode()) *
          nodes;
  }
  std::string s = "cpu=" + std::to_string(cpus) + ",mem=" + std::to_string(mem) +
                  "M,node=" + std::to_string(nodes) + ",billing=" + std::to_string(cpus);
  if (j.req.TotalGpus() > 0) s += ",gres/gpu=" + std::to_string(j.req.TotalGpus());
  return s;
}

std::string Value(const Row& r, Time now, char code, const StartEstimates& starts) {
  const JobRecord& j = *r.job;
  const auto est = starts.find(j.id);
  const bool estimated = j.state == JobState::kPending && est != starts.end();
  switch (code) {
    case 'i':
      return r.id_text;
    case 'A':
      return std::to_string(r.number);
    case 'K':
      return r.task_text;
    case 'b':
      return TresPerNode(j);
    case 'Y':
      return estimated && !est->second.node.empty() ? est->second.node : "(null)";
    case 'S':
      if (estimated && est->second.start > 0) return FormatSlurmLocal(est->second.start);
      if (j.state == JobState::kPending) return "N/A";
      break;
  }
  return QueueFieldValue(j, now, code);
}

std::string Title(char code) {
  switch (code) {
    case 'b':
      return "TRES_PER_NODE";
    case 'Y':
      return "SCHEDNODES";
    case 'A':
      return "JOBID";
  }
  return QueueFieldTitle(code);
}

// -O names (case-insensitive) -> a code or one of ours ('@' tres-alloc).
struct LongField {
  std::string_view name;
  char code;
  std::string_view title;
};
constexpr LongField kLongFields[] = {
    {"jobid", 'i', "JOBID"},
    {"jobarrayid", 'i', "JOBID"},
    {"arrayjobid", 'F', "ARRAY_JOB_ID"},
    {"arraytaskid", 'K', "ARRAY_TASK_ID"},
    {"partition", 'P', "PARTITION"},
    {"name", 'j', "NAME"},
    {"username", 'u', "USER"},
    {"userid", 'U', "UID"},
    {"account", 'a', "ACCOUNT"},
    {"qos", 'q', "QOS"},
    {"state", 'T', "STATE"},
    {"statecompact", 't', "ST"},
    {"timeused", 'M', "TIME"},
    {"timelimit", 'l', "TIME_LIMIT"},
    {"timeleft", 'L', "TIME_LEFT"},
    {"numnodes", 'D', "NODES"},
    {"numcpus", 'C', "CPUS"},
    {"nodelist", 'N', "NODELIST"},
    {"reason", 'r', "REASON"},
    {"reasonlist", 'R', "NODELIST(REASON)"},
    {"submittime", 'V', "SUBMIT_TIME"},
    {"starttime", 'S', "START_TIME"},
    {"endtime", 'e', "END_TIME"},
    {"tres-per-node", 'b', "TRES_PER_NODE"},
    {"tres-alloc", '@', "TRES_ALLOC"},
    {"minmemory", 'm', "MIN_MEMORY"},
    {"comment", 'k', "COMMENT"},
    {"workdir", 'Z', "WORK_DIR"},
    {"dependency", 'E', "DEPENDENCY"},
    {"feature", 'f', "FEATURES"},
};

struct Column {
  char code;
  std::string title;
  int width;
};

Result<std::vector<Column>> ParseLongFormat(std::string_view spec) {
  std::vector<Column> cols;
  for (std::string_view item : Split(spec, ',')) {
    item = Trim(item);
    if (item.empty()) continue;
    Result<LongFormatItem> parsed = ParseFormatItem(item);
    if (!parsed.ok()) return parsed.status();
    const std::string& name = parsed->name;
    const int width = parsed->width;
    const auto f = std::find_if(std::begin(kLongFields), std::end(kLongFields),
                                [&](const LongField& l) { return l.name == name; });
    if (f == std::end(kLongFields)) {
      return InvalidArgument("Invalid job format specification: " + Clip(name));
    }
    cols.push_back({f->code, std::string(f->title), width});
  }
  if (cols.empty()) return InvalidArgument("Invalid job format specification: (empty)");
  return cols;
}

// Task ids as Slurm's compressed ranges: "3-5,9".
std::string TaskRanges(std::vector<int> tasks) {
  std::sort(tasks.begin(), tasks.end());
  std::string out;
  for (size_t i = 0; i < tasks.size();) {
    size_t k = i;
    while (k + 1 < tasks.size() && tasks[k + 1] == tasks[k] + 1) ++k;
    if (!out.empty()) out += ",";
    out += std::to_string(tasks[i]);
    if (k > i) out += "-" + std::to_string(tasks[k]);
    i = k + 1;
  }
  return out;
}

bool Selected(const SqueueOptions& o, const JobRecord& j) {
  auto in = [](const std::vector<std::string>& list, const std::string& v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  bool state_ok;
  if (o.states_given) {
    state_ok = std::find(o.states.begin(), o.states.end(), j.state) != o.states.end();
  } else {
    // Slurm's default states (pending, running, completing), -j or not: `squeue -h -j ID`
    // prints nothing once ID ended, which is what every wait loop on it looks for.
    state_ok = !state::IsFinal(j.state);
  }
  bool job_ok =
      o.jobs.empty() || std::any_of(o.jobs.begin(), o.jobs.end(),
                                    [&](const JobSelector& s) { return Matches(s, j); });
  if (o.start && j.state != JobState::kPending) return false;
  return state_ok && job_ok && in(o.users, j.req.user) && in(o.names, j.spec.name) &&
         in(o.partitions, j.req.partition) && in(o.accounts, j.req.account);
}

std::vector<Row> BuildRows(const SqueueOptions& o, const std::vector<JobRecord>& jobs) {
  std::vector<Row> rows;
  std::map<state::JobId, size_t> pending_array_row;  // array id -> its row
  std::map<state::JobId, std::vector<int>> pending_tasks;
  for (const JobRecord& j : jobs) {
    const bool task = j.spec.array_task_id >= 0;
    if (task && !o.array && j.state == JobState::kPending) {
      auto [it, fresh] = pending_array_row.emplace(j.spec.array_job_id, rows.size());
      pending_tasks[j.spec.array_job_id].push_back(j.spec.array_task_id);
      if (!fresh) continue;
    }
    rows.push_back({&j, JobIdText(j),
                    task ? std::to_string(j.spec.array_task_id) : std::string("N/A"),
                    j.id});
  }
  for (const auto& [array, row] : pending_array_row) {
    const std::vector<int>& tasks = pending_tasks[array];
    if (tasks.size() < 2) continue;
    Row& r = rows[row];
    std::string ranges = TaskRanges(tasks);
    if (r.job->spec.array_max_running > 0) {
      ranges += "%" + std::to_string(r.job->spec.array_max_running);
    }
    r.id_text = std::to_string(array) + "_[" + ranges + "]";
    r.task_text = ranges;
  }
  return rows;
}

std::string JsonOf(const std::vector<Row>& rows, Time now) {
  using nlohmann::json;
  json jobs = json::array();
  for (const Row& r : rows) {
    const JobRecord& j = *r.job;
    const bool task = j.spec.array_task_id >= 0;
    json o = {
        {"job_id", j.id},
        {"array_job_id", task ? j.spec.array_job_id : 0},
        {"array_task_id", task ? json(j.spec.array_task_id) : json(nullptr)},
        {"name", j.spec.name},
        {"user_name", j.req.user},
        {"user_id", j.spec.uid},
        {"group_id", j.spec.gid},
        {"account", j.req.account},
        {"partition", j.req.partition},
        {"qos", j.req.qos},
        {"job_state", std::string(state::JobStateName(j.state))},
        {"state_reason", QueueFieldValue(j, now, 'r')},
        {"nodes", QueueFieldValue(j, now, 'N')},
        {"node_count", std::stoi(QueueFieldValue(j, now, 'D'))},
        {"cpus", std::stoi(QueueFieldValue(j, now, 'C'))},
        {"tres_per_node", TresPerNode(j)},
        {"submit_time", j.submit_time},
        {"start_time", j.start_time},
        {"end_time", j.end_time},
        {"time_limit", j.req.time_limit > 0 ? j.req.time_limit / 60 : 0},
        {"exit_code", j.exit_code},
        {"restart_cnt", j.requeues},
        {"current_working_directory", j.spec.workdir},
        {"comment", j.spec.comment},
        {"command", j.spec.argv().empty() ? "" : j.spec.argv()[0]},
    };
    jobs.push_back(std::move(o));
  }
  return json{{"jobs", std::move(jobs)}}.dump(2) + "\n";
}

}  // namespace

Result<SqueueOptions> ParseSqueueArgs(const std::vector<std::string>& args,
                                      const std::string& me) {
  Result<ParsedArgs> p = ParseArgs(args, SqueueOpts());
  if (!p.ok()) return p.status();
  SqueueOptions o;
  o.help = p->Has("help");
  o.usage = p->Has("usage");
  o.noheader = p->Has("noheader");
  o.array = p->Has("array");
  o.start = p->Has("start");
  o.json = p->Has("json");
  o.format = p->Get("format");
  o.long_format = p->Get("Format");
  o.server = p->Get("server");
  o.users = p->List("user");
  if (p->Has("me")) o.users.push_back(me);
  o.names = p->List("name");
  o.partitions = p->List("partition");
  o.accounts = p->List("account");
  std::vector<std::string> states = p->List("states");
  for (const std::string& s : p->List("state")) states.push_back(s);
  for (const std::string& s : states) {
    Result<std::vector<JobState>> st = ParseStateList(s);
    if (!st.ok()) return InvalidArgument("Invalid job state specified: " + Clip(s));
    o.states.insert(o.states.end(), st->begin(), st->end());
    o.states_given = true;
  }
  std::vector<std::string> ids = p->List("jobs");
  for (const std::string& s : p->List("job")) ids.push_back(s);
  // `squeue 12` is not Slurm's, but `squeue -j 12` is; positional words are refused.
  if (!p->positional.empty()) {
    return InvalidArgument("Unrecognized argument: " + Clip(p->positional[0]));
  }
  Result<std::vector<JobSelector>> sel = ParseJobSelectors(ids);
  if (!sel.ok()) return sel.status();
  o.jobs = *sel;
  return o;
}

Result<std::string> RenderSqueue(const SqueueOptions& o,
                                 const std::vector<JobRecord>& jobs, Time now,
                                 const StartEstimates& starts) {
  std::vector<JobRecord> shown;
  for (const JobRecord& j : jobs) {
    if (Selected(o, j)) shown.push_back(j);
  }
  SortForQueue(&shown);
  if (o.json) {  // every task its own object
    SqueueOptions each = o;
    each.array = true;
    return JsonOf(BuildRows(each, shown), now);
  }
  const std::vector<Row> rows = BuildRows(o, shown);
  std::string out;
  if (!o.long_format.empty()) {
    Result<std::vector<Column>> cols = ParseLongFormat(o.long_format);
    if (!cols.ok()) return cols.status();
    auto line = [&](const std::function<std::string(const Column&)>& v) {
      std::string s;
      // Each field is cut to width-1 and followed by a space, as squeue -O prints them.
      for (const Column& c : *cols) s += FitField(v(c), c.width - 1, Align::kLeft) + " ";
      return s + "\n";
    };
    if (!o.noheader) out += line([](const Column& c) { return c.title; });
    for (const Row& r : rows) {
      out += line([&](const Column& c) {
        if (c.code == '@') return TresAlloc(*r.job);
        if (c.code == 'U') return std::to_string(r.job->spec.uid);
        return Value(r, now, c.code, starts);
      });
    }
    return out;
  }
  std::string_view format = o.format;
  if (format.empty()) format = o.start ? kSqueueStartFormat : kSqueueDefaultFormat;
  Result<std::vector<FormatItem>> items =
      ParseFormatString(format, "iAFKPjuaqtTMlLDRrNCmVSebkZEYf");
  if (!items.ok()) return items.status();
  if (!o.noheader) out += RenderFormatLine(*items, Title) + "\n";
  for (const Row& r : rows) {
    out +=
        RenderFormatLine(*items, [&](char c) { return Value(r, now, c, starts); }) + "\n";
  }
  return out;
}

}  // namespace hachi::cli::slurm
