// The REST API's messages that are not plain records (docs/api.md): a submit request,
// and the agent protocol (registration, the work long poll's answer, exit reports).
// Jobs and nodes travel as their records (api/record_json.h). Plain values; the JSON
// codecs are in protocol_json.h so this header stays light.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/launch_spec.h"
#include "sched/cluster.h"
#include "state/records.h"

namespace hachi::api {

inline constexpr const char* kApiPrefix = "/api/v1";

struct SubmitRequest {
  sched::JobRequest req;
  state::JobSpec spec;
  bool hold = false;
  std::vector<int> array_tasks;  // --array: one job per task id; empty: one job
  int array_max_running = 0;     // --array=...%N
  // Random per submit (the CLI makes one; docs/api.md, "Submit idempotency"): a second
  // submit with the same key from the same user gets the first one's job ids. "": none.
  std::string idempotency_key;
};

// POST /jobs/ID/signal's body: {"signal": "USR1" or 10, "batch_only": false}.
struct SignalRequest {
  int signal = 0;
  bool batch_only = false;
};

// POST /jobs/ID/update's body (scontrol update, issue 17; docs/api.md "Update"):
// {"req": {...}, "name": "...", "comment": "..."}, each optional. `req` holds fields of
// the job's request (the job object's "req", docs/api.md) with their new values, all
// but "user"; the server merges them into the job's request and validates the result
// as a submit's (ApplyRequestPatch).
struct JobUpdate {
  std::string req_patch = "{}";  // a JSON object's text
  std::optional<std::string> name;
  std::optional<std::string> comment;
};

struct AgentRegistration {
  std::string node;
  std::string address;  // host the job's MASTER_ADDR uses
  std::string topology_json;
  int cpus = 0;
  int64_t memory_mib = 0;
  Time agent_started = 0;              // when this agent process started
  std::string instance;                // random per agent process start
  std::vector<state::JobId> running;   // jobs it supervises now
  std::vector<state::JobId> finished;  // jobs it ran and reported, most recent
  std::string cgroup;                  // its job isolation: "v1", "v2", "none"
};

// What an agent should do next (the work long poll's answer).
// One GPU fault an agent's health monitor saw (agent/gpu_health.h classifies it).
struct GpuHealthEvent {
  int gpu = -1;         // index on the node; -1: node-wide
  std::string kind;     // "xid", "ecc-dbe", "gpu-lost", "remap-failure", ...
  int xid = 0;          // for kind "xid"
  std::string fault;    // "info", "job", "reset", "fatal" or "node"
  std::string message;  // one line: "Xid 79: GPU has fallen off the bus"
  Time at = 0;
};
// A compute process on one of the node's GPUs (NVML's process list), with what the agent
// found out about it; the server decides whether it is stray (no job was given that GPU).
struct GpuProcessReport {
  int gpu = -1;
  uint32_t pid = 0;
  int64_t used_mib = -1;  // -1: NVML does not say
  std::string user;       // the process's owner ("uid1234" without a name)
  std::string command;    // its command line, shortened
  state::JobId job =
      0;  // the Hachi job it belongs to (cgroup, else HACHI_JOB_ID); 0: none
};
// POST /agents/NODE/health.
struct AgentHealth {
  std::string instance;  // the reporting agent process (AgentRegistration::instance)
  std::vector<GpuHealthEvent> events;
  // When has_processes: every compute process on the node's GPUs now (replacing the last
  // list); otherwise the list did not change.
  bool has_processes = false;
  std::vector<GpuProcessReport> processes;
};

struct AgentWork {
  std::vector<api::LaunchSpec> launch;
  std::vector<state::JobId> cancel;  // SIGTERM, grace, SIGKILL
  bool reregister = false;           // the server does not know this agent (restart)
  std::vector<JobSignal> signals;    // issue 17: delivered after the launches
  // scontrol update TimeLimit= of a running job (issue 17): its run that started at
  // `start_time` now ends `time_limit` seconds after it (0: no limit); delivered after
  // the launches.
  struct Limit {
    state::JobId job = 0;
    Time start_time = 0;
    Duration time_limit = 0;
  };
  std::vector<Limit> limits;
};

}  // namespace hachi::api
