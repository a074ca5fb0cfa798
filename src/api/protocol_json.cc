#include "api/protocol_json.h"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <optional>

#include "api/json_fields.h"
#include "api/record_json_nlohmann.h"
#include "api/request_limits.h"
#include "core/signals.h"
#include "core/strings.h"
#include "state/json_values.h"

namespace hachi::api {
using namespace json_fields;
namespace {

// A signal's "scope" ("all", "batch", "steps"), or an older sender's "batch_only": true
// (batch); neither: all. Both, disagreeing: an error.
Status GetSignalScope(const json& j, std::string_view path, SignalScope* out) {
  bool batch_only = false;
  HACHI_RETURN_IF_ERROR(GetBool(j, "batch_only", path, &batch_only));
  *out = batch_only ? SignalScope::kBatch : SignalScope::kAll;
  auto it = j.find("scope");
  if (it == j.end()) return Status::Ok();
  std::optional<SignalScope> scope =
      it->is_string() ? ParseSignalScope(it->get<std::string>()) : std::nullopt;
  if (!scope) {
    return InvalidArgument(std::string(path) + ".scope: " + Clip(it->dump()) +
                           " is not a scope (\"all\", \"batch\" or \"steps\")");
  }
  if (batch_only && *scope != SignalScope::kBatch) {
    return InvalidArgument(std::string(path) + ": batch_only and scope " +
                           SignalScopeText(*scope) + " disagree");
  }
  *out = *scope;
  return Status::Ok();
}

json LaunchToJson(const api::LaunchSpec& l) {
  json j{{"job", l.job},
         {"spec", api::ToJson(l.spec)},
         {"user", l.user},
         {"partition", l.partition},
         {"node", l.node},
         {"gpus", l.gpus.ToString()},
         {"cpus", l.cpus},
         {"memory_mib", l.memory_mib},
         {"share_milli", l.share_milli},
         {"gpu_memory_mib", l.gpu_memory_mib},
         {"nodelist", l.nodelist},
         {"node_addresses", l.node_addresses},
         {"node_rank", l.node_rank},
         {"master_port", l.master_port},
         {"gpus_per_node", l.gpus_per_node},
         {"time_limit", l.time_limit},
         {"kill_grace", l.kill_grace},
         {"start_time", l.start_time},
         {"restart_count", l.restart_count}};
  if (!l.credential.empty()) j["credential"] = l.credential;  // absent: none
  if (l.time_left >= 0) j["time_left"] = l.time_left;         // absent: not given
  if (!l.mig.empty()) {                                       // absent: none
    json mig = json::array();
    for (const api::MigLaunch& m : l.mig) {
      mig.push_back({{"uuid", m.uuid},
                     {"gpu", m.gpu},
                     {"gpu_instance", m.gpu_instance},
                     {"compute_instance", m.compute_instance}});
    }
    j["mig"] = std::move(mig);
  }
  return j;
}

Status LaunchFromJson(const json& j, std::string_view path, api::LaunchSpec* l) {
  if (!j.is_object()) return InvalidArgument(std::string(path) + ": expected an object");
  HACHI_RETURN_IF_ERROR(OnlyKeys(
      j, path,
      {"job",        "spec",           "user",       "partition",     "node",
       "gpus",       "cpus",           "memory_mib", "share_milli",   "gpu_memory_mib",
       "nodelist",   "node_addresses", "node_rank",  "master_port",   "gpus_per_node",
       "time_limit", "kill_grace",     "start_time", "restart_count", "credential",
       "mig",        "time_left"}));
  HACHI_RETURN_IF_ERROR(GetInt(j, "job", path, &l->job));
  if (j.contains("spec")) {
    HACHI_RETURN_IF_ERROR(
        api::FromJson(j["spec"], &l->spec, std::string(path) + ".spec"));
  }
  HACHI_RETURN_IF_ERROR(GetString(j, "user", path, &l->user));
  HACHI_RETURN_IF_ERROR(GetString(j, "partition", path, &l->partition));
  HACHI_RETURN_IF_ERROR(GetString(j, "node", path, &l->node));
  std::string gpus;
  HACHI_RETURN_IF_ERROR(GetString(j, "gpus", path, &gpus));
  Result<GpuSet> set = GpuSet::Parse(gpus);
  if (!set.ok())
    return InvalidArgument(std::string(path) + ".gpus: " + set.status().message());
  l->gpus = *set;
  HACHI_RETURN_IF_ERROR(GetInt(j, "cpus", path, &l->cpus));
  HACHI_RETURN_IF_ERROR(GetInt(j, "memory_mib", path, &l->memory_mib));
  HACHI_RETURN_IF_ERROR(GetInt(j, "share_milli", path, &l->share_milli));
  HACHI_RETURN_IF_ERROR(GetInt(j, "gpu_memory_mib", path, &l->gpu_memory_mib));
  if (auto mig = j.find("mig"); mig != j.end()) {
    if (!mig->is_array()) {
      return InvalidArgument(std::string(path) + ".mig: expected an array");
    }
    for (size_t i = 0; i < mig->size(); ++i) {
      const json& e = (*mig)[i];
      const std::string at = std::string(path) + ".mig[" + std::to_string(i) + "]";
      if (!e.is_object()) return InvalidArgument(at + ": expected an object");
      HACHI_RETURN_IF_ERROR(
          OnlyKeys(e, at, {"uuid", "gpu", "gpu_instance", "compute_instance"}));
      api::MigLaunch m;
      HACHI_RETURN_IF_ERROR(GetString(e, "uuid", at, &m.uuid));
      HACHI_RETURN_IF_ERROR(GetInt(e, "gpu", at, &m.gpu));
      HACHI_RETURN_IF_ERROR(GetInt(e, "gpu_instance", at, &m.gpu_instance));
      HACHI_RETURN_IF_ERROR(GetInt(e, "compute_instance", at, &m.compute_instance));
      l->mig.push_back(std::move(m));
    }
  }
  HACHI_RETURN_IF_ERROR(StringList(j, "nodelist", path, &l->nodelist));
  HACHI_RETURN_IF_ERROR(StringList(j, "node_addresses", path, &l->node_addresses));
  HACHI_RETURN_IF_ERROR(GetInt(j, "node_rank", path, &l->node_rank));
  HACHI_RETURN_IF_ERROR(GetInt(j, "master_port", path, &l->master_port));
  HACHI_RETURN_IF_ERROR(GetInt(j, "gpus_per_node", path, &l->gpus_per_node));
  HACHI_RETURN_IF_ERROR(GetInt(j, "time_limit", path, &l->time_limit));
  HACHI_RETURN_IF_ERROR(GetInt(j, "kill_grace", path, &l->kill_grace));
  HACHI_RETURN_IF_ERROR(GetInt(j, "start_time", path, &l->start_time));
  HACHI_RETURN_IF_ERROR(GetInt(j, "restart_count", path, &l->restart_count));
  HACHI_RETURN_IF_ERROR(GetString(j, "credential", path, &l->credential));
  HACHI_RETURN_IF_ERROR(GetInt(j, "time_left", path, &l->time_left));
  if (j.contains("time_left") && l->time_left < 0) {
    return InvalidArgument(std::string(path) +
                           ".time_left: " + std::to_string(l->time_left) + " is below 0");
  }
  return Status::Ok();
}

}  // namespace

std::string SubmitRequestToJson(const SubmitRequest& r) {
  json j{{"req", api::ToJson(r.req)}, {"spec", api::ToJson(r.spec)}, {"hold", r.hold}};
  if (!r.array_tasks.empty()) {
    j["array_tasks"] = r.array_tasks;
    j["array_max_running"] = r.array_max_running;
  }
  if (!r.idempotency_key.empty()) j["idempotency_key"] = r.idempotency_key;
  return Dump(j);
}

Result<SubmitRequest> SubmitRequestFromJson(std::string_view text) {
  Result<json> j = Parse(text, "submit");
  if (!j.ok()) return j.status();
  SubmitRequest r;
  HACHI_RETURN_IF_ERROR(OnlyKeys(
      *j, "submit",
      {"req", "spec", "hold", "array_tasks", "array_max_running", "idempotency_key"}));
  if (!j->contains("req"))
    return InvalidArgument("submit: 'req' (the resources) is missing");
  HACHI_RETURN_IF_ERROR(api::FromJson((*j)["req"], &r.req, "submit.req"));
  if (j->contains("spec")) {
    HACHI_RETURN_IF_ERROR(api::FromJson((*j)["spec"], &r.spec, "submit.spec"));
  }
  HACHI_RETURN_IF_ERROR(GetBool(*j, "hold", "submit", &r.hold));
  HACHI_RETURN_IF_ERROR(GetIntList(*j, "array_tasks", "submit", &r.array_tasks));
  HACHI_RETURN_IF_ERROR(GetInt(*j, "array_max_running", "submit", &r.array_max_running));
  HACHI_RETURN_IF_ERROR(GetString(*j, "idempotency_key", "submit", &r.idempotency_key));
  const std::string& key = r.idempotency_key;
  if (key.size() > 128 || !std::all_of(key.begin(), key.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
      })) {
    return InvalidArgument(
        "submit.idempotency_key: at most 128 of A-Z a-z 0-9 - _ . (got " +
        std::to_string(key.size()) + " bytes)");
  }
  HACHI_RETURN_IF_ERROR(CheckSubmitLimits(r));
  return r;
}

