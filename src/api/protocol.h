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
// The largest request body the server reads (server::HttpOptions::max_body_bytes; larger
// ones get 413): what an agent's reports are sized to stay well under.
inline constexpr size_t kMaxRequestBodyBytes = 4 << 20;

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

// POST /jobs/ID/signal's body: {"signal": "USR1" or 10, "scope": "steps"}; scope
// "all" (the default), "batch" or "steps" (api::SignalScope). An older client's
// "batch_only": true is "batch".
struct SignalRequest {
  int signal = 0;
  SignalScope scope = SignalScope::kAll;
};

// POST /jobs/ID/hold's body, optional: {"user": true} is a hold the job's user may
// release (scontrol uhold). Without it an administrator's hold is an administrator's
// (Slurm's JobHeldAdmin: only an administrator releases it), anyone else's the user's.
struct HoldRequest {
  bool user = false;
};

// POST /jobs/ID/update's body (scontrol update; docs/api.md "Update"):
// {"req": {...}, "name": "...", "comment": "..."}, each optional. `req` holds fields of
// the job's request (the job object's "req", docs/api.md) with their new values, all
// but "user"; the server merges them into the job's request and validates the result
// as a submit's (ApplyRequestPatch).
struct JobUpdate {
  std::string req_patch = "{}";  // a JSON object's text
  std::optional<std::string> name;
  std::optional<std::string> comment;
};

// Job steps (docs/api.md "Steps"). POST /jobs/ID/steps's body: what srun
// asks for inside job ID's allocation. Counts of 0 mean "the default": nodes: all the
// job's nodes (at most ntasks of them), ntasks: one per node (ntasks_per_node each when
// given).
struct StepRequest {
  std::vector<std::string> argv;
  state::EnvList env;   // srun's environment: what the tasks inherit
  std::string workdir;  // srun's working directory
  std::string name;     // srun -J; "": the command's base name
  int nodes = 0;        // -N
  int ntasks = 0;       // -n
  int ntasks_per_node = 0;
  int cpus_per_task = 0;  // -c; 0: the job's CPUs on the node shared by its tasks
  int gpus_per_task = 0;  // --gpus-per-task; 0: every task sees its node's GPUs
  // -o/-e patterns (%j %s %t %n %N %A %a %u %x %%): each task writes its file on its
  // node instead of sending the stream to srun. "" = to srun.
  std::string stdout_pattern;
  std::string stderr_pattern;
  std::vector<std::string> node_list;  // -w: these of the job's nodes only
  bool kill_on_bad_exit = false;       // -K: a task that fails stops the step
  bool overlap = false;                // --overlap (another user's admin shell, ...)
  bool pty = false;                    // --pty: task 0 on a terminal (one task)
  int rows = 0;                        // with pty: srun's window size (0: unknown)
  int cols = 0;
};

// POST /jobs/ID/steps/N/input: bytes for a --pty step's terminal (what the user types,
// in raw mode: Ctrl-C is 0x03, which the remote terminal turns into SIGINT), and/or its
// new window size (rows and cols > 0). Sent to the step's node in AgentWork.step_input.
struct StepInput {
  state::JobId job = 0;
  Time job_start = 0;
  int step = 0;
  std::string data;
  int rows = 0;
  int cols = 0;
};

// One node's part of a step, sent to its agent in AgentWork.steps.
struct StepLaunch {
  state::JobId job = 0;
  Time job_start = 0;  // the job's run (LaunchSpec::start_time)
  int step = 0;
  std::vector<std::string> argv;
  state::EnvList env;  // srun's; the agent adds the node's and the tasks' variables
  std::string workdir;
  std::string name;
  std::vector<std::string> nodes;   // the step's nodes, in order
  int node_index = 0;               // this node's place in `nodes` (SLURM_NODEID)
  std::vector<int> tasks;           // the global ranks (SLURM_PROCID) run here
  int ntasks = 0;                   // in the whole step
  std::vector<int> tasks_per_node;  // by node index (SLURM_STEP_TASKS_PER_NODE)
  int cpus_per_task = 0;
  int gpus_per_task = 0;
  std::string stdout_pattern;
  std::string stderr_pattern;
  bool pty = false;  // its one task on a terminal (the agent holds the other end)
  int rows = 0;
  int cols = 0;
  Duration kill_grace = 30;
};

// A signal for a running step's tasks on a node (srun's Ctrl-C, a failing task with -K,
// scancel ID.S); `cancel`: SIGTERM, the kill grace, SIGKILL.
struct StepSignal {
  state::JobId job = 0;
  Time job_start = 0;
  int step = 0;
  int signal = 0;  // with !cancel
  bool cancel = false;
};

// A task's end on its node.
struct TaskExit {
  int task = 0;  // global rank
  ExitKind kind = ExitKind::kExited;
  int exit_code = 0;
  int signal = 0;
  std::string message;  // launch failures: why
  std::string node;     // where it ran (the server fills it in from the report)
};

// Output of a step's tasks: bytes as read, tagged with the task and the stream. A chunk
// with `lost` > 0 holds no data: that many bytes of the task's stream were dropped
// here, because the agent's bounded buffer filled while the server did not take them.
struct OutputChunk {
  int task = 0;
  int fd = 1;  // 1 stdout, 2 stderr
  std::string data;
  int64_t lost = 0;
  int64_t size() const { return lost > 0 ? lost : static_cast<int64_t>(data.size()); }
};

