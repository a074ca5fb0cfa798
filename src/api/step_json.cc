// The job steps' messages (docs/api.md "Steps"): srun's request, each node's
// part and signals and input in the agent's work, the agents' reports and their acks,
// srun's output page.
#include <string>
#include <utility>
#include <vector>

#include "api/json_fields.h"
#include "api/protocol_json.h"
#include "api/record_json.h"
#include "api/step_sizes.h"
#include "core/bytes.h"
#include "state/json_values.h"

namespace hachi::api {
using namespace json_fields;
namespace {

json EnvToJson(const state::EnvList& env) {
  json a = json::array();
  for (const auto& [name, value] : env) a.push_back(state::JsonBytes(name + "=" + value));
  return a;
}

Status EnvFromJson(const json& j, const char* key, std::string_view path,
                   state::EnvList* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  const std::string p = std::string(path) + "." + key;
  if (!it->is_array()) return InvalidArgument(p + ": expected an array");
  out->clear();
  for (size_t i = 0; i < it->size(); ++i) {
    std::string text;
    if (std::string problem = state::ReadJsonBytes((*it)[i], &text); !problem.empty()) {
      return InvalidArgument(p + "[" + std::to_string(i) + "]: " + problem);
    }
    const size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument(p + "[" + std::to_string(i) + "]: expected NAME=value");
    }
    out->emplace_back(text.substr(0, eq), text.substr(eq + 1));
  }
  return Status::Ok();
}

Status StepKeyFromJson(const json& j, std::string_view path, state::JobId* job,
                       Time* job_start, int* step) {
  HACHI_RETURN_IF_ERROR(GetInt(j, "job", path, job));
  HACHI_RETURN_IF_ERROR(GetInt(j, "job_start", path, job_start));
  HACHI_RETURN_IF_ERROR(GetInt(j, "step", path, step));
  if (*job <= 0) return InvalidArgument(std::string(path) + ".job: expected a job id");
  if (*step < 0) return InvalidArgument(std::string(path) + ".step: below 0");
  return Status::Ok();
}

template <typename T, typename F>
Status ArrayOf(const json& j, const char* key, std::string_view path, std::vector<T>* out,
               F read) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  const std::string p = std::string(path) + "." + key;
  if (!it->is_array()) return InvalidArgument(p + ": expected an array");
  out->clear();
  out->reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string item = p + "[" + std::to_string(i) + "]";
    if (!(*it)[i].is_object()) return InvalidArgument(item + ": expected an object");
    T v;
    HACHI_RETURN_IF_ERROR(read((*it)[i], item, &v));
    out->push_back(std::move(v));
  }
  return Status::Ok();
}

json ChunkToJson(const OutputChunk& c) {
  json j{{"task", c.task},
         {"fd", c.fd},
         {"data", ChunkDataAsText(c.data) ? json(c.data)
                                          : json{{"base64", Base64Encode(c.data)}}}};
  if (c.lost > 0) j["lost"] = c.lost;
  return j;
}

Status ChunkFromJson(const json& j, const std::string& path, OutputChunk* c) {
  HACHI_RETURN_IF_ERROR(OnlyKeys(j, path, {"task", "fd", "data", "lost"}));
  HACHI_RETURN_IF_ERROR(GetInt(j, "lost", path, &c->lost));
  if (c->lost < 0) return InvalidArgument(path + ".lost: below 0");
  HACHI_RETURN_IF_ERROR(GetInt(j, "task", path, &c->task));
  HACHI_RETURN_IF_ERROR(GetInt(j, "fd", path, &c->fd));
  if (c->fd != 1 && c->fd != 2) return InvalidArgument(path + ".fd: expected 1 or 2");
  if (auto d = j.find("data"); d != j.end()) {
    if (std::string problem = state::ReadJsonBytes(*d, &c->data); !problem.empty()) {
      return InvalidArgument(path + ".data: " + problem);
    }
  }
  return Status::Ok();
}

