#include "cli/directives.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <limits>

#include "api/request_limits.h"
#include "core/hostlist.h"
#include "core/signals.h"
#include "core/slurm_time.h"
#include "core/strings.h"
#include "sched/dependencies.h"
#include "sched/features.h"
#include "sched/mig.h"

namespace hachi::cli {
namespace {

// How an option is treated. Ignored options are Slurm options that change nothing
// harmful when dropped (mail, task counts for one-task jobs); refused ones would change
// the job's meaning if dropped, so they are errors with a pointer to what to use.
// kOptionalValue (issue 17, --nice[=N]): a value only with '=', never the next word.
enum class Kind : uint8_t {
  kValue,
  kFlag,
  kIgnoredValue,
  kIgnoredFlag,
  kRefused,
  kOptionalValue
};

struct OptionDef {
  std::string_view name;
  char short_name;
  Kind kind;
  std::string_view note;  // ignored: why it is harmless; refused: what to use instead
};

constexpr std::array kOptions = {
    OptionDef{"gres", 0, Kind::kValue, ""},
    OptionDef{"gpus", 'G', Kind::kValue, ""},
    OptionDef{"gpus-per-node", 0, Kind::kValue, ""},
    OptionDef{"nodes", 'N', Kind::kValue, ""},
    OptionDef{"partition", 'p', Kind::kValue, ""},
    OptionDef{"time", 't', Kind::kValue, ""},
    OptionDef{"cpus-per-task", 'c', Kind::kValue, ""},
    OptionDef{"cpus-per-gpu", 0, Kind::kValue, ""},
    OptionDef{"mem", 0, Kind::kValue, ""},
    OptionDef{"mem-per-gpu", 0, Kind::kValue, ""},
    OptionDef{"job-name", 'J', Kind::kValue, ""},
    OptionDef{"output", 'o', Kind::kValue, ""},
    OptionDef{"error", 'e', Kind::kValue, ""},
    OptionDef{"dependency", 'd', Kind::kValue, ""},
    OptionDef{"exclusive", 0, Kind::kFlag, ""},
    OptionDef{"array", 'a', Kind::kValue, ""},
    OptionDef{"qos", 'q', Kind::kValue, ""},
    OptionDef{"account", 'A', Kind::kValue, ""},
    OptionDef{"hold", 'H', Kind::kFlag, ""},
    OptionDef{"requeue", 0, Kind::kFlag, ""},
    OptionDef{"no-requeue", 0, Kind::kFlag, ""},
    OptionDef{"comment", 0, Kind::kValue, ""},
    OptionDef{"chdir", 'D', Kind::kValue, ""},
    OptionDef{"gpu-share", 0, Kind::kValue, ""},
    OptionDef{"gpu-mem", 0, Kind::kValue, ""},
    OptionDef{"container-image", 0, Kind::kValue, ""},
    OptionDef{"shm-size", 0, Kind::kValue, ""},
    OptionDef{"wrap", 0, Kind::kValue, ""},
    OptionDef{"parsable", 0, Kind::kFlag, ""},
    // Issue 17 (the job runtime): honoured, see BuildSubmitOptions.
    OptionDef{"ntasks", 'n', Kind::kValue, ""},
    OptionDef{"ntasks-per-node", 0, Kind::kValue, ""},
    OptionDef{"export", 0, Kind::kValue, ""},
    OptionDef{"open-mode", 0, Kind::kValue, ""},
    // Issue 18: where the batch script runs: "first" node (sbatch's default, Slurm's
    // batch step) or "all" nodes (hachi submit's default).
    OptionDef{"batch-nodes", 0, Kind::kValue, ""},
    OptionDef{"signal", 0, Kind::kValue, ""},
    OptionDef{"mincpus", 0, Kind::kValue, ""},
    OptionDef{"overcommit", 'O', Kind::kFlag, ""},
    // Issue 17 (helper A): node selection and timing, honoured by the scheduler.
    OptionDef{"constraint", 'C', Kind::kValue, ""},
    OptionDef{"nodelist", 'w', Kind::kValue, ""},
    OptionDef{"exclude", 'x', Kind::kValue, ""},
    OptionDef{"begin", 'b', Kind::kValue, ""},
    OptionDef{"deadline", 0, Kind::kValue, ""},
    OptionDef{"nice", 0, Kind::kOptionalValue, ""},
    // Accepted for Slurm scripts, ignored with a warning.
    OptionDef{"mail-type", 0, Kind::kIgnoredValue, "Hachi sends no mail"},
    OptionDef{"mail-user", 0, Kind::kIgnoredValue, "Hachi sends no mail"},
    OptionDef{"get-user-env", 0, Kind::kIgnoredFlag,
              "the job always inherits the environment"},
    OptionDef{"propagate", 0, Kind::kIgnoredValue, "resource limits are not propagated"},
    OptionDef{"hint", 0, Kind::kIgnoredValue, "CPUs are placed by GPU affinity"},
    OptionDef{"threads-per-core", 0, Kind::kIgnoredValue,
              "CPUs are placed by GPU affinity"},
    OptionDef{"distribution", 'm', Kind::kIgnoredValue,
              "CPUs are placed by GPU affinity"},
    OptionDef{"wckey", 0, Kind::kIgnoredValue, "no workload keys"},
    // Would change the job if dropped: refused.
    // Issue 17 (lead): read as Slurm reads them, see BuildSubmitOptions.
    OptionDef{"mem-per-cpu", 0, Kind::kValue, ""},
    OptionDef{"gpus-per-task", 0, Kind::kValue, ""},
};

const OptionDef* FindLong(std::string_view name) {
  if (name == "tasks-per-node") name = "ntasks-per-node";  // Slurm's alias
  for (const OptionDef& d : kOptions) {
    if (d.name == name) return &d;
  }
  return nullptr;
}
const OptionDef* FindShort(char c) {
  for (const OptionDef& d : kOptions) {
    if (d.short_name == c) return &d;
  }
  return nullptr;
}
bool TakesValue(const OptionDef& d) {
  return d.kind == Kind::kValue || d.kind == Kind::kIgnoredValue ||
         d.kind == Kind::kRefused;
}

std::string Quote(std::string_view v) { return "'" + std::string(v) + "'"; }

// Parses option tokens (argv, or the words of one directive line) into occurrences.
// `where_prefix` is "" for flags and "job.sh:4: #SBATCH " for a directive; flags are
// located as "--time '9x'", directives as the words written.
Status ParseTokens(const std::vector<std::string>& tokens, std::string_view where_prefix,
                   int source, bool allow_positional, ParsedOptions* out) {
  const bool directive = !where_prefix.empty();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& tok = tokens[i];
    if (tok == "--" && allow_positional) {
      out->positional.assign(tokens.begin() + static_cast<long>(i) + 1, tokens.end());
      return Status::Ok();
    }
    if (tok.size() < 2 || tok[0] != '-') {
      if (allow_positional) {
        out->positional.assign(tokens.begin() + static_cast<long>(i), tokens.end());
        return Status::Ok();
      }
      return InvalidArgument(std::string(where_prefix) + tok + ": not an option");
    }
    const OptionDef* def = nullptr;
    std::string written;  // the option as the user spelled it, without its value
    std::string value;
    bool has_value = false;
    if (tok[1] == '-') {
      std::string_view body = std::string_view(tok).substr(2);
      size_t eq = body.find('=');
      std::string_view name = body.substr(0, eq);
      written = "--" + std::string(name);
      def = FindLong(name);
      if (eq != std::string_view::npos) {
        value = std::string(body.substr(eq + 1));
        has_value = true;
      }
    } else {
      written = tok.substr(0, 2);
      def = FindShort(tok[1]);
      if (tok.size() > 2) {
        value = tok.substr(2);
        has_value = true;
      }
    }
    if (def == nullptr) {
      return InvalidArgument(std::string(where_prefix) + written + ": unknown option");
    }
    std::string shown = tok;  // for directives: the words as written
    if (TakesValue(*def) && !has_value) {
      if (i + 1 >= tokens.size()) {
        return InvalidArgument(std::string(where_prefix) + written + ": needs a value");
      }
      value = tokens[++i];
      shown += " " + value;
    } else if (!TakesValue(*def) && has_value && def->kind != Kind::kIgnoredFlag &&
               def->kind != Kind::kOptionalValue) {
      // Also "-Hx": clusters of short flags are not supported.
      return InvalidArgument(std::string(where_prefix) + tok + ": " + written +
                             " takes no value");
    }
    const bool shows_value =
        TakesValue(*def) || (has_value && def->kind == Kind::kOptionalValue);
    std::string where = directive     ? std::string(where_prefix) + shown
                        : shows_value ? written + " " + Quote(value)
                                      : written;
    switch (def->kind) {
      case Kind::kRefused:
        return InvalidArgument(where + ": not supported by Hachi (" +
                               std::string(def->note) + ")");
      case Kind::kIgnoredValue:
      case Kind::kIgnoredFlag:
        out->warnings.push_back(where + ": ignored (" + std::string(def->note) + ")");
        break;
      case Kind::kValue:
      case Kind::kFlag:
      case Kind::kOptionalValue:
        out->options.push_back({std::string(def->name), value, where, source});
        break;
    }
  }
  return Status::Ok();
}

// Splits a directive's text into words: whitespace separated, "..." and '...' quoted,
// a word starting with '#' begins a comment.
Result<std::vector<std::string>> SplitWords(std::string_view s) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    if (i >= s.size() || s[i] == '#') break;
    std::string w;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') {
      if (s[i] == '"' || s[i] == '\'') {
        char q = s[i++];
        size_t end = s.find(q, i);
        if (end == std::string_view::npos) return InvalidArgument("unterminated quote");
        w.append(s.substr(i, end - i));
        i = end + 1;
      } else {
        w.push_back(s[i++]);
      }
    }
    words.push_back(std::move(w));
  }
  return words;
}