// Step keys as [job, job_start, step] triples.
json StepKeysToJson(const std::vector<state::StepKey>& keys) {
  json a = json::array();
  for (const state::StepKey& k : keys) a.push_back(json{k.job, k.job_start, k.step});
  return a;
}

Status StepKeysFromJson(const json& j, const char* key, std::string_view path,
                        std::vector<state::StepKey>* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  const std::string p = std::string(path) + "." + key;
  if (!it->is_array()) return InvalidArgument(p + ": expected an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    if (!v.is_array() || v.size() != 3 || !v[0].is_number_integer() ||
        !v[1].is_number_integer() || !v[2].is_number_integer()) {
      return InvalidArgument(p + "[" + std::to_string(i) +
                             "]: expected [job, job_start, step]");
    }
    out->push_back({v[0].get<state::JobId>(), v[1].get<Time>(), v[2].get<int>()});
  }
  return Status::Ok();
}

std::string AgentRegistrationToJson(const AgentRegistration& r) {
  return Dump(json{{"node", r.node},
                   {"address", r.address},
                   {"topology", json::parse(r.topology_json, nullptr, false)},
                   {"cpus", r.cpus},
                   {"memory_mib", r.memory_mib},
                   {"agent_started", r.agent_started},
                   {"instance", r.instance},
                   {"running", r.running},
                   {"finished", r.finished},
                   {"cgroup", r.cgroup},
                   {"gpu_sharing", r.gpu_sharing},
                   {"steps", StepKeysToJson(r.steps)},
                   {"gpu_driver", r.gpu_driver},
                   {"simulated", r.simulated}});
}

