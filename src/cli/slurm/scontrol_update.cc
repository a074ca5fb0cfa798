#include "cli/slurm/scontrol_update.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "cli/directives.h"
#include "core/hostlist.h"
#include "core/strings.h"
#include "sched/dependencies.h"
#include "state/json_values.h"

namespace hachi::cli::slurm {
namespace {

using nlohmann::json;

// How each field Hachi can change is read: the sbatch option whose value it takes.
enum class Field {
  kTimeLimit,
  kPartition,
  kName,
  kComment,
  kNice,
  kAccount,
  kQos,
  kFeatures,
  kExcNodeList,
  kReqNodeList,
  kStartTime,
  kDeadline,
  kDependency,
  kNumNodes,
  kGres,
  kMinMemoryNode,
};

std::optional<Field> FieldOf(std::string_view key) {
  const std::string k = ToLower(key);
  static const std::pair<const char*, Field> kNames[] = {
      {"timelimit", Field::kTimeLimit},
      {"partition", Field::kPartition},
      {"jobname", Field::kName},
      {"name", Field::kName},
      {"comment", Field::kComment},
      {"nice", Field::kNice},
      {"account", Field::kAccount},
      {"qos", Field::kQos},
      {"features", Field::kFeatures},
      {"feature", Field::kFeatures},
      {"constraints", Field::kFeatures},
      {"excnodelist", Field::kExcNodeList},
      {"reqnodelist", Field::kReqNodeList},
      {"nodelist", Field::kReqNodeList},
      {"starttime", Field::kStartTime},
      {"begintime", Field::kStartTime},
      {"deadline", Field::kDeadline},
      {"dependency", Field::kDependency},
      {"numnodes", Field::kNumNodes},
      {"gres", Field::kGres},
      {"tresperNode", Field::kGres},
      {"minmemorynode", Field::kMinMemoryNode},
  };
  for (const auto& [name, f] : kNames) {
    if (k == ToLower(name)) return f;
  }
  return std::nullopt;
}

// The sbatch option a field's value goes through.
const char* OptionOf(Field f) {
  switch (f) {
    case Field::kPartition:
      return "partition";
    case Field::kNice:
      return "nice";
    case Field::kAccount:
      return "account";
    case Field::kQos:
      return "qos";
    case Field::kFeatures:
      return "constraint";
    case Field::kExcNodeList:
      return "exclude";
    case Field::kReqNodeList:
      return "nodelist";
    case Field::kStartTime:
      return "begin";
    case Field::kDeadline:
      return "deadline";
    case Field::kDependency:
      return "dependency";
    case Field::kNumNodes:
      return "nodes";
    case Field::kGres:
      return "gres";
    case Field::kMinMemoryNode:
      return "mem";
    default:
      return "";
  }
}

// directives.h's message for "--opt 'v': problem" without its location: the caller
// names the field instead.
std::string WithoutLocation(const std::string& message) {
  if (message.rfind("--", 0) != 0) return message;
  const size_t colon = message.find(": ");
  return colon == std::string::npos ? message : message.substr(colon + 2);
}

// `flags` (sbatch options) read as a submit reads them. Errors name `field`.
Result<SubmitOptions> ReadOptions(const std::vector<std::string>& flags,
                                  const std::string& field, Time now,
                                  int64_t utc_offset) {
  auto fail = [&](const Status& s) {
    return Status(s.code(), field + ": " + WithoutLocation(s.message()));
  };
  Result<ParsedOptions> parsed = ParseFlags(flags);
  if (!parsed.ok()) return fail(parsed.status());
  Result<SubmitOptions> o = BuildSubmitOptions(ParsedOptions{}, *parsed);
  if (!o.ok()) return fail(o.status());
  if (Status s = ResolveSubmitTimes(now, utc_offset, &*o); !s.ok()) return fail(s);
  return o;
}

// "12,13_[1,3]" -> 12, 13_[1,3]: commas inside brackets belong to the array's list.
std::vector<std::string> SplitWords(std::string_view list) {
  std::vector<std::string> out(1);
  int depth = 0;
  for (char ch : list) {
    if (ch == '[') ++depth;
    if (ch == ']' && depth > 0) --depth;
    if (ch == ',' && depth == 0) {
      out.emplace_back();
      continue;
    }
    out.back() += ch;
  }
  return out;
}

}  // namespace

Result<UpdateWords> ParseUpdateWords(const std::vector<std::string>& words) {
  UpdateWords u;
  for (const std::string& w : words) {
    const size_t eq = w.find('=');
    const std::string key = w.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : w.substr(eq + 1);
    const std::string k = ToLower(key);
    if (k == "jobid" || k == "job") {
      if (value.empty()) return InvalidArgument("Invalid job id specified: " + w);
      Result<std::vector<JobSelector>> ids = ParseJobSelectors(SplitWords(value));
      if (!ids.ok()) return ids.status();
      u.jobs.insert(u.jobs.end(), ids->begin(), ids->end());
      continue;
    }
    const std::optional<Field> f = FieldOf(key);
    if (!f) {
      return InvalidArgument("Update of this parameter is not supported: " + w +
                             " (Hachi changes TimeLimit, Partition, JobName, Comment, "
                             "Nice, Account, QOS, Features, ExcNodeList, ReqNodeList, "
                             "StartTime, Deadline, Dependency, NumNodes, Gres, "
                             "MinMemoryNode)");
    }
    if (eq == std::string::npos && *f != Field::kNice) {
      return InvalidArgument("Invalid input: " + w + " (give " + key + "=VALUE)");
    }
    u.fields.emplace_back(key, eq == std::string::npos ? std::string() : value);
  }
  if (u.jobs.empty()) {
    return InvalidArgument("No job identification provided (give JobId=ID)");
  }
  if (u.fields.empty()) return InvalidArgument("No changes specified");
  return u;
}

namespace {

// TimeLimit=: a time, UNLIMITED, or +N / -N added to or taken from the limit it has
// (Slurm's increments).
Result<Duration> NewTimeLimit(const std::string& value, const std::string& field,
                              const state::JobRecord& job) {
  const bool relative = !value.empty() && (value[0] == '+' || value[0] == '-');
  bool unlimited = false;
  Result<Duration> d =
      ParseTimeLimit(relative ? std::string_view(value).substr(1) : value, &unlimited);
  if (!d.ok()) return InvalidArgument(field + ": " + d.status().message());
  if (unlimited && relative) {
    return InvalidArgument(field + ": an increment must be a time, not UNLIMITED");
  }
  Duration limit = unlimited ? -1 : *d;
  if (relative && job.req.time_limit <= 0) {
    return InvalidArgument(field +
                           ": the job has no time limit to add to or take from; "
                           "give one (TimeLimit=2:00:00)");
  }
  if (relative) {
    limit = job.req.time_limit + (value[0] == '+' ? *d : -*d);
    if (limit < 60) {
      return InvalidArgument(field + ": the job's limit " +
                             std::to_string(job.req.time_limit / 60) +
                             " min would fall below 1 minute");
    }
  } else if (!unlimited && limit <= 0) {
    return InvalidArgument(field + ": give a time limit above 0");
  }
  return limit;
}

// An empty value clears a selection, a time or the dependencies.
void ClearField(Field f, json* req) {
  static const std::pair<Field, const char*> kCleared[] = {
      {Field::kFeatures, "constraint"},
      {Field::kExcNodeList, "exclude"},
      {Field::kReqNodeList, "nodelist"},
      {Field::kDeadline, "deadline"},
      {Field::kStartTime, "begin_time"}};
  if (f == Field::kDependency) {
    (*req)["dependencies"] = json::array();
  } else {
    for (const auto& [cf, name] : kCleared) {
      if (cf == f) {
        (*req)[name] =
            (f == Field::kDeadline || f == Field::kStartTime) ? json(0) : json("");
      }
    }
  }
}

// A field read as its sbatch option reads it.
Status OptionField(Field f, const std::string& value, const std::string& field, Time now,
                   int64_t utc_offset, json* req) {
  const std::string flag =
      std::string("--") + OptionOf(f) + (value.empty() ? "" : "=" + value);
  Result<SubmitOptions> o = ReadOptions({flag}, field, now, utc_offset);
  if (!o.ok()) return o.status();
  const sched::JobRequest& r = o->req;
  switch (f) {
    case Field::kPartition:
      (*req)["partition"] = r.partition;
      break;
    case Field::kNice:
      (*req)["nice"] = r.nice;
      break;
    case Field::kAccount:
      (*req)["account"] = r.account;
      break;
    case Field::kQos:
      (*req)["qos"] = r.qos;
      break;
    case Field::kFeatures:
      (*req)["constraint"] = r.constraint;
      break;
    case Field::kExcNodeList:
      (*req)["exclude"] = r.exclude;
      break;
    case Field::kReqNodeList:
      (*req)["nodelist"] = r.nodelist;
      break;
    case Field::kStartTime:
      (*req)["begin_time"] = r.begin_time;
      break;
    case Field::kDeadline:
      (*req)["deadline"] = r.deadline;
      break;
    case Field::kDependency: {
      json deps = json::array();
      for (const sched::Dependency& d : r.dependencies) {
        deps.push_back({{"kind", sched::DependencyKindName(d.kind)}, {"job", d.job}});
      }
      (*req)["dependencies"] = std::move(deps);
      break;
    }
    case Field::kMinMemoryNode:
      (*req)["memory_mib"] = r.memory_mib;
      (*req)["memory_mib_per_gpu"] = 0;
      break;
    default:
      break;
  }
  return Status::Ok();
}

// NumNodes= and Gres=: the GPUs per node and the node count resolve together (a gang's
// total is their product): the one not given is the job's own.
Status GpuFields(const std::optional<std::string>& nodes_value,
                 const std::optional<std::string>& gres_value,
                 const std::string& gpu_field, const state::JobRecord& job, Time now,
                 int64_t utc_offset, json* req) {
  const int per_node = job.req.GpusPerNode();
  std::vector<std::string> flags = {
      "--nodes=" + (nodes_value ? *nodes_value : std::to_string(job.req.nodes))};
  if (gres_value) {
    flags.push_back("--gres=" + *gres_value);
  } else if (per_node > 0) {
    flags.push_back("--gres=gpu:" + std::to_string(per_node));
  }
  Result<SubmitOptions> o = ReadOptions(flags, gpu_field, now, utc_offset);
  if (!o.ok()) return o.status();
  if (job.req.Shared() && (o->req.nodes != 1 || o->req.gpus != 1)) {
    return InvalidArgument(gpu_field +
                           ": a job sharing a GPU (--gpu-share) keeps one GPU on one "
                           "node");
  }
  (*req)["nodes"] = o->req.nodes;
  (*req)["gpus"] = gres_value || per_node > 0 ? o->req.gpus : 0;
  (*req)["gpus_per_node"] = o->req.gpus_per_node;
  if (gres_value) (*req)["gpu_model"] = o->req.gpu_model;
  return Status::Ok();
}

}  // namespace

Result<std::string> UpdateBody(
    const std::vector<std::pair<std::string, std::string>>& fields,
    const state::JobRecord& job, Time now, int64_t utc_offset) {
  json req = json::object();
  json body = json::object();
  std::optional<std::string> nodes_value, gres_value;
  std::string gpu_field;
  for (const auto& [key, value] : fields) {
    const Field f = *FieldOf(key);
    const std::string field = key + "=" + value;
    switch (f) {
      case Field::kTimeLimit: {
        Result<Duration> limit = NewTimeLimit(value, field, job);
        if (!limit.ok()) return limit.status();
        req["time_limit"] = *limit;
        break;
      }
      case Field::kName:
        if (value.empty()) return InvalidArgument(field + ": empty job name");
        body["name"] = state::JsonBytes(value);
        break;
      case Field::kComment:
        body["comment"] = state::JsonBytes(value);
        break;
      case Field::kNumNodes:
        nodes_value = value;
        gpu_field = field;
        break;
      case Field::kGres: {
        // TresPerNode's form is gres/gpu:N.
        std::string g = value;
        if (g.rfind("gres/", 0) == 0) g = g.substr(5);
        gres_value = g;
        gpu_field = field;
        break;
      }
      default: {
        // Clearing a selection or the dependencies: an empty value.
        if (value.empty() && (f == Field::kFeatures || f == Field::kExcNodeList ||
                              f == Field::kReqNodeList || f == Field::kDependency ||
                              f == Field::kDeadline || f == Field::kStartTime)) {
          ClearField(f, &req);
          break;
        }
        HACHI_RETURN_IF_ERROR(OptionField(f, value, field, now, utc_offset, &req));
      }
    }
  }
  if (nodes_value || gres_value) {
    HACHI_RETURN_IF_ERROR(
        GpuFields(nodes_value, gres_value, gpu_field, job, now, utc_offset, &req));
  }
  if (!req.empty()) body["req"] = std::move(req);
  return body.dump();
}

}  // namespace hachi::cli::slurm

