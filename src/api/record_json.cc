#include "api/record_json.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "api/record_json_nlohmann.h"
#include "core/strings.h"
#include "sched/dependencies.h"
#include "state/json_values.h"
#include "state/request_json.h"

namespace hachi::api {

// The records (state/records.h) this codec writes and reads.
using state::JobId;
using state::JobRecord;
using state::JobSpec;
using state::JobState;
using state::JobStateName;
using state::NodeAllocation;
using state::NodeMigDevice;
using state::NodeRecord;
using state::NodeState;
using state::NodeStateName;
using state::NodeStatus;
using state::ParseJobState;
using state::ParseNodeState;
using state::StepRecord;
using state::StrayGpuProcess;

namespace {

using nlohmann::json;

// The leaf checks both codecs share (state/json_values.h).
using state::JsonBytes;
using state::JsonTypeProblem;
using state::ReadJsonBytes;
using state::ReadJsonDouble;
using state::ReadJsonInt;
using state::ReadJsonText;

Status TypeError(const std::string& path, std::string_view expected, const json& got) {
  return InvalidArgument(path + ": " + JsonTypeProblem(expected, got));
}

std::string ReadStringValue(const json& v, std::string* out) {
  if (!v.is_string()) return JsonTypeProblem("a string", v);
  *out = v.get<std::string>();
  return "";
}

// A list of byte strings (argv), each a string or {"base64": ...} (state/json_values.h).
json BytesList(const std::vector<std::string>& items) {
  json out = json::array();
  for (const std::string& s : items) out.push_back(JsonBytes(s));
  return out;
}

// Reads the fields of one JSON object into a struct, strictly: the first error sticks
// (later reads are skipped), and Finish() reports a field nobody asked for.
class ObjectReader {
 public:
  ObjectReader(const json& j, std::string_view path) : j_(j), path_(path) {
    if (!j.is_object()) status_ = TypeError(path_, "an object", j);
  }

  template <typename T>
  void Int(const char* key, T* out) {
    const json* v = Field(key);
    if (v == nullptr) return;
    Fail(key, ReadJsonInt(*v, out));
  }
  void Double(const char* key, double* out) {
    if (const json* v = Field(key)) Fail(key, ReadJsonDouble(*v, out));
  }
  void Bool(const char* key, bool* out) {
    const json* v = Field(key);
    if (v == nullptr) return;
    if (!v->is_boolean()) {
      Fail(key, JsonTypeProblem("a boolean", *v));
      return;
    }
    *out = v->get<bool>();
  }
  // Text: a string, or the bytes form when it holds UTF-8 ("not valid UTF-8" else).
  void String(const char* key, std::string* out) {
    const json* v = Field(key);
    if (v == nullptr) return;
    Fail(key, ReadJsonText(*v, out));
  }
  // Bytes carried exactly: a string or {"base64": ...}.
  void Bytes(const char* key, std::string* out) {
    const json* v = Field(key);
    if (v == nullptr) return;
    Fail(key, ReadJsonBytes(*v, out));
  }
  void Gpus(const char* key, GpuSet* out) {
    const json* v = Field(key);
    if (v == nullptr) return;
    std::string text;
    if (Fail(key, ReadStringValue(*v, &text))) return;
    Result<GpuSet> set = GpuSet::Parse(text);
    if (!set.ok()) {
      Fail(key, set.status().message());
      return;
    }
    *out = *set;
  }
  // Any other value: `read(value, path)` decodes it.
  void Custom(const char* key,
              const std::function<Status(const json&, const std::string&)>& read) {
    const json* v = Field(key);
    if (v == nullptr) return;
    status_ = read(*v, Path(key));
  }
  // A JSON array, each element decoded by `read(element, path)`.
  template <typename T>
  void List(const char* key, std::vector<T>* out,
            const std::function<Status(const json&, const std::string&, T*)>& read) {
    const json* v = Field(key);
    if (v == nullptr) return;
    status_ = ReadList(*v, Path(key), out, read);
  }

