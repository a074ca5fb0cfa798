#include "cli/submit_options.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>

#include "core/hostlist.h"
#include "core/signals.h"
#include "core/slurm_time.h"
#include "core/strings.h"
#include "sched/dependencies.h"
#include "sched/features.h"
#include "sched/mig.h"

namespace hachi::cli {

// The GPU request, one slot for --gres, --gpus and --gpus-per-node: the last one given
// wins, so a flag of one form overrides a directive of another.
struct GpuSlot {
  enum Form : uint8_t { kUnset, kPerNode, kTotal, kPerTask } form = kUnset;
  int count = 0;
  std::string model;
  std::string where;
};

// What BuildSubmitOptions folds the occurrences into: the options, and what the
// resolution after the last occurrence needs (where the GPU slot, the share, the node
// and task counts were set, for the messages).
struct SubmitBuild {
  SubmitOptions o;
  GpuSlot gpu;
  const OptionOccurrence* share = nullptr;
  const OptionOccurrence* gpu_mem = nullptr;
  const OptionOccurrence* nodes = nullptr;
  const OptionOccurrence* ntasks = nullptr;
  const OptionOccurrence* per_node = nullptr;
  int mincpus = 0;
  int64_t mem_per_cpu = 0;  // --mem-per-cpu, MiB
};

namespace {

std::string Quote(std::string_view v) { return "'" + std::string(v) + "'"; }

Status ParseGres(std::string_view v, GpuSlot* slot) {
  // gpu, gpu:N, gpu:MODEL:N; one GRES only.
  if (v.find(',') != std::string_view::npos) {
    return InvalidArgument("one GRES only (gpu:N or gpu:MODEL:N)");
  }
  std::vector<std::string_view> parts = Split(v, ':');
  if (parts[0] != "gpu") {
    return InvalidArgument(Quote(parts[0]) + " is not a GRES Hachi knows (use gpu:N)");
  }
  if (parts.size() > 3) return InvalidArgument("use gpu:N or gpu:MODEL:N");
  std::string_view count = parts.size() == 1 ? "1" : parts.back();
  // gpu:MODEL: one GPU of that model, as Slurm reads a type without a count.
  if (parts.size() == 2 && !parts[1].empty() && !ParseCount(parts[1])) {
    slot->model = std::string(parts[1]);
    slot->count = 1;
    return Status::Ok();
  }
  if (parts.size() == 3) {
    if (parts[1].empty()) return InvalidArgument("empty GPU model (use gpu:MODEL:N)");
    slot->model = std::string(parts[1]);
  } else {
    slot->model.clear();
  }
  std::optional<long long> n = ParseCount(count);
  if (!n) return InvalidArgument(Quote(count) + " is not a GPU count");
  slot->count = static_cast<int>(*n);
  return Status::Ok();
}

// --gpus / --gpus-per-node: [MODEL:]N, or MODEL alone for one GPU of it (Slurm's reading
// of a type without a count: --gpus=a100).
Status ParseGpuCount(std::string_view v, GpuSlot* slot) {
  if (!v.empty() && v.find(':') == std::string_view::npos && !ParseCount(v)) {
    slot->model = std::string(v);
    slot->count = 1;
    return Status::Ok();
  }
  size_t colon = v.rfind(':');
  std::string_view count = colon == std::string_view::npos ? v : v.substr(colon + 1);
  slot->model = colon == std::string_view::npos ? "" : std::string(v.substr(0, colon));
  if (StartsWith(slot->model, "gpu:")) slot->model = slot->model.substr(4);
  std::optional<long long> n = ParseCount(count);
  if (!n) return InvalidArgument(Quote(count) + " is not a GPU count");
  slot->count = static_cast<int>(*n);
  return Status::Ok();
}

// "(use afterok:ID[:ID...], afterany:ID, afternotok:ID or singleton)": the kinds'
// table's names, each with the job ids it takes.
std::string DependencyUsage() {
  std::string out = "(use ";
  const auto& kinds = sched::kDependencyKinds;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (i > 0) out += i + 1 == kinds.size() ? " or " : ", ";
    out += kinds[i].name;
    if (kinds[i].kind != sched::DependencyKind::kSingleton) {
      out += i == 0 ? ":ID[:ID...]" : ":ID";
    }
  }
  return out + ")";
}

Result<std::vector<sched::Dependency>> ParseDependency(std::string_view v) {
  if (v.find('?') != std::string_view::npos) {
    return InvalidArgument(
        "'?' (any one of) is not supported: Hachi waits for all dependencies (use ',')");
  }
  std::vector<sched::Dependency> deps;
  for (std::string_view item : Split(v, ',')) {
    std::vector<std::string_view> parts = Split(item, ':');
    const std::optional<sched::DependencyKind> parsed =
        sched::ParseDependencyKind(parts[0]);
    const bool singleton = parsed == sched::DependencyKind::kSingleton;
    if (singleton && parts.size() == 1) {
      deps.push_back({sched::DependencyKind::kSingleton, 0});
      continue;
    }
    // Slurm's other kinds (and singleton:ID) are known words Hachi does not run.
    if (singleton || parts[0] == "after" || parts[0] == "aftercorr" ||
        parts[0] == "afterburstbuffer") {
      return InvalidArgument(Quote(parts[0]) + " dependencies are not supported (use " +
                             sched::DependencyKindNames(" or ") + ")");
    }
    if (!parsed) {
      return InvalidArgument(Quote(item) + " is not a dependency " + DependencyUsage());
    }
    const sched::DependencyKind kind = *parsed;
    if (parts.size() < 2) {
      return InvalidArgument(Quote(item) + ": no job id (use " + std::string(parts[0]) +
                             ":ID)");
    }
    for (size_t i = 1; i < parts.size(); ++i) {
      std::optional<long long> id = ParseCount(parts[i]);
      if (!id || *id <= 0) return InvalidArgument(Quote(parts[i]) + " is not a job id");
      deps.push_back({kind, static_cast<sched::JobId>(*id)});
    }
  }
  return deps;
}

// "0.25" -> 250: thousandths of one GPU, 0 < x < 1, at most three decimals.
Result<int> ParseShareMilli(std::string_view v) {
  const std::string bad = Quote(v) + " is not a GPU share (use 0 < x < 1, e.g. 0.25)";
  size_t dot = v.find('.');
  if (dot == std::string_view::npos) return InvalidArgument(bad);
  std::string_view whole = v.substr(0, dot);
  std::string_view frac = v.substr(dot + 1);
  if (!(whole.empty() || whole == "0") || frac.empty() || frac.size() > 3) {
    return InvalidArgument(bad);
  }
  int milli = 0;
  for (size_t i = 0; i < 3; ++i) {
    char c = i < frac.size() ? frac[i] : '0';
    if (c < '0' || c > '9') return InvalidArgument(bad);
    milli = milli * 10 + (c - '0');
  }
  if (milli == 0) return InvalidArgument(bad);
  return milli;
}

Status Err(const OptionOccurrence& o, const Status& s) {
  return InvalidArgument(o.where + ": " + s.message());
}

// --signal=[{R|B|RB|BR}:]SIG[@TIME] as Slurm reads it: SIG a name or a number, TIME
// seconds before the limit (default 60, at most 65535). R (on reservation end too) is
// accepted: Hachi has no reservations that end under a job.
Status ParseSignalSpec(std::string_view v, state::JobSpec* spec) {
  std::string_view body = v;
  spec->signal_batch_only = false;
  if (size_t colon = body.find(':'); colon != std::string_view::npos) {
    const std::string flags = ToLower(body.substr(0, colon));
    if (flags != "b" && flags != "r" && flags != "rb" && flags != "br") {
      return InvalidArgument(Quote(body.substr(0, colon + 1)) +
                             " is not a signal option (use B: or R:)");
    }
    spec->signal_batch_only = flags.find('b') != std::string::npos;
    body = body.substr(colon + 1);
  }
  std::string_view time = "60";
  if (size_t at = body.find('@'); at != std::string_view::npos) {
    time = body.substr(at + 1);
    body = body.substr(0, at);
  }
  std::optional<int> sig = ParseSignal(body);
  if (!sig)
    return InvalidArgument(Quote(body) + " is not a signal (use e.g. USR1 or 10)");
  std::optional<long long> t = ParseCount(time);
  if (!t || *t > 65535) {
    return InvalidArgument(Quote(time) + " is not a time in seconds (0-65535)");
  }
  spec->signal = *sig;
  spec->signal_before = static_cast<int>(*t);
  return Status::Ok();
}

Status ParseExportSpec(std::string_view v, ExportSpec* out) {
  ExportSpec e;
  e.all = false;
  if (v.empty()) return InvalidArgument("empty (use ALL, NONE or VAR[=value],...)");
  for (std::string_view item : Split(v, ',')) {
    const std::string word = ToLower(item);
    if (word == "all") {
      e.all = true;
    } else if (word == "none" || word == "nil") {
      e.none = true;
    } else {
      size_t eq = item.find('=');
      std::string name(item.substr(0, eq));
      if (name.empty()) {
        return InvalidArgument(Quote(item) + " is not a variable (use VAR or VAR=value)");
      }
      if (eq == std::string_view::npos) {
        e.vars.push_back({name, std::nullopt});
      } else {
        e.vars.push_back({name, std::string(item.substr(eq + 1))});
      }
    }
  }
  if (e.none && (e.all || !e.vars.empty())) {
    return InvalidArgument("NONE cannot be combined with other names");
  }
  *out = std::move(e);
  return Status::Ok();
}

// The CPUs of a job with tasks: each node's tasks x --cpus-per-task (1 without -c), as
// Slurm allocates them, unless --cpus-per-gpu gives the count; --mincpus raises it.
// -c alone (no tasks) stays what it was: that many CPUs per node.
Status ResolveTasks(const OptionOccurrence* ntasks, const OptionOccurrence* per_node,
                    const OptionOccurrence* nodes_occ, int mincpus, SubmitOptions* o) {
  const int nodes = o->req.nodes;
  state::JobSpec& spec = o->spec;
  spec.cpus_per_task = o->IsSet("cpus-per-task") ? o->req.cpus : 0;
  if (ntasks != nullptr && spec.ntasks < nodes) {
    return InvalidArgument(ntasks->where + ": " + std::to_string(spec.ntasks) +
                           " tasks cannot run on " + std::to_string(nodes) + " nodes" +
                           (nodes_occ ? " (" + nodes_occ->where + ")" : ""));
  }
  if (ntasks != nullptr && per_node != nullptr &&
      int64_t{spec.ntasks_per_node} * nodes < spec.ntasks) {
    return InvalidArgument(ntasks->where + ": " + std::to_string(spec.ntasks) +
                           " tasks do not fit " + std::to_string(nodes) + " node(s) of " +
                           std::to_string(spec.ntasks_per_node) + " (" + per_node->where +
                           ")");
  }
  int64_t tasks_per_node = 0;
  if (per_node != nullptr) {
    tasks_per_node = spec.ntasks_per_node;
  } else if (ntasks != nullptr) {
    tasks_per_node = (spec.ntasks + nodes - 1) / nodes;
  }
  if (tasks_per_node > 0 && o->req.cpus_per_gpu == 0) {
    const int64_t cpus = tasks_per_node * std::max(1, spec.cpus_per_task);
    if (cpus > std::numeric_limits<int>::max()) {
      return InvalidArgument((per_node ? per_node : ntasks)->where + ": " +
                             std::to_string(cpus) + " CPUs per node is too many");
    }
    o->req.cpus = static_cast<int>(cpus);
  }
  if (mincpus > 0) {
    const int from_gpus = o->req.cpus_per_gpu * o->req.GpusPerNode();
    o->req.cpus = std::max(o->req.cpus, mincpus - from_gpus);
  }
  return Status::Ok();
}

// ---- The set functions: one option's occurrence into the request ----
// Each checks its value's syntax and meaning on its own; what depends on several
// options (GPUs over nodes, tasks over nodes) is resolved after the last occurrence.

Status Need(const OptionOccurrence& occ, bool ok, const std::string& problem) {
  return ok ? Status::Ok() : InvalidArgument(occ.where + ": " + problem);
}

// --gres, --gpus, --gpus-per-node, --gpus-per-task: one GPU slot, the last one wins.
Status SetGpus(const OptionOccurrence& occ, SubmitBuild* b) {
  const std::string& n = occ.name;
  GpuSlot s;
  Status st = n == "gres" ? ParseGres(occ.value, &s) : ParseGpuCount(occ.value, &s);
  if (!st.ok()) return Err(occ, st);
  s.form = n == "gpus"            ? GpuSlot::kTotal
           : n == "gpus-per-task" ? GpuSlot::kPerTask
                                  : GpuSlot::kPerNode;
  s.where = occ.where;
  b->gpu = s;
  return Status::Ok();
}

Status SetNodes(const OptionOccurrence& occ, SubmitBuild* b) {
  const std::string& v = occ.value;
  std::optional<long long> c = ParseCount(v);
  if (!c && v.find('-') != std::string::npos) {
    return InvalidArgument(occ.where + ": node ranges are not supported; give one count");
  }
  HACHI_RETURN_IF_ERROR(Need(occ, c && *c >= 1, Quote(v) + " is not a node count"));
  b->o.req.nodes = static_cast<int>(*c);
  b->nodes = &occ;
  return Status::Ok();
}

// A name that may not be empty, into `field` of the request or the spec.
template <auto SubmitOptions::*Part, auto Field>
Status SetName(const OptionOccurrence& occ, SubmitBuild* b, const char* problem) {
  HACHI_RETURN_IF_ERROR(Need(occ, !occ.value.empty(), problem));
  (b->o.*Part).*Field = occ.value;
  return Status::Ok();
}
Status SetPartition(const OptionOccurrence& occ, SubmitBuild* b) {
  return SetName<&SubmitOptions::req, &sched::JobRequest::partition>(
      occ, b, "empty partition name");
}
Status SetQos(const OptionOccurrence& occ, SubmitBuild* b) {
  return SetName<&SubmitOptions::req, &sched::JobRequest::qos>(occ, b, "empty QoS name");
}
Status SetAccount(const OptionOccurrence& occ, SubmitBuild* b) {
  return SetName<&SubmitOptions::req, &sched::JobRequest::account>(occ, b,
                                                                   "empty account name");
}
Status SetJobName(const OptionOccurrence& occ, SubmitBuild* b) {
  return SetName<&SubmitOptions::spec, &state::JobSpec::name>(occ, b, "empty job name");
}
Status SetChdir(const OptionOccurrence& occ, SubmitBuild* b) {
  return SetName<&SubmitOptions::spec, &state::JobSpec::workdir>(occ, b,
                                                                 "empty directory");
}
Status SetContainerImage(const OptionOccurrence& occ, SubmitBuild* b) {
  return SetName<&SubmitOptions::spec, &state::JobSpec::container_image>(
      occ, b, "empty image name");
}
// --output, --error.
Status SetOutputPath(const OptionOccurrence& occ, SubmitBuild* b) {
  HACHI_RETURN_IF_ERROR(Need(occ, !occ.value.empty(), "empty path"));
  (occ.name == "output" ? b->o.spec.stdout_path : b->o.spec.stderr_path) = occ.value;
  return Status::Ok();
}

Status SetTime(const OptionOccurrence& occ, SubmitBuild* b) {
  Result<Duration> d = ParseTimeLimit(occ.value, &b->o.time_unlimited);
  if (!d.ok()) return Err(occ, d.status());
  b->o.req.time_limit = *d;
  return Status::Ok();
}

// --cpus-per-task, --cpus-per-gpu, --mincpus.
Status SetCpus(const OptionOccurrence& occ, SubmitBuild* b) {
  std::optional<long long> c = ParseCount(occ.value);
  HACHI_RETURN_IF_ERROR(
      Need(occ, c && *c >= 1, Quote(occ.value) + " is not a CPU count"));
  const int n = static_cast<int>(*c);
  if (occ.name == "cpus-per-task") {
    b->o.req.cpus = n;
  } else if (occ.name == "cpus-per-gpu") {
    b->o.req.cpus_per_gpu = n;
  } else {
    b->mincpus = n;
  }
  return Status::Ok();
}

// --mem, --mem-per-gpu: one memory slot with --mem-per-cpu, the last one wins.
Status SetMemory(const OptionOccurrence& occ, SubmitBuild* b) {
  Result<int64_t> m = ParseSizeMib(occ.value);
  if (!m.ok()) return Err(occ, m.status());
  const bool per_node = occ.name == "mem";
  // Slurm's --mem=0: all of each node's memory (the server resolves it).
  b->o.req.memory_mib = !per_node ? 0 : *m == 0 ? sched::kAllOfNodeMemory : *m;
  b->o.req.memory_mib_per_gpu = per_node ? 0 : *m;
  b->mem_per_cpu = 0;
  if (*m == 0 && !per_node) {
    b->o.warnings.push_back(occ.where +
                            ": read as no memory request (the partition's default per "
                            "GPU)");
  }
  return Status::Ok();
}

// --mem-per-cpu: memory per node = this x the node's CPUs (ResolveMemPerCpu).
Status SetMemPerCpu(const OptionOccurrence& occ, SubmitBuild* b) {
  Result<int64_t> m = ParseSizeMib(occ.value);
  if (!m.ok()) return Err(occ, m.status());
  HACHI_RETURN_IF_ERROR(
      Need(occ, *m > 0, Quote(occ.value) + ": give memory per CPU above 0"));
  b->mem_per_cpu = *m;
  b->o.req.memory_mib = 0;
  b->o.req.memory_mib_per_gpu = 0;
  return Status::Ok();
}

Status SetDependency(const OptionOccurrence& occ, SubmitBuild* b) {
  Result<std::vector<sched::Dependency>> d = ParseDependency(occ.value);
  if (!d.ok()) return Err(occ, d.status());
  b->o.req.dependencies = *d;
  return Status::Ok();
}

Status SetArray(const OptionOccurrence& occ, SubmitBuild* b) {
  Result<ArraySpec> a = ParseArraySpec(occ.value);
  if (!a.ok()) return Err(occ, a.status());
  b->o.array = *a;
  return Status::Ok();
}

// The flags without a value.
Status SetExclusive(const OptionOccurrence&, SubmitBuild* b) {
  b->o.req.exclusive = true;
  return Status::Ok();
}
Status SetHold(const OptionOccurrence&, SubmitBuild* b) {
  b->o.hold = true;
  return Status::Ok();
}
Status SetRequeue(const OptionOccurrence& occ, SubmitBuild* b) {
  b->o.spec.requeue = occ.name == "requeue";
  return Status::Ok();
}
Status SetParsable(const OptionOccurrence&, SubmitBuild* b) {
  b->o.parsable = true;
  return Status::Ok();
}
Status SetOvercommit(const OptionOccurrence& occ, SubmitBuild* b) {
  b->o.warnings.push_back(occ.where +
                          ": Hachi does not over-subscribe CPUs; the job gets a CPU "
                          "for each task");
  return Status::Ok();
}

Status SetComment(const OptionOccurrence& occ, SubmitBuild* b) {
  b->o.spec.comment = occ.value;
  return Status::Ok();
}

Status SetGpuShare(const OptionOccurrence& occ, SubmitBuild* b) {
  Result<int> m = ParseShareMilli(occ.value);
  if (!m.ok()) return Err(occ, m.status());
  b->o.req.gpu_share_milli = *m;
  b->share = &occ;
  return Status::Ok();
}

Status SetGpuMem(const OptionOccurrence& occ, SubmitBuild* b) {
  Result<int64_t> m = ParseSizeMib(occ.value);
  if (!m.ok()) return Err(occ, m.status());
  HACHI_RETURN_IF_ERROR(Need(occ, *m > 0, "GPU memory must be more than 0"));
  b->o.req.gpu_memory_mib = *m;
  b->gpu_mem = &occ;
  return Status::Ok();
}

Status SetShmSize(const OptionOccurrence& occ, SubmitBuild* b) {
  Result<int64_t> m = ParseSizeMib(occ.value);
  if (!m.ok()) return Err(occ, m.status());
  b->o.spec.shm_mib = *m;
  return Status::Ok();
}

Status SetWrap(const OptionOccurrence& occ, SubmitBuild* b) {
  HACHI_RETURN_IF_ERROR(Need(occ, !Trim(occ.value).empty(), "empty command"));
  b->o.wrap = occ.value;
  return Status::Ok();
}

// --ntasks, --ntasks-per-node (alias --tasks-per-node).
Status SetTasks(const OptionOccurrence& occ, SubmitBuild* b) {
  std::optional<long long> c = ParseCount(occ.value);
  HACHI_RETURN_IF_ERROR(
      Need(occ, c && *c >= 1, Quote(occ.value) + " is not a task count"));
  const bool total = occ.name == "ntasks";
  (total ? b->o.spec.ntasks : b->o.spec.ntasks_per_node) = static_cast<int>(*c);
  (total ? b->ntasks : b->per_node) = &occ;
  return Status::Ok();
}

Status SetSignal(const OptionOccurrence& occ, SubmitBuild* b) {
  Status st = ParseSignalSpec(occ.value, &b->o.spec);
  return st.ok() ? st : Err(occ, st);
}

Status SetExport(const OptionOccurrence& occ, SubmitBuild* b) {
  Status st = ParseExportSpec(occ.value, &b->o.export_env);
  return st.ok() ? st : Err(occ, st);
}

Status SetOpenMode(const OptionOccurrence& occ, SubmitBuild* b) {
  const std::string& v = occ.value;
  // Slurm reads the first letter only.
  const char c = v.empty() ? 0 : static_cast<char>(v[0] | 0x20);
  HACHI_RETURN_IF_ERROR(Need(occ, c == 'a' || c == 't',
                             Quote(v) + " is not an open mode (use append or truncate)"));
  b->o.spec.open_append = c == 'a';
  return Status::Ok();
}

// Where the batch script runs: "first" node (sbatch's default, Slurm's batch step) or
// "all" nodes (hachi submit's default).
Status SetBatchNodes(const OptionOccurrence& occ, SubmitBuild* b) {
  const std::string& v = occ.value;
  HACHI_RETURN_IF_ERROR(
      Need(occ, v == "first" || v == "all",
           Quote(v) + " is not where a batch script runs (use first or all)"));
  b->o.spec.batch_on_first_node = v == "first";
  return Status::Ok();
}

// -C, -w, -x: the syntax here; node names against the cluster by the server.
Status SetConstraint(const OptionOccurrence& occ, SubmitBuild* b) {
  Result<sched::Constraint> c = sched::Constraint::Parse(occ.value);
  if (!c.ok()) return Err(occ, c.status());
  b->o.req.constraint = occ.value;
  return Status::Ok();
}
Status SetNodeList(const OptionOccurrence& occ, SubmitBuild* b) {
  const std::string& v = occ.value;
  if (v.find('/') != std::string::npos) {
    return InvalidArgument(occ.where +
                           ": a file of node names is not supported (give the names)");
  }
  Result<std::vector<std::string>> hosts = ExpandHostList(v);
  if (!hosts.ok()) return Err(occ, hosts.status());
  (occ.name == "nodelist" ? b->o.req.nodelist : b->o.req.exclude) = v;
  return Status::Ok();
}

// --begin, --deadline: the syntax here; ResolveSubmitTimes reads them against the
// submitting clock.
Status SetStartWindow(const OptionOccurrence& occ, SubmitBuild* b) {
  Result<Time> t = ParseSlurmTime(occ.value, 0, 0);
  if (!t.ok()) return Err(occ, t.status());
  (occ.name == "begin" ? b->o.begin_text : b->o.deadline_text) = occ.value;
  return Status::Ok();
}

Status SetNice(const OptionOccurrence& occ, SubmitBuild* b) {
  const std::string& v = occ.value;
  // --nice alone: 100, as sbatch. Slurm's range is +-2147483645.
  std::optional<long long> x = v.empty() ? std::optional<long long>(100) : ParseInt(v);
  if (!x || *x < -2147483645LL || *x > 2147483645LL) {
    return InvalidArgument(occ.where + ": " + Quote(v) +
                           " is not a nice value (an integer, e.g. --nice=100)");
  }
  b->o.req.nice = static_cast<int>(*x);
  return Status::Ok();
}

// ---- The table ----

using K = OptionKind;
constexpr uint8_t kBatch = kCmdBatchLike;
constexpr uint8_t kBatchSrun = kCmdBatchLike | kCmdSrun;
// Taken by srun too, where outside an allocation it shapes the allocation srun makes.
constexpr uint8_t kShape = kCmdBatchLike | kCmdSrun | kSrunShapesAllocation;
constexpr uint8_t kAll = kCmdBatchLike | kCmdSrun;
constexpr uint8_t kSrunOnly = kCmdSrun;
constexpr std::string_view kNoMail = "Hachi sends no mail";
constexpr std::string_view kAffinity = "CPUs are placed by GPU affinity";

constexpr std::array kTable = {
    // Resources.
    OptionRow{"gres", 0, K::kValue, kShape, SetGpus, ""},
    OptionRow{"gpus", 'G', K::kValue, kShape, SetGpus, ""},
    OptionRow{"gpus-per-node", 0, K::kValue, kShape, SetGpus, ""},
    OptionRow{"gpus-per-task", 0, K::kValue, kShape, SetGpus, ""},
    OptionRow{"nodes", 'N', K::kValue, kShape, SetNodes, ""},
    OptionRow{"partition", 'p', K::kValue, kShape, SetPartition, ""},
    OptionRow{"time", 't', K::kValue, kShape, SetTime, ""},
    OptionRow{"cpus-per-task", 'c', K::kValue, kShape, SetCpus, ""},
    OptionRow{"cpus-per-gpu", 0, K::kValue, kBatch, SetCpus, ""},
    OptionRow{"mincpus", 0, K::kValue, kBatch, SetCpus, ""},
    OptionRow{"mem", 0, K::kValue, kShape, SetMemory, ""},
    OptionRow{"mem-per-gpu", 0, K::kValue, kShape, SetMemory, ""},
    OptionRow{"mem-per-cpu", 0, K::kValue, kShape, SetMemPerCpu, ""},
    OptionRow{"exclusive", 0, K::kFlag, kShape, SetExclusive, ""},
    OptionRow{"gpu-share", 0, K::kValue, kBatch, SetGpuShare, ""},
    OptionRow{"gpu-mem", 0, K::kValue, kBatch, SetGpuMem, ""},
    // Tasks (the job runtime).
    OptionRow{"ntasks", 'n', K::kValue, kShape, SetTasks, ""},
    OptionRow{"ntasks-per-node", 0, K::kValue, kShape, SetTasks, "", "tasks-per-node"},
    OptionRow{"overcommit", 'O', K::kFlag, kBatch, SetOvercommit, ""},
    // Accounting and placement in the queue.
    OptionRow{"job-name", 'J', K::kValue, kShape, SetJobName, ""},
    OptionRow{"qos", 'q', K::kValue, kShape, SetQos, ""},
    OptionRow{"account", 'A', K::kValue, kShape, SetAccount, ""},
    OptionRow{"dependency", 'd', K::kValue, kBatch, SetDependency, ""},
    OptionRow{"array", 'a', K::kValue, kBatch, SetArray, ""},
    OptionRow{"hold", 'H', K::kFlag, kBatch, SetHold, ""},
    OptionRow{"requeue", 0, K::kFlag, kBatch, SetRequeue, ""},
    OptionRow{"no-requeue", 0, K::kFlag, kBatch, SetRequeue, ""},
    OptionRow{"comment", 0, K::kValue, kBatch, SetComment, ""},
    // Node selection and timing, honoured by the scheduler.
    OptionRow{"constraint", 'C', K::kValue, kShape, SetConstraint, ""},
    OptionRow{"nodelist", 'w', K::kValue, kShape, SetNodeList, ""},
    OptionRow{"exclude", 'x', K::kValue, kBatch, SetNodeList, ""},
    OptionRow{"begin", 'b', K::kValue, kBatch, SetStartWindow, ""},
    OptionRow{"deadline", 0, K::kValue, kBatch, SetStartWindow, ""},
    OptionRow{"nice", 0, K::kOptionalValue, kBatch, SetNice, ""},
    // What runs and where its output goes.
    OptionRow{"output", 'o', K::kValue, kBatchSrun, SetOutputPath, ""},
    OptionRow{"error", 'e', K::kValue, kBatchSrun, SetOutputPath, ""},
    OptionRow{"open-mode", 0, K::kValue, kBatch, SetOpenMode, ""},
    OptionRow{"chdir", 'D', K::kValue, kShape, SetChdir, ""},
    OptionRow{"export", 0, K::kValue, kBatchSrun, SetExport, ""},
    OptionRow{"signal", 0, K::kValue, kBatch, SetSignal, ""},
    OptionRow{"container-image", 0, K::kValue, kBatch, SetContainerImage, ""},
    OptionRow{"shm-size", 0, K::kValue, kBatch, SetShmSize, ""},
    OptionRow{"wrap", 0, K::kValue, kBatch, SetWrap, ""},
    OptionRow{"parsable", 0, K::kFlag, kBatch, SetParsable, ""},
    OptionRow{"batch-nodes", 0, K::kValue, kBatch, SetBatchNodes, ""},
    // Accepted for Slurm scripts, ignored with a warning.
    OptionRow{"mail-type", 0, K::kIgnoredValue, kBatch, nullptr, kNoMail},
    OptionRow{"mail-user", 0, K::kIgnoredValue, kBatch, nullptr, kNoMail},
    OptionRow{"get-user-env", 0, K::kIgnoredFlag, kBatch, nullptr,
              "the job always inherits the environment"},
    OptionRow{"propagate", 0, K::kIgnoredValue, kBatch, nullptr,
              "resource limits are not propagated"},
    OptionRow{"hint", 0, K::kIgnoredValue, kBatch, nullptr, kAffinity},
    OptionRow{"threads-per-core", 0, K::kIgnoredValue, kBatch, nullptr, kAffinity},
    OptionRow{"distribution", 'm', K::kIgnoredValue, kBatchSrun, nullptr, kAffinity},
    OptionRow{"wckey", 0, K::kIgnoredValue, kBatch, nullptr, "no workload keys"},
    // The front-ends' own (sbatch_cmd.cc, srun_plan.cc, srun.cc, job_cmds.cc).
    OptionRow{"server", 0, K::kFrontEnd, kAll, nullptr, "", {}, true},
    OptionRow{"help", 'h', K::kFrontEnd, kAll, nullptr, ""},
    OptionRow{"usage", 0, K::kFrontEnd, kCmdSbatch | kCmdSrun | kCmdSalloc, nullptr, ""},
    OptionRow{"quiet", 'Q', K::kFrontEnd, kCmdSbatch | kCmdSrun | kCmdSalloc, nullptr,
              ""},
    OptionRow{"wait", 'W', K::kFrontEnd, kCmdSbatch, nullptr, ""},
    OptionRow{"test-only", 0, K::kFrontEnd, kCmdSbatch, nullptr, ""},
    OptionRow{"json", 0, K::kFrontEnd, kCmdSbatch, nullptr, ""},
    OptionRow{"input", 'i', K::kFrontEnd, kSrunOnly, nullptr, "", {}, true},
    OptionRow{"label", 'l', K::kFrontEnd, kSrunOnly, nullptr, ""},
    OptionRow{"unbuffered", 'u', K::kFrontEnd, kSrunOnly, nullptr, ""},
    OptionRow{"kill-on-bad-exit", 'K', K::kFrontEnd, kSrunOnly, nullptr, ""},
    OptionRow{"overlap", 0, K::kFrontEnd, kSrunOnly, nullptr, ""},
    OptionRow{"exact", 0, K::kFrontEnd, kSrunOnly, nullptr, ""},
    OptionRow{"whole", 0, K::kFrontEnd, kSrunOnly, nullptr, ""},
    OptionRow{"cpu-bind", 0, K::kFrontEnd, kSrunOnly, nullptr, "", {}, true},
    OptionRow{"mpi", 0, K::kFrontEnd, kSrunOnly, nullptr, "", {}, true},
    OptionRow{"jobid", 0, K::kFrontEnd, kSrunOnly, nullptr, "", {}, true},
    OptionRow{"pty", 0, K::kFrontEnd, kSrunOnly, nullptr, ""},
    OptionRow{"verbose", 'v', K::kFrontEnd, kSrunOnly, nullptr, ""},
};

// GPUs: Slurm's --gres and --gpus-per-node count per node, --gpus the whole job,
// --gpus-per-task each node's tasks times this.
Status ResolveGpus(SubmitBuild* b) {
  SubmitOptions& o = b->o;
  GpuSlot& gpu = b->gpu;
  const int m = o.req.nodes;
  o.req.gpu_model = gpu.model;
  // A type written like a MIG profile (gpu:1g.10gb:2, Slurm's MIG gres types) asks for
  // that many MIG devices of it, not for whole GPUs of a model.
  if (sched::LooksLikeMigProfile(gpu.model)) {
    o.req.mig_profile = gpu.model;
    o.req.gpu_model.clear();
  }
  if (gpu.form == GpuSlot::kPerTask) {
    // Hachi's batch shell sees the node's GPUs, as Slurm's does; a task's own GPUs come
    // with job steps.
    const state::JobSpec& t = o.spec;
    if (t.ntasks_per_node == 0 && t.ntasks > 0 && t.ntasks % m != 0) {
      return InvalidArgument(gpu.where + ": " + std::to_string(t.ntasks) +
                             " tasks do not spread evenly over " + std::to_string(m) +
                             " nodes (give --ntasks-per-node)");
    }
    const int per_node_tasks = t.ntasks_per_node > 0 ? t.ntasks_per_node
                               : t.ntasks > 0        ? t.ntasks / m
                                                     : 1;
    if (int64_t{gpu.count} * per_node_tasks > std::numeric_limits<int>::max()) {
      return InvalidArgument(gpu.where + ": too many GPUs per node");
    }
    gpu.count *= per_node_tasks;
    gpu.form = GpuSlot::kPerNode;
  }
  if (gpu.form == GpuSlot::kPerNode) {
    // Both counts have up to 9 digits: their product can overflow an int (UBSan, found
    // while fuzzing). What fits an int but no cluster is the server's to refuse.
    if (int64_t{gpu.count} * m > std::numeric_limits<int>::max()) {
      return InvalidArgument(gpu.where + ": " + std::to_string(gpu.count) +
                             " GPUs on each of " + std::to_string(m) +
                             " nodes is too many");
    }
    o.req.gpus = gpu.count * m;
    o.req.gpus_per_node = m > 1 ? gpu.count : 0;
  } else if (gpu.form == GpuSlot::kTotal) {
    if (m > 1 && gpu.count % m != 0) {
      return InvalidArgument(gpu.where + ": " + std::to_string(gpu.count) +
                             " GPUs do not divide evenly over " + std::to_string(m) +
                             " nodes (" + b->nodes->where + ")");
    }
    o.req.gpus = gpu.count;
    o.req.gpus_per_node = m > 1 ? gpu.count / m : 0;
  }
  if (b->share != nullptr) {
    if (gpu.form == GpuSlot::kUnset) o.req.gpus = 1;
    if (o.req.gpus != 1 || m > 1) {
      return InvalidArgument(b->share->where +
                             ": a GPU share is a fraction of one GPU; the job "
                             "asks for " +
                             std::to_string(o.req.TotalGpus()) + " GPUs");
    }
  }
  if (b->gpu_mem != nullptr && b->share == nullptr) {
    // Whole GPUs: --gpu-mem asks for GPUs with at least that much memory.
    o.req.min_gpu_memory_mib = o.req.gpu_memory_mib;
    o.req.gpu_memory_mib = 0;
  }
  return Status::Ok();
}

// --mem-per-cpu: Slurm's memory per allocated CPU; Hachi allocates exactly the CPUs
// asked for (1 when none are), so the node's memory is this times them.
void ResolveMemPerCpu(SubmitBuild* b) {
  if (b->mem_per_cpu <= 0) return;
  sched::JobRequest& req = b->o.req;
  const int64_t cpus =
      std::max<int64_t>(1, req.cpus + int64_t{req.cpus_per_gpu} * req.GpusPerNode());
  req.memory_mib = b->mem_per_cpu * cpus;
}

template <typename Pred>
const OptionRow* FindRow(uint8_t commands, Pred pred) {
  for (const OptionRow& r : kTable) {
    if ((r.commands & commands) != 0 && pred(r)) return &r;
  }
  return nullptr;
}

}  // namespace