namespace hachi::cli::slurm {
namespace {

enum class NodeStateAction : uint8_t { kDrain, kResume, kNotByHand, kNotHachis };
// update_node.c's states, in the order it tests them (a prefix of at least 3
// characters), then node_state_string's base names.
struct NodeStateRow {
  std::string_view name;
  NodeStateAction action;
};
constexpr NodeStateRow kNodeStates[] = {
    {"NORESP", NodeStateAction::kNotHachis},
    {"CANCEL_REBOOT", NodeStateAction::kNotHachis},
    {"DRAIN", NodeStateAction::kDrain},
    {"FAIL", NodeStateAction::kDrain},
    {"FUTURE", NodeStateAction::kNotHachis},
    {"RESUME", NodeStateAction::kResume},
    {"POWER_DOWN_ASAP", NodeStateAction::kNotHachis},
    {"POWER_DOWN_FORCE", NodeStateAction::kNotHachis},
    {"POWER_DOWN", NodeStateAction::kNotHachis},
    {"POWER_UP", NodeStateAction::kNotHachis},
    {"UNDRAIN", NodeStateAction::kResume},
    {"UNKNOWN", NodeStateAction::kNotHachis},
    {"DOWN", NodeStateAction::kNotByHand},
    {"IDLE", NodeStateAction::kResume},
    {"ALLOCATED", NodeStateAction::kNotHachis},
    {"ERROR", NodeStateAction::kNotHachis},
    {"MIXED", NodeStateAction::kNotHachis},
};

const NodeStateRow* FindNodeState(std::string_view value) {
  std::string v(value);
  for (char& c : v) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const NodeStateRow& r : kNodeStates) {
    const size_t n = std::max<size_t>(v.size(), 3);
    if (!v.empty() && v.size() <= r.name.size() && r.name.substr(0, n) == v) return &r;
  }
  return nullptr;
}

// One leading and one trailing '"' go, as scontrol takes them off.
std::string Unquote(std::string v) {
  if (!v.empty() && v.front() == '"') v.erase(0, 1);
  if (!v.empty() && v.back() == '"') v.pop_back();
  return v;
}

}  // namespace