  Status Finish() {
    if (!status_.ok()) return status_;
    for (const auto& [key, value] : j_.items()) {
      if (std::find(seen_.begin(), seen_.end(), key) == seen_.end()) {
        return InvalidArgument(Path(Clip(key)) + ": unknown field");
      }
    }
    return Status::Ok();
  }

  template <typename T>
  static Status ReadInt(const json& v, const std::string& path, T* out) {
    std::string problem = ReadJsonInt(v, out);
    if (problem.empty()) return Status::Ok();
    return InvalidArgument(path + ": " + problem);
  }
  static Status ReadString(const json& v, const std::string& path, std::string* out) {
    std::string problem = ReadStringValue(v, out);
    if (problem.empty()) return Status::Ok();
    return InvalidArgument(path + ": " + problem);
  }
  template <typename T>
  static Status ReadList(
      const json& v, const std::string& path, std::vector<T>* out,
      const std::function<Status(const json&, const std::string&, T*)>& read) {
    if (!v.is_array()) return TypeError(path, "an array", v);
    std::vector<T> items(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      HACHI_RETURN_IF_ERROR(read(v[i], path + "[" + std::to_string(i) + "]", &items[i]));
    }
    *out = std::move(items);
    return Status::Ok();
  }

 private:
  std::string Path(std::string_view key) const { return path_ + "." + std::string(key); }
  // Records `problem` (if any) against field `key`; true when there was one.
  bool Fail(const char* key, const std::string& problem) {
    if (problem.empty()) return false;
    status_ = InvalidArgument(Path(key) + ": " + problem);
    return true;
  }
  const json* Field(const char* key) {
    if (!status_.ok()) return nullptr;
    seen_.push_back(key);
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }

  const json& j_;
  std::string path_;
  std::vector<std::string_view> seen_;  // field names asked for (string literals)
  Status status_;
};

Status ReadStringItem(const json& v, const std::string& path, std::string* out) {
  return ObjectReader::ReadString(v, path, out);
}

Status ReadBytesItem(const json& v, const std::string& path, std::string* out) {
  std::string problem = ReadJsonBytes(v, out);
  if (problem.empty()) return Status::Ok();
  return InvalidArgument(path + ": " + problem);
}

template <typename T>
Status ReadIntItem(const json& v, const std::string& path, T* out) {
  return ObjectReader::ReadInt(v, path, out);
}

// "NAME=value", split at the first '='; bytes (a string or {"base64": ...}).
Status ReadEnvItem(const json& v, const std::string& path,
                   std::pair<std::string, std::string>* out) {
  std::string text;
  HACHI_RETURN_IF_ERROR(ReadBytesItem(v, path, &text));
  const size_t eq = text.find('=');
  if (eq == std::string::npos) {
    return InvalidArgument(path + ": expected NAME=value, got \"" + text.substr(0, 64) +
                           (text.size() > 64 ? "...\"" : "\""));
  }
  *out = {text.substr(0, eq), text.substr(eq + 1)};
  return Status::Ok();
}

Status ReadDependency(const json& v, const std::string& path, sched::Dependency* out) {
  sched::Dependency dep;
  ObjectReader r(v, path);
  r.Custom("kind", [&](const json& k, const std::string& p) {
    std::string name;
    HACHI_RETURN_IF_ERROR(ObjectReader::ReadString(k, p, &name));
    std::optional<sched::DependencyKind> kind = sched::ParseDependencyKind(ToLower(name));
    if (!kind) {
      return InvalidArgument(p + ": unknown dependency kind \"" + Clip(name) + "\" (" +
                             sched::DependencyKindNames() + ")");
    }
    dep.kind = *kind;
    return Status::Ok();
  });
  r.Int("job", &dep.job);
  HACHI_RETURN_IF_ERROR(r.Finish());
  *out = dep;
  return Status::Ok();
}

Status ReadJobState(const json& v, const std::string& path, JobState* out) {
  std::string name;
  HACHI_RETURN_IF_ERROR(ObjectReader::ReadString(v, path, &name));
  if (!ParseJobState(name, out)) {
    return InvalidArgument(path + ": unknown job state \"" + Clip(name) + "\"");
  }
  return Status::Ok();
}

Status ReadNodeState(const json& v, const std::string& path, NodeState* out) {
  std::string name;
  HACHI_RETURN_IF_ERROR(ObjectReader::ReadString(v, path, &name));
  if (!ParseNodeState(name, out)) {
    return InvalidArgument(path + ": unknown node state \"" + Clip(name) +
                           "\" (up, drained, down)");
  }
  return Status::Ok();
}

// Decoders that take the path as a std::string, for List().
template <typename T>
Status ReadObject(const json& v, const std::string& path, T* out) {
  return FromJson(v, out, path);
}

void PutNodeRecord(const NodeRecord& n, json* j) {
  (*j)["name"] = n.name;
  (*j)["address"] = n.address;
  (*j)["topology_json"] = n.topology_json;
  (*j)["cpus"] = n.cpus;
  (*j)["memory_mib"] = n.memory_mib;
  (*j)["block"] = n.block;
  (*j)["state"] = NodeStateName(n.state);
  (*j)["state_reason"] = n.state_reason;
  (*j)["state_since"] = n.state_since;
  (*j)["unhealthy"] = n.unhealthy.ToString();
  json reasons = json::object();
  for (const auto& [gpu, why] : n.unhealthy_reasons) reasons[std::to_string(gpu)] = why;
  (*j)["unhealthy_reasons"] = std::move(reasons);
  (*j)["agent_instance"] = n.agent_instance;
  if (!n.cgroup.empty()) (*j)["cgroup"] = n.cgroup;  // absent from older records
  if (!n.gpu_sharing.empty()) (*j)["gpu_sharing"] = n.gpu_sharing;  // likewise
  // Burn-in: written only once the node has been through one.
  if (!n.burn_in_passed.empty()) (*j)["burn_in_passed"] = n.burn_in_passed;
  if (n.burn_in_run != 0) (*j)["burn_in_run"] = n.burn_in_run;
  if (n.burn_in != state::BurnInPhase::kNone)
    (*j)["burn_in"] = BurnInPhaseName(n.burn_in);
  if (!n.burn_in_gpus.empty()) (*j)["burn_in_gpus"] = n.burn_in_gpus.ToString();
}

void ReadNodeRecord(ObjectReader& r, NodeRecord* n) {
  r.String("name", &n->name);
  r.String("address", &n->address);
  r.String("topology_json", &n->topology_json);
  r.Int("cpus", &n->cpus);
  r.Int("memory_mib", &n->memory_mib);
  r.String("block", &n->block);
  r.Custom("state", [n](const json& v, const std::string& p) {
    return ReadNodeState(v, p, &n->state);
  });
  r.String("state_reason", &n->state_reason);
  r.Int("state_since", &n->state_since);
  r.Gpus("unhealthy", &n->unhealthy);
  r.Custom("unhealthy_reasons", [n](const json& v, const std::string& p) -> Status {
    if (!v.is_object()) return InvalidArgument(p + ": expected an object");
    n->unhealthy_reasons.clear();
    for (const auto& [key, why] : v.items()) {
      std::optional<long long> gpu = ParseInt(key);
      if (!gpu || *gpu < 0 || *gpu >= GpuSet::kMaxGpus) {
        return InvalidArgument(p + ": '" + Clip(key) + "' is not a GPU index");
      }
      if (!why.is_string()) {
        return InvalidArgument(p + "." + Clip(key) + ": expected a string");
      }
      n->unhealthy_reasons[static_cast<int>(*gpu)] = why.get<std::string>();
    }
    return Status::Ok();
  });
  r.String("agent_instance", &n->agent_instance);
  r.String("cgroup", &n->cgroup);
  r.String("gpu_sharing", &n->gpu_sharing);
  r.String("burn_in_passed", &n->burn_in_passed);
  r.Int("burn_in_run", &n->burn_in_run);
  r.Custom("burn_in", [n](const json& v, const std::string& p) -> Status {
    if (!v.is_string() || !state::ParseBurnInPhase(v.get<std::string>(), &n->burn_in)) {
      return InvalidArgument(p + ": expected \"running\" or \"failed\"");
    }
    return Status::Ok();
  });
  r.Gpus("burn_in_gpus", &n->burn_in_gpus);
}

// A step's id as Slurm writes it: "12.0" (job.step).
std::string StepId(const StepRecord& s) {
  return std::to_string(s.job) + "." + std::to_string(s.step);
}

std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

template <typename T>
Result<T> Decode(std::string_view text, std::string_view path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return InvalidArgument(std::string(path) + ": invalid JSON: " + e.what());
  }
  T out;
  HACHI_RETURN_IF_ERROR(FromJson(j, &out, path));
  return out;
}

}  // namespace