json TaskExitToJson(const TaskExit& e) {
  json j{{"task", e.task}, {"kind", ExitKindName(e.kind)}};
  if (e.exit_code != 0) j["exit_code"] = e.exit_code;
  if (e.signal != 0) j["signal"] = e.signal;
  if (!e.message.empty()) j["message"] = e.message;
  if (!e.node.empty()) j["node"] = e.node;
  return j;
}

Status TaskExitFromJson(const json& j, const std::string& path, TaskExit* e) {
  HACHI_RETURN_IF_ERROR(
      OnlyKeys(j, path, {"task", "kind", "exit_code", "signal", "message", "node"}));
  HACHI_RETURN_IF_ERROR(GetInt(j, "task", path, &e->task));
  std::string kind = "exited";
  HACHI_RETURN_IF_ERROR(GetString(j, "kind", path, &kind));
  if (!ParseExitKind(kind, &e->kind)) {
    return InvalidArgument(path + ".kind: unknown exit kind '" + Clip(kind) + "'");
  }
  HACHI_RETURN_IF_ERROR(GetInt(j, "exit_code", path, &e->exit_code));
  HACHI_RETURN_IF_ERROR(GetInt(j, "signal", path, &e->signal));
  HACHI_RETURN_IF_ERROR(GetString(j, "message", path, &e->message));
  HACHI_RETURN_IF_ERROR(GetString(j, "node", path, &e->node));
  return Status::Ok();
}

}  // namespace

std::string StepRequestToJson(const StepRequest& r) {
  return Dump(json{{"argv", r.argv},
                   {"env", EnvToJson(r.env)},
                   {"workdir", r.workdir},
                   {"name", r.name},
                   {"nodes", r.nodes},
                   {"ntasks", r.ntasks},
                   {"ntasks_per_node", r.ntasks_per_node},
                   {"cpus_per_task", r.cpus_per_task},
                   {"gpus_per_task", r.gpus_per_task},
                   {"stdout", r.stdout_pattern},
                   {"stderr", r.stderr_pattern},
                   {"node_list", r.node_list},
                   {"kill_on_bad_exit", r.kill_on_bad_exit},
                   {"overlap", r.overlap},
                   {"pty", r.pty},
                   {"rows", r.rows},
                   {"cols", r.cols}});
}