bool IsNodeUpdate(const std::vector<std::string>& words) {
  if (words.empty()) return false;
  const std::string k = ToLower(words[0].substr(0, words[0].find('=')));
  return k == "nodename" || k == "node";
}

Result<NodeUpdate> ParseNodeUpdate(const std::vector<std::string>& words) {
  NodeUpdate u;
  const NodeStateRow* state = nullptr;
  std::string state_word;
  for (const std::string& w : words) {
    const size_t eq = w.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument("scontrol: error: Invalid input: " + w +
                             "  Request aborted");
    }
    const std::string k = ToLower(w.substr(0, eq));
    const std::string value = w.substr(eq + 1);
    if (k == "nodename" || k == "node") {
      Result<std::vector<std::string>> nodes = ExpandHostList(value);
      if (!nodes.ok() || nodes->empty()) {
        return InvalidArgument("slurm_update error: Invalid node name specified");
      }
      u.nodes.insert(u.nodes.end(), nodes->begin(), nodes->end());
    } else if (k == "state") {
      state = FindNodeState(value);
      state_word = w;
      if (state == nullptr) {
        return InvalidArgument(
            "Invalid input: " + w +
            "\nRequest aborted\nValid states are: NoResp DRAIN FAIL FUTURE RESUME "
            "POWER_DOWN POWER_UP UNDRAIN\nNot all states are valid given a node's prior "
            "state");
      }
    } else if (k == "reason") {
      u.reason = Unquote(value);
    } else {
      return InvalidArgument("Update of this parameter is not supported: " + w +
                             "\nRequest aborted");
    }
  }
  if (state == nullptr) {
    return InvalidArgument(u.reason.empty()
                               ? "No changes specified"
                               : "Hachi keeps a reason with a drain: give State=DRAIN "
                                 "with Reason=");
  }
  switch (state->action) {
    case NodeStateAction::kDrain:
      if (u.reason.empty()) {
        return InvalidArgument(
            "You must specify a reason when DOWNING or DRAINING a node. Request denied");
      }
      u.drain = true;
      break;
    case NodeStateAction::kResume:
      u.drain = false;
      break;
    case NodeStateAction::kNotByHand:
      return InvalidArgument("slurm_update error: " + state_word +
                             ": a node is down when its agent falls silent, not by hand; "
                             "State=DRAIN takes it out of service");
    case NodeStateAction::kNotHachis:
      return InvalidArgument("slurm_update error: " + state_word +
                             ": Hachi sets no such node state (it takes DRAIN, FAIL, "
                             "RESUME, UNDRAIN, IDLE)");
  }
  return u;
}

}  // namespace hachi::cli::slurm