// ---- nlohmann values ----

json ToJson(const sched::JobRequest& req) {
  // The fields the store's rows write alike, then the rest: here always, there only
  // when set (state/request_json.h says why).
  json out = state::RequestCommonJson(req);
  out["constraint"] = JsonBytes(req.constraint);  // node selection and timing
  out["nodelist"] = JsonBytes(req.nodelist);
  out["exclude"] = JsonBytes(req.exclude);
  out["begin_time"] = req.begin_time;
  out["deadline"] = req.deadline;
  out["nice"] = req.nice;
  out["mig_profile"] = JsonBytes(req.mig_profile);
  return out;
}

json ToJson(const JobSpec& spec) {
  // Everything that reaches the job or the file system is bytes, carried exactly
  // (docs/api.md, "Bytes that are not UTF-8"); the image is text, refused when not.
  json env = json::array();
  for (const auto& [name, value] : spec.env())
    env.push_back(JsonBytes(name + "=" + value));
  return {
      {"name", JsonBytes(spec.name)},
      {"argv", BytesList(spec.argv())},
      {"script", JsonBytes(spec.script())},
      {"workdir", JsonBytes(spec.workdir)},
      {"env", std::move(env)},
      {"stdout_path", JsonBytes(spec.stdout_path)},
      {"stderr_path", JsonBytes(spec.stderr_path)},
      {"uid", spec.uid},
      {"gid", spec.gid},
      {"container_image", JsonBytes(spec.container_image)},
      {"shm_mib", spec.shm_mib},
      {"requeue", spec.requeue},
      {"array_job_id", spec.array_job_id},
      {"array_task_id", spec.array_task_id},
      {"array_max_running", spec.array_max_running},
      {"comment", JsonBytes(spec.comment)},
      // The job runtime's Slurm options.
      {"ntasks", spec.ntasks},
      {"ntasks_per_node", spec.ntasks_per_node},
      {"cpus_per_task", spec.cpus_per_task},
      {"signal", spec.signal},
      {"signal_before", spec.signal_before},
      {"signal_batch_only", spec.signal_batch_only},
      {"open_append", spec.open_append},
      {"batch_on_first_node", spec.batch_on_first_node},
      {"interactive", spec.interactive},
  };
}

json ToJson(const NodeAllocation& a) {
  return {
      {"node", a.node},
      {"gpus", a.gpus.ToString()},
      {"cpus", a.cpus},
      {"memory_mib", a.memory_mib},
      {"share_milli", a.share_milli},
      {"gpu_memory_mib", a.gpu_memory_mib},
      {"mig", a.mig},
  };
}