Result<AgentRegistration> AgentRegistrationFromJson(std::string_view text) {
  Result<json> j = Parse(text, "register");
  if (!j.ok()) return j.status();
  AgentRegistration r;
  HACHI_RETURN_IF_ERROR(
      OnlyKeys(*j, "register",
               {"node", "address", "topology", "cpus", "memory_mib", "agent_started",
                "instance", "running", "finished", "cgroup", "gpu_sharing", "steps",
                "gpu_driver", "simulated"}));
  HACHI_RETURN_IF_ERROR(GetString(*j, "node", "register", &r.node));
  HACHI_RETURN_IF_ERROR(GetString(*j, "address", "register", &r.address));
  auto t = j->find("topology");
  if (t == j->end() || !t->is_object()) {
    return InvalidArgument("register.topology: expected the node's topology object");
  }
  r.topology_json = t->dump();
  HACHI_RETURN_IF_ERROR(GetInt(*j, "cpus", "register", &r.cpus));
  HACHI_RETURN_IF_ERROR(GetInt(*j, "memory_mib", "register", &r.memory_mib));
  HACHI_RETURN_IF_ERROR(GetInt(*j, "agent_started", "register", &r.agent_started));
  HACHI_RETURN_IF_ERROR(GetString(*j, "instance", "register", &r.instance));
  HACHI_RETURN_IF_ERROR(GetIntList(*j, "running", "register", &r.running));
  HACHI_RETURN_IF_ERROR(GetIntList(*j, "finished", "register", &r.finished));
  HACHI_RETURN_IF_ERROR(GetString(*j, "cgroup", "register", &r.cgroup));
  HACHI_RETURN_IF_ERROR(GetString(*j, "gpu_sharing", "register", &r.gpu_sharing));
  HACHI_RETURN_IF_ERROR(StepKeysFromJson(*j, "steps", "register", &r.steps));
  HACHI_RETURN_IF_ERROR(GetString(*j, "gpu_driver", "register", &r.gpu_driver));
  HACHI_RETURN_IF_ERROR(GetBool(*j, "simulated", "register", &r.simulated));
  HACHI_RETURN_IF_ERROR(CheckRegistrationLimits(r));
  return r;
}

std::string AgentHealthToJson(const AgentHealth& h) {
  json events = json::array();
  for (const GpuHealthEvent& e : h.events) {
    events.push_back(json{{"gpu", e.gpu},
                          {"kind", e.kind},
                          {"xid", e.xid},
                          {"fault", e.fault},
                          {"message", e.message},
                          {"at", e.at}});
  }
  json j{{"instance", h.instance}, {"events", events}};
  if (h.has_processes) {
    json procs = json::array();
    for (const GpuProcessReport& p : h.processes) {
      procs.push_back(json{{"gpu", p.gpu},
                           {"pid", p.pid},
                           {"used_mib", p.used_mib},
                           {"user", p.user},
                           {"command", p.command},
                           {"job", p.job}});
    }
    j["processes"] = std::move(procs);
  }
  if (!h.usage.empty()) {  // a GPU as [gpu, util, mem_util, mem_mib, power_w,
                           // sm_clock_mhz, pcie_kbs, nvlink_kbs]
    json usage = json::array();
    for (const state::JobUsageSample& u : h.usage) {
      json gpus = json::array();
      for (const state::GpuSample& g : u.gpus) {
        gpus.push_back(json::array({g.gpu, g.util, g.mem_util, g.mem_mib, g.power_w,
                                    g.sm_clock_mhz, g.pcie_kbs, g.nvlink_kbs}));
      }
      usage.push_back(json{{"job", u.job},
                           {"start_time", u.start_time},
                           {"at", u.at},
                           {"cpu_usec", u.cpu_usec},
                           {"mem_mib", u.mem_mib},
                           {"mem_peak_mib", u.mem_peak_mib},
                           {"gpus", std::move(gpus)}});
    }
    j["usage"] = std::move(usage);
  }
  return Dump(j);
}