Result<StepRequest> StepRequestFromJson(std::string_view text) {
  constexpr std::string_view p = "step";
  Result<json> j = Parse(text, p);
  if (!j.ok()) return j.status();
  HACHI_RETURN_IF_ERROR(
      OnlyKeys(*j, p,
               {"argv", "env", "workdir", "name", "nodes", "ntasks", "ntasks_per_node",
                "cpus_per_task", "gpus_per_task", "stdout", "stderr", "node_list",
                "kill_on_bad_exit", "overlap", "pty", "rows", "cols"}));
  StepRequest r;
  HACHI_RETURN_IF_ERROR(StringList(*j, "argv", p, &r.argv));
  HACHI_RETURN_IF_ERROR(EnvFromJson(*j, "env", p, &r.env));
  HACHI_RETURN_IF_ERROR(GetString(*j, "workdir", p, &r.workdir));
  HACHI_RETURN_IF_ERROR(GetString(*j, "name", p, &r.name));
  HACHI_RETURN_IF_ERROR(GetInt(*j, "nodes", p, &r.nodes));
  HACHI_RETURN_IF_ERROR(GetInt(*j, "ntasks", p, &r.ntasks));
  HACHI_RETURN_IF_ERROR(GetInt(*j, "ntasks_per_node", p, &r.ntasks_per_node));
  HACHI_RETURN_IF_ERROR(GetInt(*j, "cpus_per_task", p, &r.cpus_per_task));
  HACHI_RETURN_IF_ERROR(GetInt(*j, "gpus_per_task", p, &r.gpus_per_task));
  HACHI_RETURN_IF_ERROR(GetString(*j, "stdout", p, &r.stdout_pattern));
  HACHI_RETURN_IF_ERROR(GetString(*j, "stderr", p, &r.stderr_pattern));
  HACHI_RETURN_IF_ERROR(StringList(*j, "node_list", p, &r.node_list));
  HACHI_RETURN_IF_ERROR(GetBool(*j, "kill_on_bad_exit", p, &r.kill_on_bad_exit));
  HACHI_RETURN_IF_ERROR(GetBool(*j, "overlap", p, &r.overlap));
  HACHI_RETURN_IF_ERROR(GetBool(*j, "pty", p, &r.pty));
  HACHI_RETURN_IF_ERROR(GetInt(*j, "rows", p, &r.rows));
  HACHI_RETURN_IF_ERROR(GetInt(*j, "cols", p, &r.cols));
  if (r.rows < 0 || r.rows > 10000 || r.cols < 0 || r.cols > 10000) {
    return InvalidArgument("step.rows/cols: a window of 0..10000");
  }
  // Bounds a step's request must keep (the server checks them against the job too).
  if (r.argv.empty() || r.argv[0].empty()) {
    return InvalidArgument("step.argv: no command given to execute");
  }
  if (r.argv.size() > 100000) return InvalidArgument("step.argv: over 100000 arguments");
  if (r.env.size() > 100000) return InvalidArgument("step.env: over 100000 variables");
  for (auto [name, v] : {std::pair<const char*, int>{"nodes", r.nodes},
                         {"ntasks", r.ntasks},
                         {"ntasks_per_node", r.ntasks_per_node},
                         {"cpus_per_task", r.cpus_per_task},
                         {"gpus_per_task", r.gpus_per_task}}) {
    if (v < 0 || v > 1000000) {
      return InvalidArgument(std::string("step.") + name + ": " + std::to_string(v) +
                             " is out of range (0..1000000)");
    }
  }
  return r;
}