json ToJson(const JobRecord& job) {
  json allocs = json::array();
  for (const NodeAllocation& a : job.allocations) allocs.push_back(ToJson(a));
  json j = {
      {"id", job.id},
      {"req", ToJson(job.req)},
      {"spec", ToJson(job.spec)},
      {"state", JobStateName(job.state)},
      {"held", job.held},
      {"submit_time", job.submit_time},
      {"start_time", job.start_time},
      {"end_time", job.end_time},
      {"allocations", std::move(allocs)},
      {"exit_code", job.exit_code},
      {"signal", job.signal},
      {"reason", job.reason},
      {"requeues", job.requeues},
      {"master_port", job.master_port},
  };
  if (job.held_by_admin) j["held_by_admin"] = true;  // only an administrator releases it
  // Measured by NVML on its agents; absent until a figure came.
  if (job.gpu_memory_peak_mib > 0) j["gpu_memory_peak_mib"] = job.gpu_memory_peak_mib;
  // What the last run did with its GPUs, CPUs and memory; absent until its
  // end (a running job's figures: GET /jobs/ID/usage).
  if (job.usage != state::UsageSummary{}) {
    j["usage"] = {{"samples", job.usage.samples},
                  {"gpu_util", job.usage.gpu_util},
                  {"cpu_seconds", job.usage.cpu_seconds},
                  {"mem_peak_mib", job.usage.mem_peak_mib},
                  {"idle_gpus", job.usage.idle_gpus}};
  }
  return j;
}

json ToJson(const NodeRecord& node) {
  json j = json::object();
  PutNodeRecord(node, &j);
  return j;
}

json ToJson(const NodeStatus& node) {
  json j = json::object();
  PutNodeRecord(node.record, &j);
  j["gpus"] = node.gpus;
  j["gpu_model"] = node.gpu_model;
  j["gpu_memory_mib"] = node.gpu_memory_mib;
  j["interconnect"] = node.interconnect;
  j["partitions"] = node.partitions;
  j["features"] = node.features;
  j["gpu_jobs"] = node.gpu_jobs;
  j["gpu_share_milli"] = node.gpu_share_milli;
  json mig = json::array();
  for (const NodeMigDevice& m : node.mig_devices) {
    mig.push_back(json{{"gpu", m.gpu},
                       {"profile", m.profile},
                       {"uuid", m.uuid},
                       {"memory_mib", m.memory_mib},
                       {"job", m.job}});
  }
  j["mig_devices"] = std::move(mig);
  j["gpu_util"] = node.gpu_util;
  j["alloc_cpus"] = node.alloc_cpus;
  j["alloc_memory_mib"] = node.alloc_memory_mib;
  json strays = json::array();
  for (const StrayGpuProcess& p : node.stray_processes) {
    strays.push_back(json{{"gpu", p.gpu},
                          {"pid", p.pid},
                          {"used_mib", p.used_mib},
                          {"user", p.user},
                          {"command", p.command},
                          {"job", p.job},
                          {"since", p.since}});
  }
  j["stray_processes"] = std::move(strays);
  if (!node.gpu_sharing_events.empty()) j["gpu_sharing_events"] = node.gpu_sharing_events;
  j["clock_offset_ms"] =
      node.clock_offset_ms ? json(*node.clock_offset_ms) : json(nullptr);
  if (!node.pool.empty()) j["pool"] = node.pool;
  if (!node.power.empty()) j["power"] = node.power;
  return j;
}

json ToJson(const StepRecord& s) {
  return {
      {"job", s.job},
      {"job_start", s.job_start},
      {"step", s.step},
      {"id", StepId(s)},
      {"name", JsonBytes(s.name)},
      {"user", s.user},
      {"nodes", s.nodes},
      {"ntasks", s.ntasks},
      {"cpus", s.cpus},
      {"gpus", s.gpus},
      {"state", JobStateName(s.state)},
      {"start_time", s.start_time},
      {"end_time", s.end_time},
      {"exit_code", s.exit_code},
      {"signal", s.signal},
      {"reason", s.reason},
  };
}