namespace {

Status UsageFromJson(const json& list, std::vector<state::JobUsageSample>* out) {
  if (!list.is_array()) return InvalidArgument("health.usage: expected an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const json& e = list[i];
    const std::string path = "health.usage[" + std::to_string(i) + "]";
    if (!e.is_object()) return InvalidArgument(path + ": expected an object");
    HACHI_RETURN_IF_ERROR(OnlyKeys(
        e, path,
        {"job", "start_time", "at", "cpu_usec", "mem_mib", "mem_peak_mib", "gpus"}));
    state::JobUsageSample u;
    HACHI_RETURN_IF_ERROR(GetInt(e, "job", path, &u.job));
    HACHI_RETURN_IF_ERROR(GetInt(e, "start_time", path, &u.start_time));
    HACHI_RETURN_IF_ERROR(GetInt(e, "at", path, &u.at));
    HACHI_RETURN_IF_ERROR(GetInt(e, "cpu_usec", path, &u.cpu_usec));
    HACHI_RETURN_IF_ERROR(GetInt(e, "mem_mib", path, &u.mem_mib));
    HACHI_RETURN_IF_ERROR(GetInt(e, "mem_peak_mib", path, &u.mem_peak_mib));
    auto gpus = e.find("gpus");
    if (gpus != e.end()) {
      if (!gpus->is_array()) return InvalidArgument(path + ".gpus: expected an array");
      for (size_t k = 0; k < gpus->size(); ++k) {
        const json& g = (*gpus)[k];
        bool ok = g.is_array() && g.size() == 8;
        for (size_t f = 0; ok && f < 8; ++f) ok = g[f].is_number_integer();
        const std::string gp = path + ".gpus[" + std::to_string(k) + "]";
        if (!ok) return InvalidArgument(gp + ": expected an array of 8 integers");
        state::GpuSample s{g[0].get<int>(),     g[1].get<int>(),    g[2].get<int>(),
                           g[3].get<int64_t>(), g[4].get<int>(),    g[5].get<int>(),
                           g[6].get<int64_t>(), g[7].get<int64_t>()};
        if (s.gpu < 0 || s.gpu >= GpuSet::kMaxGpus) {
          return InvalidArgument(gp + ": " + std::to_string(s.gpu) +
                                 " is not a GPU index");
        }
        if (s.util > 100 || s.mem_util > 100) {
          return InvalidArgument(gp + ": a utilisation above 100 %");
        }
        u.gpus.push_back(s);
      }
    }
    if (u.job <= 0) return InvalidArgument(path + ".job: not a job id");
    out->push_back(std::move(u));
  }
  return Status::Ok();
}

}  // namespace

namespace {

Status GpuProcessesFromJson(const json& list, std::vector<GpuProcessReport>* out) {
  if (!list.is_array()) return InvalidArgument("health.processes: expected an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const json& e = list[i];
    const std::string path = "health.processes[" + std::to_string(i) + "]";
    if (!e.is_object()) return InvalidArgument(path + ": expected an object");
    HACHI_RETURN_IF_ERROR(
        OnlyKeys(e, path, {"gpu", "pid", "used_mib", "user", "command", "job"}));
    GpuProcessReport p;
    int64_t pid = 0;
    HACHI_RETURN_IF_ERROR(GetInt(e, "gpu", path, &p.gpu));
    HACHI_RETURN_IF_ERROR(GetInt(e, "pid", path, &pid));
    HACHI_RETURN_IF_ERROR(GetInt(e, "used_mib", path, &p.used_mib));
    HACHI_RETURN_IF_ERROR(GetString(e, "user", path, &p.user));
    HACHI_RETURN_IF_ERROR(GetString(e, "command", path, &p.command));
    HACHI_RETURN_IF_ERROR(GetInt(e, "job", path, &p.job));
    if (p.gpu < 0 || p.gpu >= GpuSet::kMaxGpus) {
      return InvalidArgument(path + ".gpu: " + std::to_string(p.gpu) +
                             " is not a GPU index");
    }
    if (pid <= 0 || pid > (1 << 22)) {
      return InvalidArgument(path + ".pid: " + std::to_string(pid) +
                             " is not a process id");
    }
    if (p.job < 0) return InvalidArgument(path + ".job: negative");
    p.pid = static_cast<uint32_t>(pid);
    out->push_back(std::move(p));
  }
  return Status::Ok();
}

}  // namespace