namespace {

json StepLaunchToJson(const StepLaunch& l) {
  return json{{"job", l.job},
              {"job_start", l.job_start},
              {"step", l.step},
              {"argv", l.argv},
              {"env", EnvToJson(l.env)},
              {"workdir", l.workdir},
              {"name", l.name},
              {"nodes", l.nodes},
              {"node_index", l.node_index},
              {"tasks", l.tasks},
              {"ntasks", l.ntasks},
              {"tasks_per_node", l.tasks_per_node},
              {"cpus_per_task", l.cpus_per_task},
              {"gpus_per_task", l.gpus_per_task},
              {"stdout", l.stdout_pattern},
              {"stderr", l.stderr_pattern},
              {"pty", l.pty},
              {"rows", l.rows},
              {"cols", l.cols},
              {"kill_grace", l.kill_grace}};
}

Status StepLaunchFromJson(const json& j, const std::string& path, StepLaunch* l) {
  HACHI_RETURN_IF_ERROR(
      OnlyKeys(j, path, {"job",           "job_start",     "step",   "argv",
                         "env",           "workdir",       "name",   "nodes",
                         "node_index",    "tasks",         "ntasks", "tasks_per_node",
                         "cpus_per_task", "gpus_per_task", "stdout", "stderr",
                         "pty",           "rows",          "cols",   "kill_grace"}));
  HACHI_RETURN_IF_ERROR(StepKeyFromJson(j, path, &l->job, &l->job_start, &l->step));
  HACHI_RETURN_IF_ERROR(StringList(j, "argv", path, &l->argv));
  HACHI_RETURN_IF_ERROR(EnvFromJson(j, "env", path, &l->env));
  HACHI_RETURN_IF_ERROR(GetString(j, "workdir", path, &l->workdir));
  HACHI_RETURN_IF_ERROR(GetString(j, "name", path, &l->name));
  HACHI_RETURN_IF_ERROR(StringList(j, "nodes", path, &l->nodes));
  HACHI_RETURN_IF_ERROR(GetInt(j, "node_index", path, &l->node_index));
  HACHI_RETURN_IF_ERROR(GetIntList(j, "tasks", path, &l->tasks));
  HACHI_RETURN_IF_ERROR(GetInt(j, "ntasks", path, &l->ntasks));
  HACHI_RETURN_IF_ERROR(GetIntList(j, "tasks_per_node", path, &l->tasks_per_node));
  HACHI_RETURN_IF_ERROR(GetInt(j, "cpus_per_task", path, &l->cpus_per_task));
  HACHI_RETURN_IF_ERROR(GetInt(j, "gpus_per_task", path, &l->gpus_per_task));
  HACHI_RETURN_IF_ERROR(GetString(j, "stdout", path, &l->stdout_pattern));
  HACHI_RETURN_IF_ERROR(GetString(j, "stderr", path, &l->stderr_pattern));
  HACHI_RETURN_IF_ERROR(GetBool(j, "pty", path, &l->pty));
  HACHI_RETURN_IF_ERROR(GetInt(j, "rows", path, &l->rows));
  HACHI_RETURN_IF_ERROR(GetInt(j, "cols", path, &l->cols));
  HACHI_RETURN_IF_ERROR(GetInt(j, "kill_grace", path, &l->kill_grace));
  if (l->argv.empty()) return InvalidArgument(path + ".argv: empty");
  if (l->node_index < 0 || l->node_index >= static_cast<int>(l->nodes.size())) {
    return InvalidArgument(path + ".node_index: not a place in nodes");
  }
  return Status::Ok();
}

json StepSignalToJson(const StepSignal& s) {
  return json{{"job", s.job},
              {"job_start", s.job_start},
              {"step", s.step},
              {"signal", s.signal},
              {"cancel", s.cancel}};
}

Status StepSignalFromJson(const json& j, const std::string& path, StepSignal* s) {
  HACHI_RETURN_IF_ERROR(
      OnlyKeys(j, path, {"job", "job_start", "step", "signal", "cancel"}));
  HACHI_RETURN_IF_ERROR(StepKeyFromJson(j, path, &s->job, &s->job_start, &s->step));
  HACHI_RETURN_IF_ERROR(GetInt(j, "signal", path, &s->signal));
  HACHI_RETURN_IF_ERROR(GetBool(j, "cancel", path, &s->cancel));
  if (!s->cancel && (s->signal < 1 || s->signal > 64)) {
    return InvalidArgument(path + ".signal: " + std::to_string(s->signal) +
                           " is not a signal");
  }
  return Status::Ok();
}

json StepInputToJson(const StepInput& in) {
  json j{{"job", in.job}, {"job_start", in.job_start}, {"step", in.step}};
  if (!in.data.empty()) j["data"] = state::JsonBytes(in.data);
  if (in.rows > 0 && in.cols > 0) {
    j["rows"] = in.rows;
    j["cols"] = in.cols;
  }
  return j;
}

Status StepInputFieldsFromJson(const json& j, const std::string& path, StepInput* in) {
  if (auto d = j.find("data"); d != j.end()) {
    if (std::string problem = state::ReadJsonBytes(*d, &in->data); !problem.empty()) {
      return InvalidArgument(path + ".data: " + problem);
    }
  }
  if (in->data.size() > (1u << 20)) return InvalidArgument(path + ".data: over 1 MiB");
  HACHI_RETURN_IF_ERROR(GetInt(j, "rows", path, &in->rows));
  HACHI_RETURN_IF_ERROR(GetInt(j, "cols", path, &in->cols));
  if (in->rows < 0 || in->rows > 10000 || in->cols < 0 || in->cols > 10000) {
    return InvalidArgument(path + ".rows/cols: a window of 0..10000");
  }
  return Status::Ok();
}

Status StepInputFromJson(const json& j, const std::string& path, StepInput* in) {
  HACHI_RETURN_IF_ERROR(
      OnlyKeys(j, path, {"job", "job_start", "step", "data", "rows", "cols"}));
  HACHI_RETURN_IF_ERROR(StepKeyFromJson(j, path, &in->job, &in->job_start, &in->step));
  return StepInputFieldsFromJson(j, path, in);
}

}  // namespace