Status ReadStrayItem(const json& v, const std::string& path, StrayGpuProcess* out) {
  StrayGpuProcess p;
  ObjectReader r(v, path);
  r.Int("gpu", &p.gpu);
  r.Int("pid", &p.pid);
  r.Int("used_mib", &p.used_mib);
  r.String("user", &p.user);
  r.String("command", &p.command);
  r.Int("job", &p.job);
  r.Int("since", &p.since);
  HACHI_RETURN_IF_ERROR(r.Finish());
  *out = std::move(p);
  return Status::Ok();
}

Status ReadMigDeviceItem(const json& v, const std::string& path, NodeMigDevice* out) {
  NodeMigDevice m;
  ObjectReader r(v, path);
  r.Int("gpu", &m.gpu);
  r.String("profile", &m.profile);
  r.String("uuid", &m.uuid);
  r.Int("memory_mib", &m.memory_mib);
  r.Int("job", &m.job);
  HACHI_RETURN_IF_ERROR(r.Finish());
  *out = std::move(m);
  return Status::Ok();
}

Status FromJson(const json& j, sched::JobRequest* out, std::string_view path) {
  sched::JobRequest req;
  ObjectReader r(j, path);
  r.Int("gpus", &req.gpus);
  r.Int("nodes", &req.nodes);
  r.Int("gpus_per_node", &req.gpus_per_node);
  r.Int("cpus_per_gpu", &req.cpus_per_gpu);
  r.Int("cpus", &req.cpus);
  r.Int("memory_mib_per_gpu", &req.memory_mib_per_gpu);
  r.Int("memory_mib", &req.memory_mib);
  r.String("gpu_model", &req.gpu_model);
  r.Int("min_gpu_memory_mib", &req.min_gpu_memory_mib);
  r.String("partition", &req.partition);
  r.String("qos", &req.qos);
  r.String("user", &req.user);
  r.String("account", &req.account);
  r.Int("time_limit", &req.time_limit);
  r.Bool("exclusive", &req.exclusive);
  r.List<sched::Dependency>("dependencies", &req.dependencies, ReadDependency);
  r.Int("gpu_share_milli", &req.gpu_share_milli);
  r.Int("gpu_memory_mib", &req.gpu_memory_mib);
  // Node selection and timing (optional).
  r.String("constraint", &req.constraint);
  r.String("nodelist", &req.nodelist);
  r.String("exclude", &req.exclude);
  r.Int("begin_time", &req.begin_time);
  r.Int("deadline", &req.deadline);
  r.Int("nice", &req.nice);
  r.String("mig_profile", &req.mig_profile);  // optional
  HACHI_RETURN_IF_ERROR(r.Finish());
  *out = std::move(req);
  return Status::Ok();
}

Status FromJson(const json& j, JobSpec* out, std::string_view path) {
  JobSpec spec;
  ObjectReader r(j, path);
  r.Bytes("name", &spec.name);
  state::JobPayload payload;
  r.List<std::string>("argv", &payload.argv, ReadBytesItem);
  r.Bytes("script", &payload.script);
  r.Bytes("workdir", &spec.workdir);
  r.List<std::pair<std::string, std::string>>("env", &payload.env, ReadEnvItem);
  spec.SetPayload(std::move(payload));
  r.Bytes("stdout_path", &spec.stdout_path);
  r.Bytes("stderr_path", &spec.stderr_path);
  r.Int("uid", &spec.uid);
  r.Int("gid", &spec.gid);
  r.String("container_image", &spec.container_image);
  r.Int("shm_mib", &spec.shm_mib);
  r.Bool("requeue", &spec.requeue);
  r.Int("array_job_id", &spec.array_job_id);
  r.Int("array_task_id", &spec.array_task_id);
  r.Int("array_max_running", &spec.array_max_running);
  r.Bytes("comment", &spec.comment);
  // Each optional.
  r.Int("ntasks", &spec.ntasks);
  r.Int("ntasks_per_node", &spec.ntasks_per_node);
  r.Int("cpus_per_task", &spec.cpus_per_task);
  r.Int("signal", &spec.signal);
  r.Int("signal_before", &spec.signal_before);
  r.Bool("signal_batch_only", &spec.signal_batch_only);
  r.Bool("open_append", &spec.open_append);
  r.Bool("batch_on_first_node", &spec.batch_on_first_node);
  r.Bool("interactive", &spec.interactive);
  HACHI_RETURN_IF_ERROR(r.Finish());
  *out = std::move(spec);
  return Status::Ok();
}