// POST /agents/NODE/steps: what a node's agent has for the steps it runs. `seq` is the
// agent's offset in this node's stream of the step (the chunks' sizes so far), so that
// a batch sent twice is taken once. `exits`: tasks that ended; `done` once every task of
// the node ended and all its output is in this batch or before.
struct StepReport {
  state::JobId job = 0;
  Time job_start = 0;
  int step = 0;
  int64_t seq = 0;
  std::vector<OutputChunk> chunks;
  std::vector<TaskExit> exits;
  bool done = false;
};
struct StepReports {
  std::string instance;  // the agent process (AgentRegistration::instance)
  std::vector<StepReport> steps;
};
// The reply: per step, the offset the server holds everything before (the agent drops
// that much); `gone` for a step the server has ended (the agent stops it).
struct StepAck {
  state::JobId job = 0;
  Time job_start = 0;
  int step = 0;
  int64_t next = 0;
  bool gone = false;
};

// GET /jobs/ID/steps/S/output?from=N&wait_ms=M: the step's merged output from offset N
// (bytes of chunk data since the step began; the server keeps what the reader has not
// read up to a bound, then drops the oldest: `lost` bytes before `from` are gone), and,
// once every task has ended and everything was read, `done` with the tasks' exits.
struct StepOutput {
  int64_t from = 0;  // where these chunks start (>= the asked offset when data was lost)
  int64_t next = 0;  // ask from here next
  int64_t lost = 0;  // bytes between the asked offset and `from` that were dropped
  std::vector<OutputChunk> chunks;
  bool done = false;
  state::StepRecord step;       // its record (state, exit code once ended)
  std::vector<TaskExit> exits;  // with done: every task's, by rank
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
  // How GPU shares are isolated there: "mps", or "soft-limit: <why not
  // MPS>"; "" from an agent that does not say.
  std::string gpu_sharing;
  // Steps whose tasks run here now: the server ends the others it thought
  // ran here (their agent restarted).
  std::vector<state::StepKey> steps;
  // Burn-in: the GPU driver version NVML reports ("550.54.15"; "" when the
  // agent has no NVML), which with the topology is the node's fingerprint, and whether
  // its GPUs are simulated (--preset, --topology-file), which skip [burn_in]'s checks.
  std::string gpu_driver;
  bool simulated = false;
};

// Burn-in (docs/burn-in.md): the checks a node, or some of its GPUs, must
// pass before they take jobs, and what the agent found.
struct BurnInWork {
  int run = 0;  // the server's number of this run; the report names it
  // config::BurnInConfig::checks' form: "doctor [options]", "commtest [options]", or a
  // site script's command line.
  std::vector<std::string> checks;
  std::vector<int> gpus;    // empty: the whole node
  Duration timeout = 1800;  // all checks together
};
// POST /agents/NODE/burn-in.
struct BurnInReport {
  std::string instance;  // the reporting agent process
  int run = 0;
  bool passed = false;
  std::string check;   // the check that failed, as configured; "" when passed
  std::string reason;  // one line: its first FAIL item, or its last line of output
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
  // (state/usage.h): the running jobs' latest samples, one per job, taken
  // since the last report (absent on the wire when none).
  std::vector<state::JobUsageSample> usage;
};

// A run to stop (SIGTERM, grace, SIGKILL): the job's run that started at `start_time`;
// 0: whichever run of the job the agent has. A run the agent never started (its launch
// was lost or is in the same batch) ends there and then as cancelled, and its launch, if
// it comes later, is not run: a stop is never lost to a launch that arrives after it.
struct RunStop {
  state::JobId job = 0;
  Time start_time = 0;
  bool operator==(const RunStop&) const = default;
};

struct AgentWork {
  std::vector<api::LaunchSpec> launch;
  std::vector<RunStop> cancel;
  bool reregister = false;  // the server does not know this agent (restart)
  // Acknowledged delivery: a batch with work has a sequence number (0: none, e.g. an
  // empty answer), and the agent's next poll acknowledges the last batch it acted on
  // (`ack=SEQ`). A batch not acknowledged is sent again, ahead of newer work, with the
  // next answer: a lost answer loses nothing, and the agent acts on every item once.
  uint64_t seq = 0;
  std::vector<JobSignal> signals;  // delivered after the launches
  // scontrol update TimeLimit= of a running job: its run that started at
  // `start_time` now ends `time_limit` seconds after it (0: no limit); delivered after
  // the launches.
  struct Limit {
    state::JobId job = 0;
    Time start_time = 0;
    Duration time_limit = 0;
    Duration time_left = -1;  // as LaunchSpec::time_left
  };
  std::vector<Limit> limits;
  // Job steps: parts to start, after the launches; then signals for steps.
  std::vector<StepLaunch> steps;
  std::vector<StepSignal> step_signals;
  std::vector<StepInput> step_input;  // in the order typed
  // Burn-in: a run to start now, replacing any the agent has under way.
  std::optional<BurnInWork> burn_in;

  // Nothing to do (reregister aside): the poll may wait. Every field above is here,
  // since a poll that waits drops what it had taken.
  bool Empty() const {
    return launch.empty() && cancel.empty() && signals.empty() && limits.empty() &&
           steps.empty() && step_signals.empty() && step_input.empty() && !burn_in;
  }
  // The jobs of `cancel`, in order.
  std::vector<state::JobId> CancelledJobs() const {
    std::vector<state::JobId> jobs;
    for (const RunStop& s : cancel) jobs.push_back(s.job);
    return jobs;
  }
};

}  // namespace hachi::api