Result<AgentHealth> AgentHealthFromJson(std::string_view text) {
  Result<json> j = Parse(text, "health");
  if (!j.ok()) return j.status();
  AgentHealth h;
  HACHI_RETURN_IF_ERROR(
      OnlyKeys(*j, "health", {"instance", "events", "processes", "usage"}));
  HACHI_RETURN_IF_ERROR(GetString(*j, "instance", "health", &h.instance));
  if (auto usage = j->find("usage"); usage != j->end()) {
    HACHI_RETURN_IF_ERROR(UsageFromJson(*usage, &h.usage));
  }
  if (auto procs = j->find("processes"); procs != j->end()) {
    h.has_processes = true;
    HACHI_RETURN_IF_ERROR(GpuProcessesFromJson(*procs, &h.processes));
  }
  auto ev = j->find("events");
  if (ev == j->end()) {
    HACHI_RETURN_IF_ERROR(CheckHealthLimits(h));
    return h;
  }
  if (!ev->is_array()) return InvalidArgument("health.events: expected an array");
  static const std::vector<std::string> kFaults = {"info", "job", "reset", "fatal",
                                                   "node"};
  for (size_t i = 0; i < ev->size(); ++i) {
    const json& e = (*ev)[i];
    const std::string path = "health.events[" + std::to_string(i) + "]";
    if (!e.is_object()) return InvalidArgument(path + ": expected an object");
    HACHI_RETURN_IF_ERROR(
        OnlyKeys(e, path, {"gpu", "kind", "xid", "fault", "message", "at"}));
    GpuHealthEvent g;
    HACHI_RETURN_IF_ERROR(GetInt(e, "gpu", path, &g.gpu));
    HACHI_RETURN_IF_ERROR(GetString(e, "kind", path, &g.kind));
    HACHI_RETURN_IF_ERROR(GetInt(e, "xid", path, &g.xid));
    HACHI_RETURN_IF_ERROR(GetString(e, "fault", path, &g.fault));
    HACHI_RETURN_IF_ERROR(GetString(e, "message", path, &g.message));
    HACHI_RETURN_IF_ERROR(GetInt(e, "at", path, &g.at));
    if (g.gpu < -1 || g.gpu >= GpuSet::kMaxGpus) {
      return InvalidArgument(path + ".gpu: " + std::to_string(g.gpu) +
                             " is not a GPU index");
    }
    if (std::find(kFaults.begin(), kFaults.end(), g.fault) == kFaults.end()) {
      return InvalidArgument(path + ".fault: '" + g.fault +
                             "' is not one of info, job, reset, fatal, node");
    }
    if (g.kind.empty()) return InvalidArgument(path + ".kind: empty");
    h.events.push_back(std::move(g));
  }
  HACHI_RETURN_IF_ERROR(CheckHealthLimits(h));
  return h;
}

std::string AgentWorkToJson(const AgentWork& w) {
  json launches = json::array();
  for (const api::LaunchSpec& l : w.launch) launches.push_back(LaunchToJson(l));
  // A stop of "whichever run" is the bare job id an older agent reads.
  json cancels = json::array();
  for (const RunStop& c : w.cancel) {
    if (c.start_time == 0) {
      cancels.push_back(c.job);
    } else {
      cancels.push_back(json{{"job", c.job}, {"start_time", c.start_time}});
    }
  }
  json j{{"launch", launches}, {"cancel", cancels}, {"reregister", w.reregister}};
  if (w.seq != 0) j["seq"] = w.seq;
  if (!w.signals.empty()) {  // absent when none: an older agent reads the rest
    json sigs = json::array();
    for (const api::JobSignal& s : w.signals) {
      json e{{"job", s.job}, {"signal", s.signal}};
      // An older agent reads batch_only, and takes every other scope for all.
      if (s.scope == SignalScope::kBatch) e["batch_only"] = true;
      if (s.scope != SignalScope::kAll) e["scope"] = SignalScopeText(s.scope);
      sigs.push_back(std::move(e));
    }
    j["signals"] = std::move(sigs);
  }
  if (!w.limits.empty()) {  // absent when none, as "signals"
    json limits = json::array();
    for (const AgentWork::Limit& l : w.limits) {
      json e{{"job", l.job}, {"start_time", l.start_time}, {"time_limit", l.time_limit}};
      if (l.time_left >= 0) e["time_left"] = l.time_left;
      limits.push_back(std::move(e));
    }
    j["limits"] = std::move(limits);
  }
  AddStepWorkToJson(w, &j);
  AddBurnInWorkToJson(w, &j);
  return Dump(j);
}