Status FromJson(const json& j, NodeAllocation* out, std::string_view path) {
  NodeAllocation a;
  ObjectReader r(j, path);
  r.String("node", &a.node);
  r.Gpus("gpus", &a.gpus);
  r.Int("cpus", &a.cpus);
  r.Int("memory_mib", &a.memory_mib);
  r.Int("share_milli", &a.share_milli);
  r.Int("gpu_memory_mib", &a.gpu_memory_mib);
  r.List<std::string>("mig", &a.mig, ReadStringItem);
  HACHI_RETURN_IF_ERROR(r.Finish());
  *out = std::move(a);
  return Status::Ok();
}

Status FromJson(const json& j, JobRecord* out, std::string_view path) {
  JobRecord job;
  ObjectReader r(j, path);
  r.Int("id", &job.id);
  r.Custom("req",
           [&](const json& v, const std::string& p) { return FromJson(v, &job.req, p); });
  r.Custom("spec", [&](const json& v, const std::string& p) {
    return FromJson(v, &job.spec, p);
  });
  r.Custom("state", [&](const json& v, const std::string& p) {
    return ReadJobState(v, p, &job.state);
  });
  r.Bool("held", &job.held);
  r.Bool("held_by_admin", &job.held_by_admin);
  r.Int("submit_time", &job.submit_time);
  r.Int("start_time", &job.start_time);
  r.Int("end_time", &job.end_time);
  r.List<NodeAllocation>("allocations", &job.allocations, ReadObject<NodeAllocation>);
  r.Int("exit_code", &job.exit_code);
  r.Int("signal", &job.signal);
  r.String("reason", &job.reason);
  r.Int("requeues", &job.requeues);
  r.Int("master_port", &job.master_port);
  r.Int("gpu_memory_peak_mib", &job.gpu_memory_peak_mib);
  r.Custom("usage", [&](const json& v, const std::string& p) {
    ObjectReader u(v, p);
    u.Int("samples", &job.usage.samples);
    u.Double("gpu_util", &job.usage.gpu_util);
    u.Double("cpu_seconds", &job.usage.cpu_seconds);
    u.Int("mem_peak_mib", &job.usage.mem_peak_mib);
    u.Int("idle_gpus", &job.usage.idle_gpus);
    return u.Finish();
  });
  HACHI_RETURN_IF_ERROR(r.Finish());
  *out = std::move(job);
  return Status::Ok();
}

Status FromJson(const json& j, NodeRecord* out, std::string_view path) {
  NodeRecord node;
  ObjectReader r(j, path);
  ReadNodeRecord(r, &node);
  HACHI_RETURN_IF_ERROR(r.Finish());
  *out = std::move(node);
  return Status::Ok();
}

