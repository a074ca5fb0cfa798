#include "api/request_limits.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>

namespace hachi::api {
namespace {

std::string Field(std::string_view path, std::string_view name) {
  return std::string(path) + "." + std::string(name);
}

// An integer in [lo, hi], else "FIELD: V; at least LO" / "...; at most HI".
Status Range(const std::string& field, int64_t v, int64_t lo, int64_t hi,
             std::string_view unit = "") {
  const std::string u = unit.empty() ? "" : " " + std::string(unit);
  if (v < lo) {
    return InvalidArgument(field + ": " + std::to_string(v) + u + "; at least " +
                           std::to_string(lo));
  }
  if (v > hi) {
    return InvalidArgument(field + ": " + std::to_string(v) + u + "; at most " +
                           std::to_string(hi));
  }
  return Status::Ok();
}

Status Bytes(const std::string& field, std::string_view s, size_t max) {
  if (s.size() > max) {
    return InvalidArgument(field + ": " + std::to_string(s.size()) + " bytes; at most " +
                           std::to_string(max));
  }
  return Status::Ok();
}

// What becomes an exec argument, an environment entry or a path is a C string there: a
// NUL would cut it silently.
Status CString(const std::string& field, std::string_view s, size_t max) {
  HACHI_RETURN_IF_ERROR(Bytes(field, s, max));
  if (s.find('\0') != std::string_view::npos) {
    return InvalidArgument(field + ": contains a NUL byte");
  }
  return Status::Ok();
}

Status Count(const std::string& field, size_t n, size_t max, std::string_view what) {
  if (n > max) {
    return InvalidArgument(field + ": " + std::to_string(n) + " " + std::string(what) +
                           "; at most " + std::to_string(max));
  }
  return Status::Ok();
}

Status CheckRequest(const sched::JobRequest& q, const std::string& path) {
  HACHI_RETURN_IF_ERROR(Range(Field(path, "nodes"), q.nodes, 1, kMaxNodes, "nodes"));
  HACHI_RETURN_IF_ERROR(
      Range(Field(path, "gpus_per_node"), q.gpus_per_node, 0, kMaxGpusPerNode, "GPUs"));
  HACHI_RETURN_IF_ERROR(Range(Field(path, "gpus"), q.gpus, 0, kMaxGpusPerNode * q.nodes,
                              q.nodes > 1
                                  ? "GPUs on " + std::to_string(q.nodes) + " nodes"
                                  : std::string("GPUs on one node")));
  HACHI_RETURN_IF_ERROR(Range(Field(path, "cpus"), q.cpus, 0, kMaxCpusPerNode, "CPUs"));
  HACHI_RETURN_IF_ERROR(
      Range(Field(path, "cpus_per_gpu"), q.cpus_per_gpu, 0, kMaxCpusPerGpu, "CPUs"));
  // memory_mib -1: all of each node's memory (sched::kAllOfNodeMemory, --mem=0).
  const std::tuple<const char*, int64_t, int64_t> memory[] = {
      {"memory_mib", q.memory_mib, -1},
      {"memory_mib_per_gpu", q.memory_mib_per_gpu, 0},
      {"min_gpu_memory_mib", q.min_gpu_memory_mib, 0},
      {"gpu_memory_mib", q.gpu_memory_mib, 0}};
  for (const auto& [name, mib, lowest] : memory) {
    HACHI_RETURN_IF_ERROR(Range(Field(path, name), mib, lowest, kMaxMemoryMib, "MiB"));
  }
  // -1: the partition's maximum (--time=UNLIMITED).
  HACHI_RETURN_IF_ERROR(
      Range(Field(path, "time_limit"), q.time_limit, -1, kMaxTimeLimit, "s"));
  HACHI_RETURN_IF_ERROR(
      Range(Field(path, "gpu_share_milli"), q.gpu_share_milli, 0, 999, "thousandths"));
  HACHI_RETURN_IF_ERROR(Count(Field(path, "dependencies"), q.dependencies.size(),
                              kMaxDependencies, "dependencies"));
  for (size_t i = 0; i < q.dependencies.size(); ++i) {
    // singleton waits on the user's jobs of the same name: it names no job (0).
    if (q.dependencies[i].kind == sched::DependencyKind::kSingleton) continue;
    HACHI_RETURN_IF_ERROR(
        Range(Field(path, "dependencies[" + std::to_string(i) + "].job"),
              q.dependencies[i].job, 1, INT64_MAX));
  }
  HACHI_RETURN_IF_ERROR(Bytes(Field(path, "partition"), q.partition, kMaxNameBytes));
  HACHI_RETURN_IF_ERROR(Bytes(Field(path, "qos"), q.qos, kMaxNameBytes));
  HACHI_RETURN_IF_ERROR(Bytes(Field(path, "user"), q.user, kMaxNameBytes));
  HACHI_RETURN_IF_ERROR(Bytes(Field(path, "account"), q.account, kMaxNameBytes));
  HACHI_RETURN_IF_ERROR(Bytes(Field(path, "gpu_model"), q.gpu_model, kMaxCommentBytes));
  // Node selection strings, bounded as a comment.
  HACHI_RETURN_IF_ERROR(Bytes(Field(path, "constraint"), q.constraint, kMaxCommentBytes));
  HACHI_RETURN_IF_ERROR(Bytes(Field(path, "nodelist"), q.nodelist, kMaxCommentBytes));
  HACHI_RETURN_IF_ERROR(Bytes(Field(path, "exclude"), q.exclude, kMaxCommentBytes));
  HACHI_RETURN_IF_ERROR(Bytes(Field(path, "mig_profile"), q.mig_profile, kMaxNameBytes));
  return Status::Ok();
}

Status CheckSpec(const state::JobSpec& s, const std::string& path) {
  HACHI_RETURN_IF_ERROR(Bytes(Field(path, "name"), s.name, kMaxNameBytes));
  HACHI_RETURN_IF_ERROR(
      Count(Field(path, "argv"), s.argv().size(), kMaxArgvEntries, "arguments"));
  size_t argv_bytes = 0;
  for (size_t i = 0; i < s.argv().size(); ++i) {
    HACHI_RETURN_IF_ERROR(CString(Field(path, "argv[" + std::to_string(i) + "]"),
                                  s.argv()[i], kMaxArgvBytes));
    argv_bytes += s.argv()[i].size() + 1;
  }
  HACHI_RETURN_IF_ERROR(Count(Field(path, "argv"), argv_bytes, kMaxArgvBytes, "bytes"));
  HACHI_RETURN_IF_ERROR(Bytes(Field(path, "script"), s.script(), kMaxScriptBytes));
  HACHI_RETURN_IF_ERROR(
      Count(Field(path, "env"), s.env().size(), kMaxEnvEntries, "entries"));
  size_t env_bytes = 0;
  for (size_t i = 0; i < s.env().size(); ++i) {
    const std::string f = Field(path, "env[" + std::to_string(i) + "]");
    const auto& [name, value] = s.env()[i];
    if (name.empty()) return InvalidArgument(f + ": an empty variable name");
    HACHI_RETURN_IF_ERROR(CString(f, name, kMaxEnvBytes));
    HACHI_RETURN_IF_ERROR(CString(f, value, kMaxEnvBytes));
    env_bytes += name.size() + value.size() + 2;
  }
  HACHI_RETURN_IF_ERROR(Count(Field(path, "env"), env_bytes, kMaxEnvBytes, "bytes"));
  HACHI_RETURN_IF_ERROR(CString(Field(path, "workdir"), s.workdir, kMaxPathBytes));
  HACHI_RETURN_IF_ERROR(
      CString(Field(path, "stdout_path"), s.stdout_path, kMaxPathBytes));
  HACHI_RETURN_IF_ERROR(
      CString(Field(path, "stderr_path"), s.stderr_path, kMaxPathBytes));
  HACHI_RETURN_IF_ERROR(
      CString(Field(path, "container_image"), s.container_image, kMaxPathBytes));
  HACHI_RETURN_IF_ERROR(
      Range(Field(path, "shm_mib"), s.shm_mib, 0, kMaxMemoryMib, "MiB"));
  HACHI_RETURN_IF_ERROR(Range(Field(path, "array_job_id"), s.array_job_id, 0, INT64_MAX));
  HACHI_RETURN_IF_ERROR(
      Range(Field(path, "array_task_id"), s.array_task_id, -1, kMaxArrayTaskId));
  HACHI_RETURN_IF_ERROR(
      Range(Field(path, "array_max_running"), s.array_max_running, 0, kMaxArrayTasks));
  HACHI_RETURN_IF_ERROR(Bytes(Field(path, "comment"), s.comment, kMaxCommentBytes));
  // Tasks as sbatch bounds them by CPUs, and a signal the kernel has.
  HACHI_RETURN_IF_ERROR(
      Range(Field(path, "ntasks"), s.ntasks, 0, int64_t{kMaxCpusPerNode} * kMaxNodes));
  HACHI_RETURN_IF_ERROR(
      Range(Field(path, "ntasks_per_node"), s.ntasks_per_node, 0, kMaxCpusPerNode));
  HACHI_RETURN_IF_ERROR(
      Range(Field(path, "cpus_per_task"), s.cpus_per_task, 0, kMaxCpusPerNode));
  HACHI_RETURN_IF_ERROR(Range(Field(path, "signal"), s.signal, 0, 64));
  HACHI_RETURN_IF_ERROR(Range(Field(path, "signal_before"), s.signal_before, 0, 65535));
  return Status::Ok();
}

Status CheckIdList(const std::string& field, const std::vector<state::JobId>& ids) {
  HACHI_RETURN_IF_ERROR(Count(field, ids.size(), kMaxJobIdList, "job ids"));
  for (size_t i = 0; i < ids.size(); ++i) {
    HACHI_RETURN_IF_ERROR(
        Range(field + "[" + std::to_string(i) + "]", ids[i], 1, INT64_MAX));
  }
  return Status::Ok();
}

}  // namespace

Status CheckSubmitLimits(const SubmitRequest& r, const char* path) {
  HACHI_RETURN_IF_ERROR(CheckRequest(r.req, Field(path, "req")));
  HACHI_RETURN_IF_ERROR(CheckSpec(r.spec, Field(path, "spec")));
  const std::string tasks = Field(path, "array_tasks");
  HACHI_RETURN_IF_ERROR(Count(tasks, r.array_tasks.size(), kMaxArrayTasks, "tasks"));
  for (size_t i = 0; i < r.array_tasks.size(); ++i) {
    HACHI_RETURN_IF_ERROR(Range(tasks + "[" + std::to_string(i) + "]", r.array_tasks[i],
                                0, kMaxArrayTaskId, "(task id)"));
  }
  std::vector<int> sorted = r.array_tasks;
  std::sort(sorted.begin(), sorted.end());
  if (auto dup = std::adjacent_find(sorted.begin(), sorted.end()); dup != sorted.end()) {
    return InvalidArgument(tasks + ": task id " + std::to_string(*dup) +
                           " appears twice");
  }
  const std::string max_running = Field(path, "array_max_running");
  HACHI_RETURN_IF_ERROR(Range(max_running, r.array_max_running, 0, kMaxArrayTasks));
  // The encoder writes it only with tasks: without them it would be lost on the way.
  if (r.array_max_running != 0 && r.array_tasks.empty()) {
    return InvalidArgument(max_running + ": set without array_tasks");
  }
  return Status::Ok();
}

Status CheckRegistrationLimits(const AgentRegistration& r) {
  if (r.node.empty()) return InvalidArgument("register.node: empty");
  HACHI_RETURN_IF_ERROR(CString("register.node", r.node, kMaxNameBytes));
  // The name is a path segment of the agent's own endpoints (/agents/NODE/work).
  if (r.node.find('/') != std::string::npos) {
    return InvalidArgument("register.node: '" + r.node + "' contains '/'");
  }
  HACHI_RETURN_IF_ERROR(Bytes("register.address", r.address, kMaxNameBytes));
  HACHI_RETURN_IF_ERROR(Bytes("register.instance", r.instance, kMaxNameBytes));
  HACHI_RETURN_IF_ERROR(Bytes("register.cgroup", r.cgroup, kMaxNameBytes));
  HACHI_RETURN_IF_ERROR(Bytes("register.gpu_driver", r.gpu_driver, kMaxNameBytes));
  HACHI_RETURN_IF_ERROR(Range("register.cpus", r.cpus, 0, kMaxCpusPerNode, "CPUs"));
  HACHI_RETURN_IF_ERROR(
      Range("register.memory_mib", r.memory_mib, 0, kMaxMemoryMib, "MiB"));
  HACHI_RETURN_IF_ERROR(CheckIdList("register.running", r.running));
  HACHI_RETURN_IF_ERROR(CheckIdList("register.finished", r.finished));
  return Status::Ok();
}

Status CheckHealthLimits(const AgentHealth& h) {
  HACHI_RETURN_IF_ERROR(Bytes("health.instance", h.instance, kMaxNameBytes));
  HACHI_RETURN_IF_ERROR(
      Count("health.events", h.events.size(), kMaxHealthEvents, "events"));
  for (size_t i = 0; i < h.events.size(); ++i) {
    const std::string path = "health.events[" + std::to_string(i) + "]";
    HACHI_RETURN_IF_ERROR(Bytes(path + ".kind", h.events[i].kind, kMaxNameBytes));
    HACHI_RETURN_IF_ERROR(
        Bytes(path + ".message", h.events[i].message, kMaxMessageBytes));
  }
  // A sample per running job; a node runs at most a few hundred.
  HACHI_RETURN_IF_ERROR(
      Count("health.usage", h.usage.size(), kMaxHealthEvents, "samples"));
  for (size_t i = 0; i < h.usage.size(); ++i) {
    HACHI_RETURN_IF_ERROR(Count("health.usage[" + std::to_string(i) + "].gpus",
                                h.usage[i].gpus.size(),
                                static_cast<size_t>(GpuSet::kMaxGpus), "GPUs"));
  }
  // A node runs at most a few hundred GPU processes; more is not a real report.
  HACHI_RETURN_IF_ERROR(
      Count("health.processes", h.processes.size(), kMaxHealthEvents, "processes"));
  for (size_t i = 0; i < h.processes.size(); ++i) {
    const std::string path = "health.processes[" + std::to_string(i) + "]";
    HACHI_RETURN_IF_ERROR(Bytes(path + ".user", h.processes[i].user, kMaxNameBytes));
    HACHI_RETURN_IF_ERROR(
        Bytes(path + ".command", h.processes[i].command, kMaxMessageBytes));
  }
  return Status::Ok();
}

Status CheckExitLimits(const std::vector<api::JobExit>& exits) {
  HACHI_RETURN_IF_ERROR(Count("exits", exits.size(), kMaxJobIdList, "exits"));
  for (size_t i = 0; i < exits.size(); ++i) {
    HACHI_RETURN_IF_ERROR(Bytes("exits[" + std::to_string(i) + "].message",
                                exits[i].message, kMaxMessageBytes));
  }
  return Status::Ok();
}

}  // namespace hachi::api