std::optional<long long> ParseCount(std::string_view s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  return ParseInt(s);
}

// The GPU request, one slot for --gres, --gpus and --gpus-per-node: the last one given
// wins, so a flag of one form overrides a directive of another.
struct GpuSlot {
  enum Form : uint8_t { kUnset, kPerNode, kTotal, kPerTask } form = kUnset;
  int count = 0;
  std::string model;
  std::string where;
};

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

// --gpus / --gpus-per-node: [MODEL:]N.
Status ParseGpuCount(std::string_view v, GpuSlot* slot) {
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

// Issue 17 (the job runtime): --signal, --export, --open-mode.

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

// ---- Issue 17 (helper A): -C, -w, -x, --begin, --deadline, --nice ----

// The options of issue 17's scheduler part, one occurrence; other options pass. The
// values are checked here (syntax); the times are resolved against the clock by
// ResolveSubmitTimes, the node names against the cluster by the server.
Status ApplySelectionAndTiming(const OptionOccurrence& occ, SubmitOptions* o) {
  const std::string& n = occ.name;
  const std::string& v = occ.value;
  if (n == "constraint") {
    Result<sched::Constraint> c = sched::Constraint::Parse(v);
    if (!c.ok()) return Err(occ, c.status());
    o->req.constraint = v;
  } else if (n == "nodelist" || n == "exclude") {
    if (v.find('/') != std::string::npos) {
      return InvalidArgument(occ.where +
                             ": a file of node names is not supported (give the names)");
    }
    Result<std::vector<std::string>> hosts = ExpandHostList(v);
    if (!hosts.ok()) return Err(occ, hosts.status());
    (n == "nodelist" ? o->req.nodelist : o->req.exclude) = v;
  } else if (n == "begin" || n == "deadline") {
    Result<Time> t = ParseSlurmTime(v, 0, 0);  // syntax only; the clock comes later
    if (!t.ok()) return Err(occ, t.status());
    (n == "begin" ? o->begin_text : o->deadline_text) = v;
  } else if (n == "nice") {
    // --nice alone: 100, as sbatch. Slurm's range is +-2147483645.
    std::optional<long long> x = v.empty() ? std::optional<long long>(100) : ParseInt(v);
    if (!x || *x < -2147483645LL || *x > 2147483645LL) {
      return InvalidArgument(occ.where + ": " + Quote(v) +
                             " is not a nice value (an integer, e.g. --nice=100)");
    }
    o->req.nice = static_cast<int>(*x);
  }
  return Status::Ok();
}

}  // namespace

