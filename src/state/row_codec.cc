#include "state/row_codec.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/strings.h"
#include "sched/dependencies.h"
#include "state/json_values.h"
#include "state/request_json.h"

namespace hachi::state {
namespace {

using nlohmann::json;

constexpr const char* kVersionKey = "_v";
constexpr const char* kMinReaderKey = "_min_reader";

// ---- reading ----

// The leaf checks (JsonTypeProblem, ReadJsonInt, ReadJsonBytes) are
// state/json_values.h's.

// Reads the fields of one JSON object into a struct. Unlike the API's reader, a field
// it is not asked for is no error: Finish() moves it into `unknown` (when given), so that
// a rewrite keeps it. The first error sticks; later reads are skipped. Paths are built
// only on error.
class RowReader {
 public:
  RowReader(const json& j, std::string path, json* unknown)
      : j_(j), path_(std::move(path)), unknown_(unknown) {
    if (!j.is_object())
      status_ = Internal(path_ + ": " + JsonTypeProblem("an object", j));
  }

  template <typename T>
  void Int(const char* key, T* out) {
    if (const json* v = Field(key)) Fail(key, ReadJsonInt(*v, out));
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
  void String(const char* key, std::string* out) {
    const json* v = Field(key);
    if (v == nullptr) return;
    if (!v->is_string()) {
      Fail(key, JsonTypeProblem("a string", *v));
      return;
    }
    *out = v->get<std::string>();
  }
  // Bytes as state/json_values.h writes them: a string or {"base64": ...}. The store
  // reads back whatever it wrote, so every string of a job's spec and request is one.
  void Bytes(const char* key, std::string* out) {
    if (const json* v = Field(key)) Fail(key, ReadJsonBytes(*v, out));
  }
  void Gpus(const char* key, GpuSet* out) {
    const json* v = Field(key);
    if (v == nullptr) return;
    if (!v->is_string()) {
      Fail(key, JsonTypeProblem("a string", *v));
      return;
    }
    Result<GpuSet> set = GpuSet::Parse(v->get_ref<const std::string&>());
    if (!set.ok()) {
      Fail(key, set.status().message());
      return;
    }
    *out = *set;
  }
  // Any other value: read(value, path) -> Status.
  template <typename F>
  void Custom(const char* key, F&& read) {
    if (const json* v = Field(key)) status_ = read(*v, Path(key));
  }
  // A nested object with unknown fields of its own: read(value, path, unknown).
  template <typename F>
  void Object(const char* key, F&& read) {
    const json* v = Field(key);
    if (v == nullptr) return;
    json nested;
    status_ = read(*v, Path(key), unknown_ ? &nested : nullptr);
    if (status_.ok() && !nested.is_null()) (*unknown_)[key] = std::move(nested);
  }
  // A JSON array, each element read by read(element, path, T*).
  template <typename T, typename F>
  void List(const char* key, std::vector<T>* out, F&& read) {
    const json* v = Field(key);
    if (v == nullptr) return;
    const std::string path = Path(key);
    if (!v->is_array()) {
      status_ = Internal(path + ": " + JsonTypeProblem("an array", *v));
      return;
    }
    std::vector<T> items(v->size());
    for (size_t i = 0; i < v->size() && status_.ok(); ++i) {
      status_ = read((*v)[i], path + "[" + std::to_string(i) + "]", &items[i]);
    }
    if (status_.ok()) *out = std::move(items);
  }
  // A field read elsewhere (the version keys): not unknown.
  void Skip(const char* key) {
    if (status_.ok() && j_.contains(key)) seen_.push_back(key);
  }

  Status Finish() {
    if (!status_.ok()) return status_;
    if (unknown_ == nullptr || seen_.size() == j_.size()) return Status::Ok();
    for (const auto& [key, value] : j_.items()) {
      if (std::find(seen_.begin(), seen_.end(), key) == seen_.end()) {
        (*unknown_)[key] = value;
      }
    }
    return Status::Ok();
  }

 private:
  std::string Path(std::string_view key) const { return path_ + "." + std::string(key); }
  void Fail(const char* key, const std::string& problem) {
    if (!problem.empty()) status_ = Internal(Path(key) + ": " + problem);
  }
  const json* Field(const char* key) {
    if (!status_.ok()) return nullptr;
    auto it = j_.find(key);
    if (it == j_.end()) return nullptr;
    seen_.push_back(key);  // only fields present: Finish compares counts first
    return &*it;
  }

  const json& j_;
  std::string path_;
  json* unknown_;                       // null: unknown fields are dropped
  std::vector<std::string_view> seen_;  // field names read (string literals)
  Status status_;
};

Status ReadStringItem(const json& v, const std::string& path, std::string* out) {
  if (!v.is_string()) return Internal(path + ": " + JsonTypeProblem("a string", v));
  *out = v.get<std::string>();
  return Status::Ok();
}

Status ReadBytesItem(const json& v, const std::string& path, std::string* out) {
  std::string problem = ReadJsonBytes(v, out);
  return problem.empty() ? Status::Ok() : Internal(path + ": " + problem);
}

template <typename T>
Status ReadIntItem(const json& v, const std::string& path, T* out) {
  std::string problem = ReadJsonInt(v, out);
  return problem.empty() ? Status::Ok() : Internal(path + ": " + problem);
}

Status ReadEnvItem(const json& v, const std::string& path,
                   std::pair<std::string, std::string>* out) {
  std::string text;
  HACHI_RETURN_IF_ERROR(ReadBytesItem(v, path, &text));
  const size_t eq = text.find('=');
  if (eq == std::string::npos) {
    return Internal(path + ": expected NAME=value, got \"" + text.substr(0, 64) + "\"");
  }
  *out = {text.substr(0, eq), text.substr(eq + 1)};
  return Status::Ok();
}

Status ReadDependency(const json& v, const std::string& path, sched::Dependency* out) {
  RowReader r(v, path, nullptr);
  r.Custom("kind", [&](const json& k, const std::string& p) -> Status {
    std::string name;
    HACHI_RETURN_IF_ERROR(ReadStringItem(k, p, &name));
    // afternotok and singleton came with jobs version 5.
    std::optional<sched::DependencyKind> kind = sched::ParseDependencyKind(name);
    if (!kind) return Internal(p + ": unknown dependency kind \"" + name + "\"");
    out->kind = *kind;
    return Status::Ok();
  });
  r.Int("job", &out->job);
  return r.Finish();
}

Status ReadAllocation(const json& v, const std::string& path, NodeAllocation* a) {
  RowReader r(v, path, nullptr);
  r.String("node", &a->node);
  r.Gpus("gpus", &a->gpus);
  r.Int("cpus", &a->cpus);
  r.Int("memory_mib", &a->memory_mib);
  r.Int("share_milli", &a->share_milli);
  r.Int("gpu_memory_mib", &a->gpu_memory_mib);
  r.List("mig", &a->mig, ReadStringItem);  // version 7
  return r.Finish();
}

Status ReadRequest(const json& v, const std::string& path, json* unknown,
                   sched::JobRequest* req) {
  RowReader r(v, path, unknown);
  r.Int("gpus", &req->gpus);
  r.Int("nodes", &req->nodes);
  r.Int("gpus_per_node", &req->gpus_per_node);
  r.Int("cpus_per_gpu", &req->cpus_per_gpu);
  r.Int("cpus", &req->cpus);
  r.Int("memory_mib_per_gpu", &req->memory_mib_per_gpu);
  r.Int("memory_mib", &req->memory_mib);
  r.Bytes("gpu_model", &req->gpu_model);
  r.Int("min_gpu_memory_mib", &req->min_gpu_memory_mib);
  r.Bytes("partition", &req->partition);
  r.Bytes("qos", &req->qos);
  r.Bytes("user", &req->user);
  r.Bytes("account", &req->account);
  r.Int("time_limit", &req->time_limit);
  r.Bool("exclusive", &req->exclusive);
  r.List("dependencies", &req->dependencies, ReadDependency);
  r.Int("gpu_share_milli", &req->gpu_share_milli);
  r.Int("gpu_memory_mib", &req->gpu_memory_mib);
  // (jobs version 5): node selection and timing, optional.
  r.Bytes("constraint", &req->constraint);
  r.Bytes("nodelist", &req->nodelist);
  r.Bytes("exclude", &req->exclude);
  r.Int("begin_time", &req->begin_time);
  r.Int("deadline", &req->deadline);
  r.Int("nice", &req->nice);
  r.Bytes("mig_profile", &req->mig_profile);  // jobs version 7
  return r.Finish();
}

// `payload_ref`: where a version 4 row names the payloads row holding its script and
// environment, and from version 8 its argv (0: they are inline, as every row before
// version 4 has them). The spec's payload is what the row holds itself (row_codec.h).
Status ReadSpec(const json& v, const std::string& path, json* unknown, JobSpec* spec,
                JobId* payload_ref) {
  RowReader r(v, path, unknown);
  JobPayload payload;
  r.Bytes("name", &spec->name);
  r.List("argv", &payload.argv, ReadBytesItem);
  r.Bytes("script", &payload.script);
  r.Bytes("workdir", &spec->workdir);
  r.List("env", &payload.env, ReadEnvItem);
  r.Int("payload", payload_ref);
  r.Bytes("stdout_path", &spec->stdout_path);
  r.Bytes("stderr_path", &spec->stderr_path);
  r.Int("uid", &spec->uid);
  r.Int("gid", &spec->gid);
  r.Bytes("container_image", &spec->container_image);
  r.Int("shm_mib", &spec->shm_mib);
  r.Bool("requeue", &spec->requeue);
  r.Int("array_job_id", &spec->array_job_id);
  r.Int("array_task_id", &spec->array_task_id);
  r.Int("array_max_running", &spec->array_max_running);
  r.Bytes("comment", &spec->comment);
  // Version 5, each optional.
  r.Int("ntasks", &spec->ntasks);
  r.Int("ntasks_per_node", &spec->ntasks_per_node);
  r.Int("cpus_per_task", &spec->cpus_per_task);
  r.Int("signal", &spec->signal);
  r.Int("signal_before", &spec->signal_before);
  r.Bool("signal_batch_only", &spec->signal_batch_only);
  r.Bool("open_append", &spec->open_append);
  r.Bool("batch_on_first_node", &spec->batch_on_first_node);  // version 6
  r.Bool("interactive", &spec->interactive);
  HACHI_RETURN_IF_ERROR(r.Finish());
  spec->SetPayload(std::move(payload));
  return Status::Ok();
}

Status ReadJob(const json& j, json* unknown, JobRecord* job, JobId* payload_ref) {
  RowReader r(j, "job", unknown);
  r.Skip(kVersionKey);
  r.Skip(kMinReaderKey);
  r.Int("id", &job->id);
  r.Object("req", [&](const json& v, const std::string& p, json* u) {
    return ReadRequest(v, p, u, &job->req);
  });
  r.Object("spec", [&](const json& v, const std::string& p, json* u) {
    return ReadSpec(v, p, u, &job->spec, payload_ref);
  });
  r.Custom("state", [&](const json& v, const std::string& p) -> Status {
    std::string name;
    HACHI_RETURN_IF_ERROR(ReadStringItem(v, p, &name));
    if (!ParseJobState(name, &job->state)) {
      return Internal(p + ": unknown job state \"" + name + "\"");
    }
    return Status::Ok();
  });
  r.Bool("held", &job->held);
  r.Bool("held_by_admin", &job->held_by_admin);
  r.Int("submit_time", &job->submit_time);
  r.Int("start_time", &job->start_time);
  r.Int("end_time", &job->end_time);
  r.List("allocations", &job->allocations, ReadAllocation);
  r.Int("exit_code", &job->exit_code);
  r.Int("signal", &job->signal);
  r.String("reason", &job->reason);
  r.Int("requeues", &job->requeues);
  r.Int("master_port", &job->master_port);
  r.Int("gpu_memory_peak_mib", &job->gpu_memory_peak_mib);
  r.Object("usage", [&](const json& v, const std::string& p, json* u) {
    RowReader w(v, p, u);
    w.Int("samples", &job->usage.samples);
    w.Double("gpu_util", &job->usage.gpu_util);
    w.Double("cpu_seconds", &job->usage.cpu_seconds);
    w.Int("mem_peak_mib", &job->usage.mem_peak_mib);
    w.Int("idle_gpus", &job->usage.idle_gpus);
    return w.Finish();
  });
  r.String("submit_key", &job->submit_key);
  return r.Finish();
}

Status ReadNode(const json& j, json* unknown, NodeRecord* n) {
  RowReader r(j, "node", unknown);
  r.Skip(kVersionKey);
  r.Skip(kMinReaderKey);
  r.String("name", &n->name);
  r.String("address", &n->address);
  r.String("topology_json", &n->topology_json);
  r.Int("cpus", &n->cpus);
  r.Int("memory_mib", &n->memory_mib);
  r.String("block", &n->block);
  r.Custom("state", [&](const json& v, const std::string& p) -> Status {
    std::string name;
    HACHI_RETURN_IF_ERROR(ReadStringItem(v, p, &name));
    if (!ParseNodeState(name, &n->state)) {
      return Internal(p + ": unknown node state \"" + name + "\"");
    }
    return Status::Ok();
  });
  r.String("state_reason", &n->state_reason);
  r.Int("state_since", &n->state_since);
  r.Gpus("unhealthy", &n->unhealthy);
  r.Custom("unhealthy_reasons", [&](const json& v, const std::string& p) -> Status {
    if (!v.is_object()) return Internal(p + ": " + JsonTypeProblem("an object", v));
    n->unhealthy_reasons.clear();
    for (const auto& [key, why] : v.items()) {
      std::optional<long long> gpu = ParseInt(key);
      if (!gpu || *gpu < 0 || *gpu >= GpuSet::kMaxGpus) {
        return Internal(p + ": '" + key + "' is not a GPU index");
      }
      if (!why.is_string()) return Internal(p + "." + key + ": expected a string");
      n->unhealthy_reasons[static_cast<int>(*gpu)] = why.get<std::string>();
    }
    return Status::Ok();
  });
  r.String("agent_instance", &n->agent_instance);
  r.String("cgroup", &n->cgroup);
  r.String("gpu_sharing", &n->gpu_sharing);
  r.String("burn_in_passed", &n->burn_in_passed);
  r.Int("burn_in_run", &n->burn_in_run);
  r.Custom("burn_in", [&](const json& v, const std::string& p) -> Status {
    std::string name;
    HACHI_RETURN_IF_ERROR(ReadStringItem(v, p, &name));
    if (!ParseBurnInPhase(name, &n->burn_in)) {
      return Internal(p + ": unknown burn-in phase \"" + name + "\"");
    }
    return Status::Ok();
  });
  r.Gpus("burn_in_gpus", &n->burn_in_gpus);
  return r.Finish();
}

Status ReadToken(const json& j, json* unknown, TokenRecord* t) {
  RowReader r(j, "token", unknown);
  r.Skip(kVersionKey);
  r.Skip(kMinReaderKey);
  r.String("id", &t->id);
  r.String("sha256", &t->sha256);
  r.String("user", &t->user);
  r.Int("uid", &t->uid);
  r.Int("gid", &t->gid);
  r.Bool("admin", &t->admin);
  r.Int("created", &t->created);
  r.String("created_by", &t->created_by);
  return r.Finish();
}

Status ReadPayload(const json& j, json* unknown, JobPayload* p) {
  RowReader r(j, "payload", unknown);
  r.Skip(kVersionKey);
  r.Skip(kMinReaderKey);
  r.Bytes("script", &p->script);
  r.List("env", &p->env, ReadEnvItem);
  r.List("argv", &p->argv, ReadBytesItem);  // version 2
  return r.Finish();
}

Status ReadStep(const json& j, json* unknown, StepRecord* s) {
  RowReader r(j, "step", unknown);
  r.Skip(kVersionKey);
  r.Skip(kMinReaderKey);
  r.Int("job", &s->job);
  r.Int("job_start", &s->job_start);
  r.Int("step", &s->step);
  r.Bytes("name", &s->name);
  r.String("user", &s->user);
  r.List("nodes", &s->nodes, ReadStringItem);
  r.Int("ntasks", &s->ntasks);
  r.Int("cpus", &s->cpus);
  r.Int("gpus", &s->gpus);
  r.Custom("state", [&](const json& v, const std::string& p) -> Status {
    std::string name;
    HACHI_RETURN_IF_ERROR(ReadStringItem(v, p, &name));
    if (!ParseJobState(name, &s->state)) {
      return Internal(p + ": unknown job state \"" + name + "\"");
    }
    return Status::Ok();
  });
  r.Int("start_time", &s->start_time);
  r.Int("end_time", &s->end_time);
  r.Int("exit_code", &s->exit_code);
  r.Int("signal", &s->signal);
  r.String("reason", &s->reason);
  return r.Finish();
}

// ---- versions and upgrade steps ----

// One step upgrades a row in place from version N to N + 1 (steps[N - 1]). A step must
// accept a row that already holds what it adds: an older binary may have carried a
// newer row's fields over (Row::unknown) while writing its own version.
using Step = Status (*)(json* row);

// 1 -> 2: rows gain "_v" and "_min_reader" (written by the encoder); the fields are
// those of version 1, which was the API's JSON of the time (docs/api.md at that
// version): nothing to rename. A version 1 node row may lack "cgroup" (older still);
// the default "" is right for it.
Status StepV1ToV2(json* /*row*/) { return Status::Ok(); }

// Job rows 2 -> 3: "master_port" added. A version 2 row has none; it reads as
// 0, "assign the old way on dispatch", right for a job that started before ports were
// tracked.
Status StepJobV2ToV3(json* /*row*/) { return Status::Ok(); }

// Job rows 3 -> 4: an array task's script and environment may live in the
// payloads table, the row naming it in "spec.payload"; a string of the spec or request
// may be {"base64": ...} (bytes that are not UTF-8; before, they were replaced by
// U+FFFD); and "submit_key" (the submit's idempotency key, written only when there is
// one) is added. A version 3 row holds only strings, its script and environment inline,
// and no key (""), which version 4 reads as they are.
Status StepJobV3ToV4(json* /*row*/) { return Status::Ok(); }

// Job rows 4 -> 5: the spec's optional "ntasks", "ntasks_per_node",
// "cpus_per_task", "signal", "signal_before", "signal_batch_only", "open_append", the
// request's optional constraint, nodelist, exclude, begin_time, deadline, nice, and the
// dependency kinds afternotok and singleton, all written only when set. A version 4 row
// has none of them: 0 / false / empty, what a job without them asked.
Status StepJobV4ToV5(json* /*row*/) { return Status::Ok(); }

// Job rows 5 -> 6: the spec's optional "batch_on_first_node" and
// "interactive", written only when set; a version 5 row has neither (false).
Status StepJobV5ToV6(json* /*row*/) { return Status::Ok(); }

// Job rows 6 -> 7: the request's optional "mig_profile" and an allocation's
// optional "mig" (UUIDs), written only when set; a version 6 row has neither (whole
// GPUs), and a row holding them says "_min_reader": 7.
Status StepJobV6ToV7(json* /*row*/) { return Status::Ok(); }

// Job rows 7 -> 8: a row that names a payloads row may leave its "argv" there too
// (then it has none and says "_min_reader": 8). A version 7 row that names one holds
// its argv itself, which reads as it is (the store joins it with the payloads row's
// script and environment, and a rewrite keeps it in the row).
Status StepJobV7ToV8(json* /*row*/) { return Status::Ok(); }

// Job rows 8 -> 9: the optional "held_by_admin", written only when true; a version 8 row
// has none (false): a held job was the user's own hold. A version 8 reader carries the
// key over unread and reads an administrator's hold as a user's (which its user could
// release): no reason to refuse it the row.
Status StepJobV8ToV9(json* /*row*/) { return Status::Ok(); }

constexpr Step kJobSteps[] = {StepV1ToV2,    StepJobV2ToV3, StepJobV3ToV4, StepJobV4ToV5,
                              StepJobV5ToV6, StepJobV6ToV7, StepJobV7ToV8, StepJobV8ToV9};
// Node rows 2 -> 3: the state "burn-in" (which a version 2 reader cannot
// parse, hence min_reader 3) and the burn-in fields "burn_in_passed", "burn_in_run",
// "burn_in", "burn_in_gpus". A version 2 row is a node that was in service before
// burn-in existed: its next registration's fingerprint is taken as passed
// ("burn_in_passed": "*", server/burn_in.h kBurnInAdopt), so that an upgrade does not
// take a working fleet out of service; no run.
Status StepNodeV2ToV3(json* row) {
  if (!row->contains("burn_in_passed")) (*row)["burn_in_passed"] = "*";
  return Status::Ok();
}

constexpr Step kNodeSteps[] = {StepV1ToV2, StepNodeV2ToV3};
constexpr Step kTokenSteps[] = {StepV1ToV2};
static_assert(std::size(kJobSteps) == kJobRowFormat.version - 1);
static_assert(std::size(kNodeSteps) == kNodeRowFormat.version - 1);
static_assert(std::size(kTokenSteps) == kTokenRowFormat.version - 1);
// Payload rows 1 -> 2: the optional "argv"; a version 1 row has none (its tasks' rows
// hold theirs).
Status StepPayloadV1ToV2(json* /*row*/) { return Status::Ok(); }

constexpr Step kPayloadSteps[] = {StepPayloadV1ToV2};
static_assert(std::size(kPayloadSteps) == kPayloadRowFormat.version - 1);
constexpr Step kStepSteps[] = {nullptr};  // none yet (version 1)

// Reads the row's version and refuses one this binary must not read; then runs the
// steps from the row's version to `format`'s.
template <size_t N>
Result<int> Upgrade(json* row, std::string_view what, RowFormat format,
                    const Step (&steps)[N]) {
  int version = 1, min_reader = 1;
  if (auto v = row->find(kVersionKey); v != row->end()) {
    if (!ReadJsonInt(*v, &version).empty() || version < 1) {
      return Internal(std::string(what) + "." + kVersionKey +
                      ": expected a version, got " + v->dump());
    }
    min_reader = version;
    if (auto m = row->find(kMinReaderKey); m != row->end()) {
      if (!ReadJsonInt(*m, &min_reader).empty() || min_reader < 1 ||
          min_reader > version) {
        return Internal(std::string(what) + "." + kMinReaderKey +
                        ": expected a version up to " + std::to_string(version) +
                        ", got " + m->dump());
      }
    }
  }
  if (min_reader > format.version) {
    return InvalidArgument(
        "row format version " + std::to_string(version) + " needs a reader of version " +
        std::to_string(min_reader) + " or later; this hachi reads " + std::string(what) +
        " rows up to version " + std::to_string(format.version) + " (run a newer hachi)");
  }
  for (int v = version; v < format.version; ++v) {
    HACHI_RETURN_IF_ERROR(steps[v - 1](row));
  }
  return version;
}

// `read(json, unknown, Row<Record>*)` reads the upgraded row's fields.
template <typename Record, size_t N, typename Read>
Result<Row<Record>> Decode(std::string_view text, std::string_view what, RowFormat format,
                           const Step (&steps)[N], Read&& read) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Internal(std::string(what) + ": invalid JSON");
  if (!j.is_object()) {
    return Internal(std::string(what) + ": " + JsonTypeProblem("an object", j));
  }
  Result<int> version = Upgrade(&j, what, format, steps);
  if (!version.ok()) return version.status();
  Row<Record> row;
  row.version = *version;
  json unknown;
  HACHI_RETURN_IF_ERROR(read(j, &unknown, &row));
  if (!unknown.is_null()) row.unknown = unknown.dump();
  return row;
}

template <typename Record>
auto RecordOnly(Status (*read)(const json&, json*, Record*)) {
  return [read](const json& j, json* unknown, Row<Record>* row) {
    return read(j, unknown, &row->record);
  };
}

// ---- writing ----

void PutVersion(RowFormat format, json* j) {
  (*j)[kVersionKey] = format.version;
  (*j)[kMinReaderKey] = format.min_reader;
}

// Adds the fields of `unknown` that `out` lacks, descending into objects both have.
void MergeUnknown(const json& unknown, json* out) {
  for (const auto& [key, value] : unknown.items()) {
    auto it = out->find(key);
    if (it == out->end()) {
      (*out)[key] = value;
    } else if (it->is_object() && value.is_object()) {
      MergeUnknown(value, &*it);
    }
  }
}

std::string Dump(json* j, std::string_view unknown) {
  if (!unknown.empty()) {
    json u = json::parse(unknown, nullptr, /*allow_exceptions=*/false);
    if (u.is_object()) MergeUnknown(u, j);
  }
  return j->dump(-1, ' ', false, json::error_handler_t::replace);
}

json RequestJson(const sched::JobRequest& req) {
  // The fields the API writes alike (dependencies' afternotok and singleton came with
  // jobs version 5), then the later ones.
  json out = RequestCommonJson(req);
  // Jobs version 5 (and 7: mig_profile): written only when set, so rows stay as they
  // were (state/request_json.h).
  if (!req.constraint.empty()) out["constraint"] = JsonBytes(req.constraint);
  if (!req.nodelist.empty()) out["nodelist"] = JsonBytes(req.nodelist);
  if (!req.exclude.empty()) out["exclude"] = JsonBytes(req.exclude);
  if (req.begin_time != 0) out["begin_time"] = req.begin_time;
  if (req.deadline != 0) out["deadline"] = req.deadline;
  if (req.nice != 0) out["nice"] = req.nice;
  if (!req.mig_profile.empty()) out["mig_profile"] = JsonBytes(req.mig_profile);  // 7
  return out;
}

// Every string is bytes, written exactly (state/json_values.h: JsonBytes).
json EnvJson(const EnvList& list) {
  json env = json::array();
  for (const auto& [name, value] : list) env.push_back(JsonBytes(name + "=" + value));
  return env;
}

// `payload_ref` != 0: script, environment and argv are in that payloads row; the spec's
// payload holds what stays here (an argv from before version 8, or nothing).
json SpecJson(const JobSpec& spec, JobId payload_ref) {
  json argv = json::array();
  for (const std::string& a : spec.argv()) argv.push_back(JsonBytes(a));
  json j = {
      {"name", JsonBytes(spec.name)},
      {"workdir", JsonBytes(spec.workdir)},
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
  };
  // (version 5): only when given, so most rows stay as they were.
  if (spec.ntasks != 0) j["ntasks"] = spec.ntasks;
  if (spec.ntasks_per_node != 0) j["ntasks_per_node"] = spec.ntasks_per_node;
  if (spec.cpus_per_task != 0) j["cpus_per_task"] = spec.cpus_per_task;
  if (spec.signal != 0) {
    j["signal"] = spec.signal;
    j["signal_before"] = spec.signal_before;
    if (spec.signal_batch_only) j["signal_batch_only"] = true;
  }
  if (spec.open_append) j["open_append"] = true;
  // Version 6.
  if (spec.batch_on_first_node) j["batch_on_first_node"] = true;
  if (spec.interactive) j["interactive"] = true;
  if (payload_ref != 0) {
    j["payload"] = payload_ref;
    if (!argv.empty()) j["argv"] = std::move(argv);
  } else {
    j["argv"] = std::move(argv);
    j["script"] = JsonBytes(spec.script());
    j["env"] = EnvJson(spec.env());
  }
  return j;
}

}  // namespace

std::string EncodeJobRow(const JobRecord& job, std::string_view unknown,
                         JobId payload_ref) {
  json allocs = json::array();
  for (const NodeAllocation& a : job.allocations) {
    allocs.push_back({
        {"node", a.node},
        {"gpus", a.gpus.ToString()},
        {"cpus", a.cpus},
        {"memory_mib", a.memory_mib},
        {"share_milli", a.share_milli},
        {"gpu_memory_mib", a.gpu_memory_mib},
    });
    if (!a.mig.empty()) allocs.back()["mig"] = a.mig;  // version 7
  }
  json j = {
      {"id", job.id},
      {"req", RequestJson(job.req)},
      {"spec", SpecJson(job.spec, payload_ref)},
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
  if (!job.submit_key.empty()) j["submit_key"] = job.submit_key;  // version 4
  if (job.held_by_admin) j["held_by_admin"] = true;               // version 9
  if (job.gpu_memory_peak_mib > 0) j["gpu_memory_peak_mib"] = job.gpu_memory_peak_mib;
  if (job.usage != UsageSummary{}) {
    j["usage"] = {{"samples", job.usage.samples},
                  {"gpu_util", job.usage.gpu_util},
                  {"cpu_seconds", job.usage.cpu_seconds},
                  {"mem_peak_mib", job.usage.mem_peak_mib},
                  {"idle_gpus", job.usage.idle_gpus}};
  }
  PutVersion(kJobRowFormat, &j);
  // A job of MIG devices (version 7): a version-6 reader would run it on whole GPUs,
  // so its row alone needs a reader of version 7; other rows stay readable by 6.
  if (!job.req.mig_profile.empty()) j[kMinReaderKey] = 7;
  // A row whose argv is in its payloads row (version 8): a version-7 reader would run
  // the task with no command.
  if (payload_ref != 0 && job.spec.argv().empty()) j[kMinReaderKey] = 8;
  return Dump(&j, unknown);
}

std::string EncodeNodeRow(const NodeRecord& n, std::string_view unknown) {
  json reasons = json::object();
  for (const auto& [gpu, why] : n.unhealthy_reasons) reasons[std::to_string(gpu)] = why;
  json j = {
      {"name", n.name},
      {"address", n.address},
      {"topology_json", n.topology_json},
      {"cpus", n.cpus},
      {"memory_mib", n.memory_mib},
      {"block", n.block},
      {"state", NodeStateName(n.state)},
      {"state_reason", n.state_reason},
      {"state_since", n.state_since},
      {"unhealthy", n.unhealthy.ToString()},
      {"unhealthy_reasons", std::move(reasons)},
      {"agent_instance", n.agent_instance},
      {"cgroup", n.cgroup},
      {"gpu_sharing", n.gpu_sharing},
      {"burn_in_passed", n.burn_in_passed},
      {"burn_in_run", n.burn_in_run},
      {"burn_in", BurnInPhaseName(n.burn_in)},
      {"burn_in_gpus", n.burn_in_gpus.ToString()},
  };
  PutVersion(kNodeRowFormat, &j);
  return Dump(&j, unknown);
}

std::string EncodeTokenRow(const TokenRecord& t, std::string_view unknown) {
  json j = {{"id", t.id},           {"sha256", t.sha256},
            {"user", t.user},       {"uid", t.uid},
            {"gid", t.gid},         {"admin", t.admin},
            {"created", t.created}, {"created_by", t.created_by}};
  PutVersion(kTokenRowFormat, &j);
  return Dump(&j, unknown);
}

std::string EncodePayloadRow(const JobPayload& payload) {
  json j = {{"script", JsonBytes(payload.script)}, {"env", EnvJson(payload.env)}};
  if (!payload.argv.empty()) {
    json argv = json::array();
    for (const std::string& a : payload.argv) argv.push_back(JsonBytes(a));
    j["argv"] = std::move(argv);
  }
  PutVersion(kPayloadRowFormat, &j);
  return Dump(&j, "");
}

std::string EncodeStepRow(const StepRecord& s, std::string_view unknown) {
  json j = {
      {"job", s.job},
      {"job_start", s.job_start},
      {"step", s.step},
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
  PutVersion(kStepRowFormat, &j);
  return Dump(&j, unknown);
}

Result<Row<JobRecord>> DecodeJobRow(std::string_view text) {
  return Decode<JobRecord>(text, "job", kJobRowFormat, kJobSteps,
                           [](const json& j, json* unknown, Row<JobRecord>* row) {
                             return ReadJob(j, unknown, &row->record, &row->payload_ref);
                           });
}
Result<Row<NodeRecord>> DecodeNodeRow(std::string_view text) {
  return Decode<NodeRecord>(text, "node", kNodeRowFormat, kNodeSteps,
                            RecordOnly(ReadNode));
}
Result<Row<TokenRecord>> DecodeTokenRow(std::string_view text) {
  return Decode<TokenRecord>(text, "token", kTokenRowFormat, kTokenSteps,
                             RecordOnly(ReadToken));
}
Result<Row<JobPayload>> DecodePayloadRow(std::string_view text) {
  return Decode<JobPayload>(text, "payload", kPayloadRowFormat, kPayloadSteps,
                            RecordOnly(ReadPayload));
}
Result<Row<StepRecord>> DecodeStepRow(std::string_view text) {
  return Decode<StepRecord>(text, "step", kStepRowFormat, kStepSteps,
                            RecordOnly(ReadStep));
}

}  // namespace hachi::state