std::span<const OptionRow> SubmitOptionTable() { return kTable; }

const OptionRow* FindOption(std::string_view name, uint8_t commands) {
  return FindRow(commands, [&](const OptionRow& r) {
    return r.name == name || (!r.alias.empty() && r.alias == name);
  });
}

const OptionRow* FindShortOption(char c, uint8_t commands) {
  return FindRow(commands, [&](const OptionRow& r) { return r.short_name == c; });
}

bool TakesValue(const OptionRow& row) {
  return row.kind == OptionKind::kValue || row.kind == OptionKind::kIgnoredValue ||
         row.kind == OptionKind::kRefused ||
         (row.kind == OptionKind::kFrontEnd && row.front_end_value);
}

Result<SubmitOptions> BuildSubmitOptions(const ParsedOptions& directives,
                                         const ParsedOptions& flags) {
  std::vector<OptionOccurrence> all = directives.options;
  all.insert(all.end(), flags.options.begin(), flags.options.end());
  std::stable_sort(all.begin(), all.end(),
                   [](const OptionOccurrence& a, const OptionOccurrence& b) {
                     return a.source < b.source;
                   });
  SubmitBuild b;
  b.o.warnings = directives.warnings;
  b.o.warnings.insert(b.o.warnings.end(), flags.warnings.begin(), flags.warnings.end());
  for (const OptionOccurrence& occ : all) {
    b.o.explicitly_set.insert(occ.name);
    const OptionRow* row = FindOption(occ.name);
    if (row != nullptr && row->set != nullptr) HACHI_RETURN_IF_ERROR(row->set(occ, &b));
  }
  // What several options decide together, once the last occurrence of each is known.
  HACHI_RETURN_IF_ERROR(ResolveGpus(&b));
  HACHI_RETURN_IF_ERROR(ResolveTasks(b.ntasks, b.per_node, b.nodes, b.mincpus, &b.o));
  ResolveMemPerCpu(&b);
  return std::move(b.o);
}

}  // namespace hachi::cli