Result<ArraySpec> ParseArraySpec(std::string_view text) {
  ArraySpec spec;
  std::string_view body = text;
  size_t pct = text.find('%');
  if (pct != std::string_view::npos) {
    body = text.substr(0, pct);
    std::optional<long long> m = ParseCount(text.substr(pct + 1));
    if (!m || *m <= 0) {
      return InvalidArgument(Quote(text.substr(pct + 1)) +
                             " is not a task limit (use %N, N >= 1)");
    }
    spec.max_running = static_cast<int>(*m);
  }
  if (body.empty()) return InvalidArgument("no task ids (use 1-100, 1,3,5 or 0-15:4)");
  for (std::string_view item : Split(body, ',')) {
    const std::string bad = Quote(item) + " is not a task range (use N, N-M or N-M:STEP)";
    ArraySpec::Range r;
    std::string_view range = item;
    size_t colon = item.find(':');
    if (colon != std::string_view::npos) {
      std::optional<long long> step = ParseCount(item.substr(colon + 1));
      if (!step || *step <= 0) return InvalidArgument(bad);
      r.step = static_cast<int>(*step);
      range = item.substr(0, colon);
    }
    size_t dash = range.find('-');
    std::optional<long long> a = ParseCount(range.substr(0, dash));
    std::optional<long long> b =
        dash == std::string_view::npos ? a : ParseCount(range.substr(dash + 1));
    if (!a || !b) return InvalidArgument(bad);
    if (*a > *b)
      return InvalidArgument(Quote(item) + ": the range ends before it starts");
    if (*b > api::kMaxArrayTaskId) {
      return InvalidArgument(Quote(item) + ": task ids go up to " +
                             std::to_string(api::kMaxArrayTaskId));
    }
    r.first = static_cast<int>(*a);
    r.last = static_cast<int>(*b);
    spec.ranges.push_back(r);
  }
  size_t n = ExpandArray(spec).size();
  if (n > static_cast<size_t>(api::kMaxArrayTasks)) {
    return InvalidArgument(std::to_string(n) + " tasks; an array has at most " +
                           std::to_string(api::kMaxArrayTasks));
  }
  return spec;
}