Result<StepInput> StepInputRequestFromJson(std::string_view text) {
  Result<json> j = Parse(text, "input");
  if (!j.ok()) return j.status();
  HACHI_RETURN_IF_ERROR(OnlyKeys(*j, "input", {"data", "rows", "cols"}));
  StepInput in;
  HACHI_RETURN_IF_ERROR(StepInputFieldsFromJson(*j, "input", &in));
  return in;
}

std::string StepInputRequestToJson(const StepInput& in) {
  json j = StepInputToJson(in);
  j.erase("job");
  j.erase("job_start");
  j.erase("step");
  return Dump(j);
}

void AddStepWorkToJson(const AgentWork& w, json* j) {
  if (!w.steps.empty()) {  // absent when none: an older agent reads the rest
    json a = json::array();
    for (const StepLaunch& l : w.steps) a.push_back(StepLaunchToJson(l));
    (*j)["steps"] = std::move(a);
  }
  if (!w.step_signals.empty()) {
    json a = json::array();
    for (const StepSignal& s : w.step_signals) a.push_back(StepSignalToJson(s));
    (*j)["step_signals"] = std::move(a);
  }
  if (!w.step_input.empty()) {
    json a = json::array();
    for (const StepInput& in : w.step_input) a.push_back(StepInputToJson(in));
    (*j)["step_input"] = std::move(a);
  }
}

Status StepWorkFromJson(const json& j, AgentWork* w) {
  HACHI_RETURN_IF_ERROR(ArrayOf(j, "steps", "work", &w->steps, StepLaunchFromJson));
  HACHI_RETURN_IF_ERROR(
      ArrayOf(j, "step_signals", "work", &w->step_signals, StepSignalFromJson));
  return ArrayOf(j, "step_input", "work", &w->step_input, StepInputFromJson);
}

namespace {

Status StepReportFromJson(const json& s, const std::string& path, StepReport* o) {
  HACHI_RETURN_IF_ERROR(
      OnlyKeys(s, path, {"job", "job_start", "step", "seq", "chunks", "exits", "done"}));
  HACHI_RETURN_IF_ERROR(StepKeyFromJson(s, path, &o->job, &o->job_start, &o->step));
  HACHI_RETURN_IF_ERROR(GetInt(s, "seq", path, &o->seq));
  if (o->seq < 0) return InvalidArgument(path + ".seq: below 0");
  HACHI_RETURN_IF_ERROR(ArrayOf(s, "chunks", path, &o->chunks, ChunkFromJson));
  HACHI_RETURN_IF_ERROR(ArrayOf(s, "exits", path, &o->exits, TaskExitFromJson));
  return GetBool(s, "done", path, &o->done);
}

Status StepAckFromJson(const json& a, const std::string& path, StepAck* k) {
  HACHI_RETURN_IF_ERROR(OnlyKeys(a, path, {"job", "job_start", "step", "next", "gone"}));
  HACHI_RETURN_IF_ERROR(StepKeyFromJson(a, path, &k->job, &k->job_start, &k->step));
  HACHI_RETURN_IF_ERROR(GetInt(a, "next", path, &k->next));
  return GetBool(a, "gone", path, &k->gone);
}

}  // namespace