Result<AgentWork> AgentWorkFromJson(std::string_view text) {
  Result<json> j = Parse(text, "work");
  if (!j.ok()) return j.status();
  AgentWork w;
  HACHI_RETURN_IF_ERROR(
      OnlyKeys(*j, "work",
               {"launch", "cancel", "reregister", "seq", "signals", "limits", "steps",
                "step_signals", "step_input", "burn_in"}));
  auto l = j->find("launch");
  if (l != j->end()) {
    if (!l->is_array()) return InvalidArgument("work.launch: expected an array");
    for (size_t i = 0; i < l->size(); ++i) {
      api::LaunchSpec spec;
      HACHI_RETURN_IF_ERROR(
          LaunchFromJson((*l)[i], "work.launch[" + std::to_string(i) + "]", &spec));
      w.launch.push_back(std::move(spec));
    }
  }
  if (auto c = j->find("cancel"); c != j->end()) {
    if (!c->is_array()) return InvalidArgument("work.cancel: expected an array");
    for (size_t i = 0; i < c->size(); ++i) {
      const std::string path = "work.cancel[" + std::to_string(i) + "]";
      const json& e = (*c)[i];
      RunStop stop;
      if (e.is_number_integer()) {
        stop.job = e.get<state::JobId>();
      } else if (e.is_object()) {
        HACHI_RETURN_IF_ERROR(OnlyKeys(e, path, {"job", "start_time"}));
        HACHI_RETURN_IF_ERROR(GetInt(e, "job", path, &stop.job));
        HACHI_RETURN_IF_ERROR(GetInt(e, "start_time", path, &stop.start_time));
      } else {
        return InvalidArgument(path + ": expected a job id or {job, start_time}");
      }
      if (stop.job <= 0)
        return InvalidArgument(path + ": job " + std::to_string(stop.job) +
                               " is not a job id");
      w.cancel.push_back(stop);
    }
  }
  if (auto q = j->find("seq"); q != j->end()) {
    if (!q->is_number_unsigned())
      return InvalidArgument("work.seq: expected a number >= 0");
    w.seq = q->get<uint64_t>();
  }
  HACHI_RETURN_IF_ERROR(GetBool(*j, "reregister", "work", &w.reregister));
  if (auto s = j->find("signals"); s != j->end()) {
    if (!s->is_array()) return InvalidArgument("work.signals: expected an array");
    for (size_t i = 0; i < s->size(); ++i) {
      const std::string path = "work.signals[" + std::to_string(i) + "]";
      const json& e = (*s)[i];
      if (!e.is_object()) return InvalidArgument(path + ": expected an object");
      HACHI_RETURN_IF_ERROR(OnlyKeys(e, path, {"job", "signal", "batch_only", "scope"}));
      api::JobSignal sig;
      HACHI_RETURN_IF_ERROR(GetInt(e, "job", path, &sig.job));
      HACHI_RETURN_IF_ERROR(GetInt(e, "signal", path, &sig.signal));
      HACHI_RETURN_IF_ERROR(GetSignalScope(e, path, &sig.scope));
      if (sig.signal < 1 || sig.signal > 64) {
        return InvalidArgument(path + ".signal: " + std::to_string(sig.signal) +
                               " is not a signal");
      }
      w.signals.push_back(sig);
    }
  }
  if (auto s = j->find("limits"); s != j->end()) {
    if (!s->is_array()) return InvalidArgument("work.limits: expected an array");
    for (size_t i = 0; i < s->size(); ++i) {
      const std::string path = "work.limits[" + std::to_string(i) + "]";
      const json& e = (*s)[i];
      if (!e.is_object()) return InvalidArgument(path + ": expected an object");
      HACHI_RETURN_IF_ERROR(
          OnlyKeys(e, path, {"job", "start_time", "time_limit", "time_left"}));
      AgentWork::Limit limit;
      HACHI_RETURN_IF_ERROR(GetInt(e, "job", path, &limit.job));
      HACHI_RETURN_IF_ERROR(GetInt(e, "start_time", path, &limit.start_time));
      HACHI_RETURN_IF_ERROR(GetInt(e, "time_limit", path, &limit.time_limit));
      HACHI_RETURN_IF_ERROR(GetInt(e, "time_left", path, &limit.time_left));
      if (e.contains("time_left") && limit.time_left < 0) {
        return InvalidArgument(path + ".time_left: " + std::to_string(limit.time_left) +
                               " is below 0");
      }
      if (limit.time_limit < 0) {
        return InvalidArgument(path + ".time_limit: " + std::to_string(limit.time_limit) +
                               " is below 0");
      }
      w.limits.push_back(limit);
    }
  }
  HACHI_RETURN_IF_ERROR(StepWorkFromJson(*j, &w));
  HACHI_RETURN_IF_ERROR(BurnInWorkFromJson(*j, &w));
  return w;
}

std::string JobExitsToJson(const std::vector<api::JobExit>& exits) {
  json a = json::array();
  for (const api::JobExit& e : exits) {
    json x{{"job", e.job},
           {"kind", ExitKindName(e.kind)},
           {"exit_code", e.exit_code},
           {"signal", e.signal},
           {"message", e.message},
           {"end_time", e.end_time},
           {"start_time", e.start_time}};
    if (e.ended_ago_ms >= 0) x["ended_ago_ms"] = e.ended_ago_ms;  // absent: not given
    if (e.busy_port > 0) x["busy_port"] = e.busy_port;            // absent: none
    a.push_back(std::move(x));
  }
  return Dump(json{{"exits", a}});
}