Status FromJson(const json& j, NodeStatus* out, std::string_view path) {
  NodeStatus node;
  ObjectReader r(j, path);
  ReadNodeRecord(r, &node.record);
  r.Int("gpus", &node.gpus);
  r.String("gpu_model", &node.gpu_model);
  r.Int("gpu_memory_mib", &node.gpu_memory_mib);
  r.String("interconnect", &node.interconnect);
  r.List<std::string>("partitions", &node.partitions, ReadStringItem);
  r.List<std::string>("features", &node.features, ReadStringItem);
  r.List<JobId>("gpu_jobs", &node.gpu_jobs, ReadIntItem<JobId>);
  r.List<int>("gpu_share_milli", &node.gpu_share_milli, ReadIntItem<int>);
  r.List<NodeMigDevice>("mig_devices", &node.mig_devices, ReadMigDeviceItem);
  r.List<int>("gpu_util", &node.gpu_util, ReadIntItem<int>);
  r.Int("alloc_cpus", &node.alloc_cpus);
  r.Int("alloc_memory_mib", &node.alloc_memory_mib);
  r.List<StrayGpuProcess>("stray_processes", &node.stray_processes, ReadStrayItem);
  r.List<std::string>("gpu_sharing_events", &node.gpu_sharing_events, ReadStringItem);
  r.String("pool", &node.pool);
  r.String("power", &node.power);
  r.Custom("clock_offset_ms", [&](const json& v, const std::string& p) {
    if (v.is_null()) return Status::Ok();  // unknown
    int64_t ms = 0;
    const std::string problem = ReadJsonInt(v, &ms);
    if (!problem.empty()) return InvalidArgument(p + ": " + problem);
    node.clock_offset_ms = ms;
    return Status::Ok();
  });
  HACHI_RETURN_IF_ERROR(r.Finish());
  *out = std::move(node);
  return Status::Ok();
}

Status FromJson(const json& j, StepRecord* out, std::string_view path) {
  StepRecord step;
  std::string id;
  ObjectReader r(j, path);
  r.Int("job", &step.job);
  r.Int("job_start", &step.job_start);
  r.Int("step", &step.step);
  r.String("id", &id);
  r.Bytes("name", &step.name);
  r.String("user", &step.user);
  r.List<std::string>("nodes", &step.nodes, ReadStringItem);
  r.Int("ntasks", &step.ntasks);
  r.Int("cpus", &step.cpus);
  r.Int("gpus", &step.gpus);
  r.Custom("state", [&](const json& v, const std::string& p) {
    return ReadJobState(v, p, &step.state);
  });
  r.Int("start_time", &step.start_time);
  r.Int("end_time", &step.end_time);
  r.Int("exit_code", &step.exit_code);
  r.Int("signal", &step.signal);
  r.String("reason", &step.reason);
  HACHI_RETURN_IF_ERROR(r.Finish());
  // Derived, so it cannot disagree with the fields it is made of.
  if (!id.empty() && id != StepId(step)) {
    return InvalidArgument(std::string(path) + ".id: \"" + Clip(id) +
                           "\" is not this step's (" + StepId(step) + ")");
  }
  *out = std::move(step);
  return Status::Ok();
}

// ---- text ----

std::string JobRecordToJson(const JobRecord& job) { return Dump(ToJson(job)); }
std::string NodeRecordToJson(const NodeRecord& node) { return Dump(ToJson(node)); }
std::string NodeStatusToJson(const NodeStatus& node) { return Dump(ToJson(node)); }

std::string StepRecordToJson(const StepRecord& step) { return Dump(ToJson(step)); }
std::string StepRecordsToJson(const std::vector<StepRecord>& steps) {
  json list = json::array();
  for (const StepRecord& s : steps) list.push_back(ToJson(s));
  return Dump(json{{"steps", std::move(list)}});
}

Result<JobRecord> JobRecordFromJson(std::string_view text) {
  return Decode<JobRecord>(text, "job");
}
Result<NodeRecord> NodeRecordFromJson(std::string_view text) {
  return Decode<NodeRecord>(text, "node");
}
Result<NodeStatus> NodeStatusFromJson(std::string_view text) {
  return Decode<NodeStatus>(text, "node");
}
Result<StepRecord> StepRecordFromJson(std::string_view text) {
  return Decode<StepRecord>(text, "step");
}
Result<std::vector<StepRecord>> StepRecordsFromJson(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("steps: invalid JSON");
  if (!j.is_object()) return TypeError("steps", "an object", j);
  auto it = j.find("steps");
  if (it == j.end()) return InvalidArgument("steps: the reply has no \"steps\"");
  std::vector<StepRecord> out;
  HACHI_RETURN_IF_ERROR(
      ObjectReader::ReadList<StepRecord>(*it, "steps", &out, ReadObject<StepRecord>));
  return out;
}

}  // namespace hachi::api