std::vector<int> ExpandArray(const ArraySpec& spec) {
  std::vector<int> ids;
  for (const ArraySpec::Range& r : spec.ranges) {
    for (long long i = r.first; i <= r.last; i += r.step) {
      ids.push_back(static_cast<int>(i));
      // Bounded work: ParseArraySpec refuses the count anyway.
      if (ids.size() > static_cast<size_t>(api::kMaxArrayTasks) * 4) break;
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

Result<Duration> ParseTimeLimit(std::string_view text, bool* unlimited) {
  *unlimited = false;
  const Status bad = InvalidArgument("not a time (use MM, HH:MM:SS or D-HH:MM:SS)");
  std::string lower = ToLower(text);
  if (lower == "unlimited" || lower == "infinite") {
    *unlimited = true;
    return Duration{0};
  }
  long long days = 0;
  std::string_view rest = text;
  size_t dash = text.find('-');
  if (dash != std::string_view::npos) {
    std::optional<long long> d = ParseCount(text.substr(0, dash));
    if (!d) return bad;
    days = *d;
    rest = text.substr(dash + 1);
  }
  std::vector<std::string_view> parts = Split(rest, ':');
  if (parts.size() > 3) return bad;
  std::vector<long long> v;
  for (std::string_view p : parts) {
    std::optional<long long> n = ParseCount(p);
    if (!n) return bad;
    v.push_back(*n);
  }
  long long secs = 0;
  if (dash != std::string_view::npos) {
    // D-HH, D-HH:MM, D-HH:MM:SS
    secs = v[0] * kHour + (v.size() > 1 ? v[1] * kMinute : 0) + (v.size() > 2 ? v[2] : 0);
    if ((v.size() > 1 && v[1] >= 60) || (v.size() > 2 && v[2] >= 60)) return bad;
  } else if (v.size() == 1) {
    secs = v[0] * kMinute;  // minutes
  } else if (v.size() == 2) {
    if (v[1] >= 60) return bad;
    secs = v[0] * kMinute + v[1];  // MM:SS
  } else {
    if (v[1] >= 60 || v[2] >= 60) return bad;
    secs = v[0] * kHour + v[1] * kMinute + v[2];
  }
  return Duration{days * kDay + secs};
}

Result<int64_t> ParseSizeMib(std::string_view text, char default_unit) {
  const Status bad =
      InvalidArgument(Quote(text) + " is not a size (use e.g. 512M, 20G, 1T)");
  if (text.empty()) return bad;
  char unit = default_unit;
  std::string_view num = text;
  char last = text.back();
  if (last < '0' || last > '9') {
    unit = static_cast<char>(last >= 'a' ? last - 'a' + 'A' : last);
    num = text.substr(0, text.size() - 1);
    if (!num.empty() && (num.back() == 'B' || num.back() == 'b') && unit != 'B') {
      return bad;
    }
    // Issue 17: Slurm takes an optional B after the unit, any case ("4GB", "4096mb").
    if (unit == 'B' && !num.empty() && (num.back() < '0' || num.back() > '9')) {
      const char u = num.back();
      unit = static_cast<char>(u >= 'a' ? u - 'a' + 'A' : u);
      num.remove_suffix(1);
    }
  }
  std::optional<long long> n = ParseCount(num);
  if (!n) return bad;
  switch (unit) {
    case 'K':
      return int64_t{(*n + 1023) / 1024};
    case 'M':
      return int64_t{*n};
    case 'G':
      return int64_t{*n} * 1024;
    case 'T':
      return int64_t{*n} * 1024 * 1024;
    default:
      return bad;
  }
}

state::EnvList ExportEnvironment(const ExportSpec& spec, state::EnvList submitter) {
  state::EnvList out;
  if (spec.all) out = std::move(submitter);
  for (const ExportSpec::Var& var : spec.vars) {
    std::optional<std::string> value = var.value;
    if (!value && !spec.all) {  // a name alone: its value from the submitter, if set
      for (const auto& [k, v] : submitter) {
        if (k == var.name) value = v;  // the last one, as getenv's environment has one
      }
    }
    if (!value) continue;
    auto same = std::find_if(out.begin(), out.end(),
                             [&](const auto& kv) { return kv.first == var.name; });
    if (same != out.end()) {
      same->second = *value;
    } else {
      out.emplace_back(var.name, *value);
    }
  }
  return out;
}

Status ResolveSubmitTimes(Time now, int64_t utc_offset, SubmitOptions* o) {
  // Issue 17 (helper A): --begin / --deadline against the submitting clock.
  if (!o->begin_text.empty()) {
    Result<Time> t = ParseSlurmTime(o->begin_text, now, utc_offset);
    if (!t.ok()) return InvalidArgument("--begin: " + t.status().message());
    o->req.begin_time = *t > now ? *t : 0;
  }
  if (!o->deadline_text.empty()) {
    Result<Time> t = ParseSlurmTime(o->deadline_text, now, utc_offset);
    if (!t.ok()) return InvalidArgument("--deadline: " + t.status().message());
    if (*t <= now) {
      return InvalidArgument("--deadline " + o->deadline_text + ": the time has passed");
    }
    o->req.deadline = *t;
  }
  return Status::Ok();
}

Result<ParsedOptions> ParseFlags(const std::vector<std::string>& args) {
  ParsedOptions out;
  HACHI_RETURN_IF_ERROR(ParseTokens(args, "", 2, true, &out));
  return out;
}

Result<ParsedOptions> ParseDirectives(std::string_view script,
                                      std::string_view file_name) {
  ParsedOptions out;
  std::vector<std::string_view> lines = SplitLines(script);
  bool in_header = true;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (i == 0 && StartsWith(line, "#!")) continue;
    const std::string loc = std::string(file_name) + ":" + std::to_string(i + 1) + ": ";
    int source = -1;
    std::string_view prefix;
    if (StartsWith(line, "#SBATCH")) {
      source = 0;
      prefix = "#SBATCH";
    } else if (StartsWith(line, "#HACHI")) {
      source = 1;
      prefix = "#HACHI";
    }
    // "#SBATCHX" is a comment, not a directive.
    if (source >= 0 && line.size() > prefix.size() && line[prefix.size()] != ' ' &&
        line[prefix.size()] != '\t') {
      source = -1;
    }
    if (source >= 0) {
      if (!in_header) {
        out.warnings.push_back(loc + std::string(prefix) +
                               ": after the first command, ignored (as Slurm does)");
        continue;
      }
      Result<std::vector<std::string>> words = SplitWords(line.substr(prefix.size()));
      if (!words.ok()) {
        return InvalidArgument(loc + std::string(Trim(line)) + ": " +
                               words.status().message());
      }
      HACHI_RETURN_IF_ERROR(
          ParseTokens(*words, loc + std::string(prefix) + " ", source, false, &out));
      continue;
    }
    std::string_view t = Trim(line);
    if (t.empty() || t[0] == '#') continue;
    in_header = false;
  }
  return out;
}

Result<SubmitOptions> BuildSubmitOptions(const ParsedOptions& directives,
                                         const ParsedOptions& flags) {
  std::vector<OptionOccurrence> all = directives.options;
  all.insert(all.end(), flags.options.begin(), flags.options.end());
  std::stable_sort(all.begin(), all.end(),
                   [](const OptionOccurrence& a, const OptionOccurrence& b) {
                     return a.source < b.source;
                   });

  SubmitOptions o;
  o.warnings = directives.warnings;
  o.warnings.insert(o.warnings.end(), flags.warnings.begin(), flags.warnings.end());
  GpuSlot gpu;
  const OptionOccurrence* share = nullptr;
  const OptionOccurrence* gpu_mem = nullptr;
  const OptionOccurrence* nodes = nullptr;
  // Issue 17: tasks and CPUs, resolved after the loop.
  const OptionOccurrence* ntasks = nullptr;
  const OptionOccurrence* per_node = nullptr;
  int mincpus = 0;
  int64_t mem_per_cpu = 0;  // --mem-per-cpu, MiB (issue 17)

  for (const OptionOccurrence& occ : all) {
    const std::string& n = occ.name;
    const std::string& v = occ.value;
    o.explicitly_set.insert(n);
    auto need = [&](bool ok, std::string problem) -> Status {
      return ok ? Status::Ok() : InvalidArgument(occ.where + ": " + problem);
    };
    if (n == "gres" || n == "gpus" || n == "gpus-per-node" || n == "gpus-per-task") {
      GpuSlot s;
      Status st = n == "gres" ? ParseGres(v, &s) : ParseGpuCount(v, &s);
      if (!st.ok()) return Err(occ, st);
      s.form = n == "gpus"            ? GpuSlot::kTotal
               : n == "gpus-per-task" ? GpuSlot::kPerTask
                                      : GpuSlot::kPerNode;
      s.where = occ.where;
      gpu = s;
    } else if (n == "nodes") {
      std::optional<long long> c = ParseCount(v);
      if (!c && v.find('-') != std::string::npos) {
        return InvalidArgument(occ.where +
                               ": node ranges are not supported; give one count");
      }
      HACHI_RETURN_IF_ERROR(need(c && *c >= 1, Quote(v) + " is not a node count"));
      o.req.nodes = static_cast<int>(*c);
      nodes = &occ;
    } else if (n == "partition") {
      HACHI_RETURN_IF_ERROR(need(!v.empty(), "empty partition name"));
      o.req.partition = v;
    } else if (n == "time") {
      Result<Duration> d = ParseTimeLimit(v, &o.time_unlimited);
      if (!d.ok()) return Err(occ, d.status());
      o.req.time_limit = *d;
    } else if (n == "cpus-per-task" || n == "cpus-per-gpu") {
      std::optional<long long> c = ParseCount(v);
      HACHI_RETURN_IF_ERROR(need(c && *c >= 1, Quote(v) + " is not a CPU count"));
      (n == "cpus-per-task" ? o.req.cpus : o.req.cpus_per_gpu) = static_cast<int>(*c);
    } else if (n == "mem" || n == "mem-per-gpu") {
      // One memory slot: the last of --mem / --mem-per-gpu wins.
      Result<int64_t> m = ParseSizeMib(v);
      if (!m.ok()) return Err(occ, m.status());
      o.req.memory_mib = n == "mem" ? *m : 0;
      o.req.memory_mib_per_gpu = n == "mem" ? 0 : *m;
      mem_per_cpu = 0;
      if (*m == 0) {  // Slurm: all of each node's memory; Hachi has no such request
        o.warnings.push_back(occ.where +
                             ": read as no memory request (the partition's default per "
                             "GPU), not as all of the node's memory");
      }
    } else if (n == "mem-per-cpu") {
      // The same memory slot: memory per node = this x the node's CPUs (below).
      Result<int64_t> m = ParseSizeMib(v);
      if (!m.ok()) return Err(occ, m.status());
      HACHI_RETURN_IF_ERROR(need(*m > 0, Quote(v) + ": give memory per CPU above 0"));
      mem_per_cpu = *m;
      o.req.memory_mib = 0;
      o.req.memory_mib_per_gpu = 0;
    } else if (n == "job-name") {
      HACHI_RETURN_IF_ERROR(need(!v.empty(), "empty job name"));
      o.spec.name = v;
    } else if (n == "output" || n == "error") {
      HACHI_RETURN_IF_ERROR(need(!v.empty(), "empty path"));
      (n == "output" ? o.spec.stdout_path : o.spec.stderr_path) = v;
    } else if (n == "dependency") {
      Result<std::vector<sched::Dependency>> d = ParseDependency(v);
      if (!d.ok()) return Err(occ, d.status());
      o.req.dependencies = *d;
    } else if (n == "exclusive") {
      o.req.exclusive = true;
    } else if (n == "array") {
      Result<ArraySpec> a = ParseArraySpec(v);
      if (!a.ok()) return Err(occ, a.status());
      o.array = *a;
    } else if (n == "qos") {
      HACHI_RETURN_IF_ERROR(need(!v.empty(), "empty QoS name"));
      o.req.qos = v;
    } else if (n == "account") {
      HACHI_RETURN_IF_ERROR(need(!v.empty(), "empty account name"));
      o.req.account = v;
    } else if (n == "hold") {
      o.hold = true;
    } else if (n == "requeue" || n == "no-requeue") {
      o.spec.requeue = n == "requeue";
    } else if (n == "comment") {
      o.spec.comment = v;
    } else if (n == "chdir") {
      HACHI_RETURN_IF_ERROR(need(!v.empty(), "empty directory"));
      o.spec.workdir = v;
    } else if (n == "gpu-share") {
      Result<int> m = ParseShareMilli(v);
      if (!m.ok()) return Err(occ, m.status());
      o.req.gpu_share_milli = *m;
      share = &occ;
    } else if (n == "gpu-mem") {
      Result<int64_t> m = ParseSizeMib(v);
      if (!m.ok()) return Err(occ, m.status());
      HACHI_RETURN_IF_ERROR(need(*m > 0, "GPU memory must be more than 0"));
      o.req.gpu_memory_mib = *m;
      gpu_mem = &occ;
    } else if (n == "container-image") {
      HACHI_RETURN_IF_ERROR(need(!v.empty(), "empty image name"));
      o.spec.container_image = v;
    } else if (n == "shm-size") {
      Result<int64_t> m = ParseSizeMib(v);
      if (!m.ok()) return Err(occ, m.status());
      o.spec.shm_mib = *m;
    } else if (n == "wrap") {
      HACHI_RETURN_IF_ERROR(need(!Trim(v).empty(), "empty command"));
      o.wrap = v;
    } else if (n == "parsable") {
      o.parsable = true;
      // Issue 17 (the job runtime).
    } else if (n == "ntasks" || n == "ntasks-per-node") {
      std::optional<long long> c = ParseCount(v);
      HACHI_RETURN_IF_ERROR(need(c && *c >= 1, Quote(v) + " is not a task count"));
      (n == "ntasks" ? o.spec.ntasks : o.spec.ntasks_per_node) = static_cast<int>(*c);
      (n == "ntasks" ? ntasks : per_node) = &occ;
    } else if (n == "mincpus") {
      std::optional<long long> c = ParseCount(v);
      HACHI_RETURN_IF_ERROR(need(c && *c >= 1, Quote(v) + " is not a CPU count"));
      mincpus = static_cast<int>(*c);
    } else if (n == "overcommit") {
      o.warnings.push_back(occ.where +
                           ": Hachi does not over-subscribe CPUs; the job gets a CPU "
                           "for each task");
    } else if (n == "signal") {
      Status st = ParseSignalSpec(v, &o.spec);
      if (!st.ok()) return Err(occ, st);
    } else if (n == "export") {
      Status st = ParseExportSpec(v, &o.export_env);
      if (!st.ok()) return Err(occ, st);
    } else if (n == "open-mode") {
      // Slurm reads the first letter only.
      const char c = v.empty() ? 0 : static_cast<char>(v[0] | 0x20);
      HACHI_RETURN_IF_ERROR(
          need(c == 'a' || c == 't', Quote(v) + " is not an open mode (use append or "
                                                "truncate)"));
      o.spec.open_append = c == 'a';
    } else if (n == "batch-nodes") {
      HACHI_RETURN_IF_ERROR(need(v == "first" || v == "all",
                                 Quote(v) +
                                     " is not where a batch script runs (use first "
                                     "or all)"));
      o.spec.batch_on_first_node = v == "first";
    } else if (Status st = ApplySelectionAndTiming(occ, &o); !st.ok()) {
      return st;  // issue 17: -C, -w, -x, --begin, --deadline, --nice
    }
  }

  // GPUs: Slurm's --gres and --gpus-per-node count per node, --gpus the whole job.
  const int m = o.req.nodes;
  o.req.gpu_model = gpu.model;
  // Issue 20: a type written like a MIG profile (gpu:1g.10gb:2, Slurm's MIG gres
  // types) asks for that many MIG devices of it, not for whole GPUs of a model.
  if (sched::LooksLikeMigProfile(gpu.model)) {
    o.req.mig_profile = gpu.model;
    o.req.gpu_model.clear();
  }
  if (gpu.form == GpuSlot::kPerTask) {
    // --gpus-per-task: each node's tasks times this (Hachi's batch shell sees the
    // node's GPUs, as Slurm's does; a task's own GPUs come with job steps).
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
                             " nodes (" + nodes->where + ")");
    }
    o.req.gpus = gpu.count;
    o.req.gpus_per_node = m > 1 ? gpu.count / m : 0;
  }
  if (share != nullptr) {
    if (gpu.form == GpuSlot::kUnset) o.req.gpus = 1;
    if (o.req.gpus != 1 || m > 1) {
      return InvalidArgument(share->where +
                             ": a GPU share is a fraction of one GPU; the job "
                             "asks for " +
                             std::to_string(o.req.TotalGpus()) + " GPUs");
    }
  }
  if (gpu_mem != nullptr && share == nullptr) {
    // Whole GPUs: --gpu-mem asks for GPUs with at least that much memory.
    o.req.min_gpu_memory_mib = o.req.gpu_memory_mib;
    o.req.gpu_memory_mib = 0;
  }
  HACHI_RETURN_IF_ERROR(ResolveTasks(ntasks, per_node, nodes, mincpus, &o));
  if (mem_per_cpu > 0) {
    // --mem-per-cpu: Slurm's memory per allocated CPU; Hachi allocates exactly the CPUs
    // asked for (1 when none are), so the node's memory is this times them.
    const int64_t cpus = std::max<int64_t>(
        1, o.req.cpus + int64_t{o.req.cpus_per_gpu} * o.req.GpusPerNode());
    o.req.memory_mib = mem_per_cpu * cpus;
  }
  return o;
}

}  // namespace hachi::cli