Result<std::vector<api::JobExit>> JobExitsFromJson(std::string_view text) {
  Result<json> j = Parse(text, "exits");
  if (!j.ok()) return j.status();
  HACHI_RETURN_IF_ERROR(OnlyKeys(*j, "exits", {"exits"}));
  auto a = j->find("exits");
  if (a == j->end() || !a->is_array()) return InvalidArgument("exits: expected an array");
  std::vector<api::JobExit> out;
  for (size_t i = 0; i < a->size(); ++i) {
    const json& e = (*a)[i];
    const std::string path = "exits[" + std::to_string(i) + "]";
    if (!e.is_object()) return InvalidArgument(path + ": expected an object");
    HACHI_RETURN_IF_ERROR(
        OnlyKeys(e, path,
                 {"job", "kind", "exit_code", "signal", "message", "end_time",
                  "start_time", "ended_ago_ms", "busy_port"}));
    api::JobExit x;
    HACHI_RETURN_IF_ERROR(GetInt(e, "job", path, &x.job));
    std::string kind = "exited";
    HACHI_RETURN_IF_ERROR(GetString(e, "kind", path, &kind));
    if (!ParseExitKind(kind, &x.kind)) {
      return InvalidArgument(path + ".kind: unknown exit kind '" + kind + "'");
    }
    HACHI_RETURN_IF_ERROR(GetInt(e, "exit_code", path, &x.exit_code));
    HACHI_RETURN_IF_ERROR(GetInt(e, "signal", path, &x.signal));
    HACHI_RETURN_IF_ERROR(GetString(e, "message", path, &x.message));
    HACHI_RETURN_IF_ERROR(GetInt(e, "end_time", path, &x.end_time));
    HACHI_RETURN_IF_ERROR(GetInt(e, "start_time", path, &x.start_time));
    HACHI_RETURN_IF_ERROR(GetInt(e, "ended_ago_ms", path, &x.ended_ago_ms));
    HACHI_RETURN_IF_ERROR(GetInt(e, "busy_port", path, &x.busy_port));
    if (x.busy_port < 0 || x.busy_port > 65535) {
      return InvalidArgument(path + ".busy_port: " + std::to_string(x.busy_port) +
                             " is not a port");
    }
    if (e.contains("ended_ago_ms") && x.ended_ago_ms < 0) {
      return InvalidArgument(path + ".ended_ago_ms: " + std::to_string(x.ended_ago_ms) +
                             " is below 0");
    }
    out.push_back(std::move(x));
  }
  HACHI_RETURN_IF_ERROR(CheckExitLimits(out));
  return out;
}

Result<std::string> DrainReasonFromJson(std::string_view text) {
  if (text.empty()) return std::string();
  Result<json> j = Parse(text, "drain");
  if (!j.ok()) return j.status();
  HACHI_RETURN_IF_ERROR(OnlyKeys(*j, "drain", {"reason"}));
  std::string reason;
  HACHI_RETURN_IF_ERROR(GetString(*j, "reason", "drain", &reason));
  if (reason.size() > kMaxCommentBytes) {
    return InvalidArgument("drain.reason: " + std::to_string(reason.size()) +
                           " bytes; at most " + std::to_string(kMaxCommentBytes));
  }
  return reason;
}

Result<int> ResumeGpuFromJson(std::string_view text) {
  if (text.empty()) return -1;
  Result<json> j = Parse(text, "resume");
  if (!j.ok()) return j.status();
  HACHI_RETURN_IF_ERROR(OnlyKeys(*j, "resume", {"gpu"}));
  int gpu = -1;
  HACHI_RETURN_IF_ERROR(GetInt(*j, "gpu", "resume", &gpu));
  if (j->contains("gpu") && (gpu < 0 || gpu >= GpuSet::kMaxGpus)) {
    return InvalidArgument("resume.gpu: " + std::to_string(gpu) +
                           " is not a GPU index (0.." +
                           std::to_string(GpuSet::kMaxGpus - 1) + ")");
  }
  return gpu;
}

std::string SignalRequestToJson(const SignalRequest& r) {
  return Dump(json{{"signal", r.signal}, {"scope", SignalScopeText(r.scope)}});
}

std::string HoldRequestToJson(const HoldRequest& r) {
  return json{{"user", r.user}}.dump();
}

Result<HoldRequest> HoldRequestFromJson(std::string_view text) {
  HoldRequest r;
  if (text.empty()) return r;  // a plain POST, as before the body existed
  Result<json> j = Parse(text, "hold");
  if (!j.ok()) return j.status();
  HACHI_RETURN_IF_ERROR(OnlyKeys(*j, "hold", {"user"}));
  if (j->contains("user")) HACHI_RETURN_IF_ERROR(GetBool(*j, "user", "hold", &r.user));
  return r;
}

Result<SignalRequest> SignalRequestFromJson(std::string_view text) {
  Result<json> j = Parse(text, "signal");
  if (!j.ok()) return j.status();
  HACHI_RETURN_IF_ERROR(OnlyKeys(*j, "signal", {"signal", "scope", "batch_only"}));
  SignalRequest r;
  auto sig = j->find("signal");
  if (sig == j->end())
    return InvalidArgument("signal.signal: missing (e.g. \"USR1\" or 10)");
  std::optional<int> n;
  if (sig->is_string()) {
    n = ParseSignal(sig->get<std::string>());
  } else if (sig->is_number_integer()) {
    const long long v = sig->get<long long>();
    if (v >= 1 && v <= 64) n = static_cast<int>(v);
  }
  if (!n) {
    return InvalidArgument("signal.signal: " + Clip(sig->dump()) +
                           " is not a signal (a name such as \"USR1\", or 1-64)");
  }
  r.signal = *n;
  HACHI_RETURN_IF_ERROR(GetSignalScope(*j, "signal", &r.scope));
  return r;
}