std::string StepReportsToJson(const StepReports& r) {
  json steps = json::array();
  for (const StepReport& s : r.steps) {
    json chunks = json::array();
    for (const OutputChunk& c : s.chunks) chunks.push_back(ChunkToJson(c));
    json exits = json::array();
    for (const TaskExit& e : s.exits) exits.push_back(TaskExitToJson(e));
    steps.push_back(json{{"job", s.job},
                         {"job_start", s.job_start},
                         {"step", s.step},
                         {"seq", s.seq},
                         {"chunks", std::move(chunks)},
                         {"exits", std::move(exits)},
                         {"done", s.done}});
  }
  return Dump(json{{"instance", r.instance}, {"steps", std::move(steps)}});
}

Result<StepReports> StepReportsFromJson(std::string_view text) {
  constexpr std::string_view p = "step_reports";
  Result<json> j = Parse(text, p);
  if (!j.ok()) return j.status();
  HACHI_RETURN_IF_ERROR(OnlyKeys(*j, p, {"instance", "steps"}));
  StepReports r;
  HACHI_RETURN_IF_ERROR(GetString(*j, "instance", p, &r.instance));
  HACHI_RETURN_IF_ERROR(ArrayOf(*j, "steps", p, &r.steps, StepReportFromJson));
  return r;
}

std::string StepAcksToJson(const std::vector<StepAck>& acks) {
  json a = json::array();
  for (const StepAck& k : acks) {
    a.push_back(json{{"job", k.job},
                     {"job_start", k.job_start},
                     {"step", k.step},
                     {"next", k.next},
                     {"gone", k.gone}});
  }
  return Dump(json{{"acks", std::move(a)}});
}

Result<std::vector<StepAck>> StepAcksFromJson(std::string_view text) {
  Result<json> j = Parse(text, "step_acks");
  if (!j.ok()) return j.status();
  HACHI_RETURN_IF_ERROR(OnlyKeys(*j, "step_acks", {"acks"}));
  std::vector<StepAck> acks;
  HACHI_RETURN_IF_ERROR(ArrayOf(*j, "acks", "step_acks", &acks, StepAckFromJson));
  return acks;
}

std::string StepOutputToJson(const StepOutput& o) {
  json chunks = json::array();
  for (const OutputChunk& c : o.chunks) chunks.push_back(ChunkToJson(c));
  json j{
      {"from", o.from}, {"next", o.next},
      {"lost", o.lost}, {"chunks", std::move(chunks)},
      {"done", o.done}, {"step", json::parse(StepRecordToJson(o.step), nullptr, false)}};
  if (o.done) {
    json exits = json::array();
    for (const TaskExit& e : o.exits) exits.push_back(TaskExitToJson(e));
    j["exits"] = std::move(exits);
  }
  return Dump(j);
}

Result<StepOutput> StepOutputFromJson(std::string_view text) {
  constexpr std::string_view p = "step_output";
  Result<json> j = Parse(text, p);
  if (!j.ok()) return j.status();
  HACHI_RETURN_IF_ERROR(
      OnlyKeys(*j, p, {"from", "next", "lost", "chunks", "done", "step", "exits"}));
  StepOutput o;
  HACHI_RETURN_IF_ERROR(GetInt(*j, "from", p, &o.from));
  HACHI_RETURN_IF_ERROR(GetInt(*j, "next", p, &o.next));
  HACHI_RETURN_IF_ERROR(GetInt(*j, "lost", p, &o.lost));
  HACHI_RETURN_IF_ERROR(ArrayOf(*j, "chunks", p, &o.chunks, ChunkFromJson));
  HACHI_RETURN_IF_ERROR(GetBool(*j, "done", p, &o.done));
  if (auto s = j->find("step"); s != j->end()) {
    Result<state::StepRecord> rec = StepRecordFromJson(s->dump());
    if (!rec.ok()) return rec.status();
    o.step = std::move(*rec);
  }
  HACHI_RETURN_IF_ERROR(ArrayOf(*j, "exits", p, &o.exits, TaskExitFromJson));
  return o;
}

}  // namespace hachi::api