namespace {
// The request fields an update may set: every field of the job object's "req" but
// "user" (record_json.cc's ToJson(sched::JobRequest)).
constexpr std::initializer_list<const char*> kUpdatableRequestFields = {
    "gpus",
    "nodes",
    "gpus_per_node",
    "cpus_per_gpu",
    "cpus",
    "memory_mib_per_gpu",
    "memory_mib",
    "gpu_model",
    "min_gpu_memory_mib",
    "partition",
    "qos",
    "account",
    "time_limit",
    "exclusive",
    "dependencies",
    "gpu_share_milli",
    "gpu_memory_mib",
    "constraint",
    "nodelist",
    "exclude",
    "begin_time",
    "deadline",
    "nice"};
}  // namespace

std::string JobUpdateToJson(const JobUpdate& u) {
  json j = json::object();
  json req = json::parse(u.req_patch, nullptr, false);
  if (req.is_object() && !req.empty()) j["req"] = std::move(req);
  if (u.name) j["name"] = state::JsonBytes(*u.name);
  if (u.comment) j["comment"] = state::JsonBytes(*u.comment);
  return j.dump();
}

Result<JobUpdate> JobUpdateFromJson(std::string_view text) {
  Result<json> j = Parse(text, "update");
  if (!j.ok()) return j.status();
  HACHI_RETURN_IF_ERROR(OnlyKeys(*j, "update", {"req", "name", "comment"}));
  JobUpdate u;
  if (auto it = j->find("req"); it != j->end()) {
    if (!it->is_object()) {
      return InvalidArgument(std::string("update.req: expected an object, got ") +
                             it->type_name());
    }
    if (it->contains("user")) {
      return InvalidArgument("update.req.user: a job's user cannot change");
    }
    HACHI_RETURN_IF_ERROR(OnlyKeys(*it, "update.req", kUpdatableRequestFields));
    u.req_patch = it->dump();
  }
  for (const char* key : {"name", "comment"}) {
    auto it = j->find(key);
    if (it == j->end()) continue;
    std::string v;
    if (std::string problem = state::ReadJsonBytes(*it, &v); !problem.empty()) {
      return InvalidArgument(std::string("update.") + key + ": " + problem);
    }
    (std::string(key) == "name" ? u.name : u.comment) = std::move(v);
  }
  return u;
}

Status ApplyRequestPatch(std::string_view patch, sched::JobRequest* req) {
  json p = json::parse(patch, nullptr, false);
  if (p.is_discarded() || !p.is_object()) {
    return InvalidArgument("update.req: expected an object");
  }
  if (p.contains("user"))
    return InvalidArgument("update.req.user: a job's user cannot change");
  HACHI_RETURN_IF_ERROR(OnlyKeys(p, "update.req", kUpdatableRequestFields));
  json merged = ToJson(*req);
  for (auto it = p.begin(); it != p.end(); ++it) merged[it.key()] = it.value();
  sched::JobRequest out;
  HACHI_RETURN_IF_ERROR(FromJson(merged, &out, "update.req"));
  *req = std::move(out);
  return Status::Ok();
}

std::string_view StatusCodeSlug(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid_argument";
    case StatusCode::kNotFound:
      return "not_found";
    case StatusCode::kUnsatisfiable:
      return "unsatisfiable";
    case StatusCode::kBusy:
      return "busy";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kInternal:
      return "internal";
    case StatusCode::kPermissionDenied:
      return "permission_denied";
    case StatusCode::kUnauthenticated:
      return "unauthenticated";
  }
  return "internal";
}

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kUnsatisfiable:
      return 422;
    case StatusCode::kBusy:
      return 409;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kInternal:
      return 500;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kUnauthenticated:
      return 401;
  }
  return 500;
}

std::string ErrorToJson(const Status& s) {
  // A message may quote what the client sent (a node name from the URL): any bytes.
  return Dump(
      json{{"error", {{"code", StatusCodeSlug(s.code())}, {"message", s.message()}}}});
}

Status StatusFromError(int http_status, std::string_view body) {
  json j = json::parse(body, nullptr, false);
  StatusCode code = StatusCode::kInternal;
  switch (http_status) {
    case 400:
    case 413:
      code = StatusCode::kInvalidArgument;
      break;
    case 401:
      code = StatusCode::kUnauthenticated;
      break;
    case 403:
      code = StatusCode::kPermissionDenied;
      break;
    case 404:
      code = StatusCode::kNotFound;
      break;
    case 409:
      code = StatusCode::kBusy;
      break;
    case 422:
      code = StatusCode::kUnsatisfiable;
      break;
    case 503:
      code = StatusCode::kUnavailable;
      break;
    default:
      break;
  }
  if (!j.is_discarded() && j.is_object() && j.contains("error") &&
      j["error"].is_object() && j["error"].contains("message") &&
      j["error"]["message"].is_string()) {
    return Status(code, j["error"]["message"].get<std::string>());
  }
  std::string start(body.substr(0, 200));
  return Status(
      code, "HTTP " + std::to_string(http_status) + (start.empty() ? "" : ": " + start));
}

}  // namespace hachi::api
