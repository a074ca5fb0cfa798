// What the server keeps about jobs and nodes (DESIGN.md §2 state/): the durable records,
// their lifecycle, and the in-memory image they form. The records are the single source
// of truth; the scheduler's snapshot (sched::ClusterState) is derived from them each
// cycle (server/snapshot.h). Node indices never appear here — allocations name their
// node — so a record stays valid when nodes register in another order.
//
// Plain values; thread-compatible.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/gpu_set.h"
#include "core/time.h"
#include "sched/cluster.h"
#include "state/usage.h"

namespace hachi::state {

using JobId = sched::JobId;

// Slurm's job states, with its two-letter codes (squeue's ST column).
enum class JobState : uint8_t {
  kPending,      // PD
  kRunning,      // R
  kCompleted,    // CD: exit status 0
  kFailed,       // F:  non-zero exit or killed by a signal it did not ask for
  kCancelled,    // CA: by the user or an admin
  kTimeout,      // TO: hit its time limit
  kNodeFail,     // NF: its node went down and the job was not requeued
  kOutOfMemory,  // OOM: killed by its memory limit
  kDeadline,     // DL: could no longer end by its --deadline, never started
};
inline constexpr JobState kAllJobStates[] = {
    JobState::kPending,  JobState::kRunning,     JobState::kCompleted,
    JobState::kFailed,   JobState::kCancelled,   JobState::kTimeout,
    JobState::kNodeFail, JobState::kOutOfMemory, JobState::kDeadline};
std::string_view JobStateName(JobState s);  // "PENDING", "RUNNING", ...
std::string_view JobStateCode(
    JobState s);  // "PD", "R", "CD", "F", "CA", "TO", "NF", "OOM", "DL"
// Parses a name or a code, any case ("pending", "PD", "r"); false when unknown.
bool ParseJobState(std::string_view text, JobState* out);
inline bool IsFinal(JobState s) {
  return s != JobState::kPending && s != JobState::kRunning;
}

using EnvList = std::vector<std::pair<std::string, std::string>>;

// A job's batch script, environment and arguments: the bulk of what a submit sends (a
// script or an argv may be a megabyte each). Immutable once built, so the tasks of an
// array share one: the server holds it once in memory, the store keeps it once on disk
// (docs/storage.md, table `payloads`).
struct JobPayload {
  std::string script;  // the batch script's text ("" for a wrapped command)
  EnvList env;         // the submitter's environment (what the job inherits)
  // The command; for a script job: {"/bin/sh"-like interpreter from the shebang, script
  // path} is built by the agent, argv then holds the script's arguments.
  std::vector<std::string> argv;
  bool empty() const { return script.empty() && env.empty() && argv.empty(); }
  // What it costs: its bytes (what the per-user pending bound counts, once per array);
  // an argument counts one more, as exec's does (its NUL), so that a million empty
  // arguments are not free.
  int64_t bytes() const {
    int64_t n = static_cast<int64_t>(script.size());
    for (const auto& [name, value] : env)
      n += static_cast<int64_t>(name.size() + value.size());
    for (const std::string& a : argv) n += static_cast<int64_t>(a.size() + 1);
    return n;
  }
};

// What the user asked to run, beyond the resource request (sched::JobRequest).
struct JobSpec {
  std::string name;  // --job-name; default: the script's or command's base name
  // Script, environment and argv, shared by the tasks of an array (JobPayload); null
  // reads as empty. Copying a JobSpec copies the pointer, never the text.
  // Inline: the agent and the API use them without linking state/.
  std::shared_ptr<const JobPayload> payload;
  const std::string& script() const {
    static const std::string kEmpty;
    return payload ? payload->script : kEmpty;
  }
  const EnvList& env() const {
    static const EnvList kEmpty;
    return payload ? payload->env : kEmpty;
  }
  const std::vector<std::string>& argv() const {
    static const std::vector<std::string> kEmpty;
    return payload ? payload->argv : kEmpty;
  }
  // Each builds a new payload (the old one may be shared: never changed in place); an
  // empty one: none.
  void SetPayload(JobPayload p) {
    payload = p.empty() ? nullptr : std::make_shared<const JobPayload>(std::move(p));
  }
  void set_script(std::string s) { SetPayload({std::move(s), env(), argv()}); }
  void set_env(EnvList e) { SetPayload({script(), std::move(e), argv()}); }
  void set_argv(std::vector<std::string> a) {
    SetPayload({script(), env(), std::move(a)});
  }
  std::string workdir;  // absolute; default: the submitter's cwd
  // Output paths as given, with Slurm's patterns (%j job id, %x name, %A array job,
  // %a array task, %u user, %N first node, %% percent). Empty stdout: "hachi-%j.out" in
  // workdir; empty stderr: same file as stdout. Relative paths are under workdir.
  std::string stdout_path;
  std::string stderr_path;
  uint32_t uid = 0;  // the submitting user, as the server saw them
  uint32_t gid = 0;
  std::string container_image;  // --container-image: run through the configured runtime
  int64_t shm_mib = 0;        // --shm-size for containers; 0 = partition/runtime default
  bool requeue = false;       // --requeue: back to pending when its node dies
  JobId array_job_id = 0;     // array tasks: the first task's id (%A)
  int array_task_id = -1;     // array tasks: HACHI_ARRAY_TASK_ID (%a); -1 otherwise
  int array_max_running = 0;  // --array=1-100%10: at most 10 tasks run at once; 0 = any
  std::string comment;
  // The job runtime's Slurm options (docs/cli.md). 0 / false: not given.
  int ntasks = 0;           // -n/--ntasks: SLURM_NTASKS, SLURM_NPROCS
  int ntasks_per_node = 0;  // --ntasks-per-node: SLURM_NTASKS_PER_NODE
  int cpus_per_task = 0;    // -c/--cpus-per-task: SLURM_CPUS_PER_TASK
  // --signal=[R][B:]SIG[@TIME]: `signal` (a number) is sent `signal_before` seconds
  // before the time limit, to the batch shell alone when `signal_batch_only`.
  int signal = 0;
  int signal_before = 0;
  bool signal_batch_only = false;
  bool open_append = false;  // --open-mode=append (default truncate, as Slurm's)
  // The batch script runs on the job's first node only, as Slurm's batch step
  // (sbatch's default); the other nodes hold the allocation for its steps (srun). false:
  // every node runs it (hachi submit's default).
  bool batch_on_first_node = false;
  // An allocation with no batch script (salloc; srun and hachi run outside an
  // allocation): every node holds it for the steps its owner starts, until the owner
  // ends it (POST /jobs/ID/complete with the exit code) or its time limit.
  bool interactive = false;
};

// One node's part of a running job (sched::Allocation with the node named).
struct NodeAllocation {
  std::string node;
  GpuSet gpus;
  int cpus = 0;
  int64_t memory_mib = 0;
  int share_milli = 0;  // GPU share (sched/gpu_share.h); 0 = whole GPUs
  int64_t gpu_memory_mib = 0;
  std::vector<std::string> mig =
      {};  // MIG devices' UUIDs (sched/mig.h); `gpus`: their GPUs
};

struct JobRecord {
  JobId id = 0;
  sched::JobRequest req;  // as validated at submit (partition and time limit filled in)
  JobSpec spec;
  JobState state = JobState::kPending;
  bool held = false;
  // Held by an administrator (Slurm's JobHeldAdmin): only an administrator releases it.
  // False while not held, and for a hold of the user's own (JobHeldUser).
  bool held_by_admin = false;
  Time submit_time = 0;  // seconds since the Unix epoch
  Time start_time = 0;   // last start (0 while it never ran)
  Time end_time = 0;
  std::vector<NodeAllocation> allocations;  // while running; kept after it ends (history)
  int exit_code = 0;   // the process's exit status (0..255) when it exited
  int signal = 0;      // the signal that ended it, 0 if it exited
  std::string reason;  // why it ended ("time limit 1m", "cancelled by alice",
                       // "node n2 down") or, while pending, why it was last requeued
  int requeues = 0;
  // The most GPU memory the job's processes held on one GPU, MiB, as NVML reported it
  // to its agents (what users size --gpu-mem from); of the last run, set when
  // it ends (the server keeps a running job's in memory). 0: not measured.
  int64_t gpu_memory_peak_mib = 0;
  // What the last run did with its GPUs, CPUs and memory (state/usage.h): the
  // summary of its JobUsage, set when the run ends (the server keeps a running job's in
  // memory; the per-GPU figures and series are in the store's usage table).
  UsageSummary usage = {};
  // MASTER_PORT of the last start, chosen by the server from its rank-0 node's port
  // range (server/cycle.cc) and kept so that a re-dispatch sends the same one. 0: a row
  // from before ports were tracked; dispatch then uses base + id % 1000.
  int master_port = 0;
  // The idempotency key of the submit that made it (per uid; server/submit_keys.h), so
  // that a retried submit finds this job after a restart too. "" when none was given.
  // Kept in the store's rows, not in the API's job objects.
  std::string submit_key;
};

enum class NodeState : uint8_t {
  kUp,       // agent alive, takes jobs
  kDrained,  // admin drain: no new jobs; running ones finish
  kDown,     // agent silent past the timeout, or never registered since restart
  // (docs/burn-in.md): its agent is up but the node has not passed its burn-in
  // checks (new, or a changed driver or topology): no jobs until it does. The reason
  // says whether they run or which one failed.
  kBurnIn,
};
std::string_view NodeStateName(NodeState s);  // "up", "drained", "down", "burn-in"
bool ParseNodeState(std::string_view text, NodeState* out);

// Where a node's (or some of its GPUs') burn-in stands; kNone: no run under way or failed
// (passed, or none ever needed).
enum class BurnInPhase : uint8_t { kNone, kRunning, kFailed };
std::string_view BurnInPhaseName(BurnInPhase p);  // "", "running", "failed"
bool ParseBurnInPhase(std::string_view text, BurnInPhase* out);

struct NodeRecord {
  std::string name;
  std::string address;        // where the agent is reachable, as it registered ("host")
  std::string topology_json;  // topo::TopologyToJson of what the agent discovered
  int cpus = 0;
  int64_t memory_mib = 0;
  std::string block;  // network block (leaf switch) for gang placement; "" = none
  NodeState state = NodeState::kDown;
  std::string state_reason;  // drain reason, "agent silent 30s", ...
  Time state_since = 0;
  GpuSet unhealthy;  // GPUs drained by health checks; never allocated
  std::map<int, std::string> unhealthy_reasons;  // GPU index -> why ("Xid 79: ...")
  // The agent process that registered last (a random id per agent start): a node whose
  // agent re-registers with another id has restarted and lost track of its jobs.
  std::string agent_instance;
  // How its agent isolates jobs (docs/isolation.md): "v1", "v2" (cgroups) or "none";
  // "" when the agent did not say.
  std::string cgroup;
  // How its agent isolates GPU shares (docs/isolation.md "GPU shares"): "mps"
  // (an MPS server per shared GPU enforces the limits), or "soft-limit: <why not MPS>"
  // (the agent ends a share that uses more GPU memory than promised); "" when the agent
  // did not say.
  std::string gpu_sharing;
  // Burn-in (docs/burn-in.md). The node's fingerprint (GPU driver and
  // topology) when its checks last passed; "" never: a node that registers with another
  // one is burned in again.
  std::string burn_in_passed;
  // The latest burn-in run: its number (an agent's report names the run it did, so a
  // superseded run's report changes nothing), whether it is under way or failed, and
  // what it checks: empty `burn_in_gpus` is the whole node (state kBurnIn), else these
  // GPUs only (`resume --gpu`), which stay in `unhealthy` until it passes.
  int burn_in_run = 0;
  BurnInPhase burn_in = BurnInPhase::kNone;
  GpuSet burn_in_gpus;
};

// A node as `hachi nodes` and the API show it: the record plus what the server derives
// (not stored).
// A process on one of a node's GPUs that no running job was given that GPU for: a user
// who pinned a GPU by hand, or a job's process on a GPU outside its allocation. The agent
// reports NVML's process list (agent/gpu_processes.h); the server keeps the strays in
// memory only (the next report replaces them).
struct StrayGpuProcess {
  int gpu = -1;
  uint32_t pid = 0;
  int64_t used_mib = -1;  // -1: NVML does not say
  std::string user;
  std::string command;
  JobId job =
      0;  // the Hachi job it belongs to (running elsewhere / on other GPUs), 0: none
  Time since = 0;  // when the agent first reported it
};

// One MIG device of a node (sched/mig.h), as `hachi nodes --gpus` and the
// dashboard show it: from the node's topology, with the job holding it.
struct NodeMigDevice {
  int gpu = -1;  // the parent GPU's index
  std::string profile;
  std::string uuid;
  int64_t memory_mib = 0;
  JobId job = 0;  // 0: free
};

struct NodeStatus {
  NodeRecord record;
  int gpus = 0;
  std::string gpu_model;
  int64_t gpu_memory_mib = 0;
  std::string interconnect;                // topo::InterconnectClassName
  std::vector<std::string> partitions;     // names
  std::vector<JobId> gpu_jobs;             // per GPU index: the job holding it, 0 = free
                                           // (a shared GPU shows its first job)
  std::vector<int> gpu_share_milli;        // per GPU: thousandths given to shares
  std::vector<NodeMigDevice> mig_devices;  // by GPU, then as NVML lists them
  int alloc_cpus = 0;
  int64_t alloc_memory_mib = 0;
  std::vector<StrayGpuProcess> stray_processes;
  // What its agent's MPS daemons did lately ("2026-12-03T10:00:00Z GPU 2: MPS
  // control daemon ... restarted"), oldest first; kept in memory, the last few.
  std::vector<std::string> gpu_sharing_events;
  // Per GPU index, its SM utilisation (%) in the latest sample of a running
  // job holding it, -1 when none came (free, simulated, or not sampled yet). API only,
  // derived from the agents' usage samples; the dashboard shades the node board by it.
  std::vector<int> gpu_util;
  // Its features (sched/features.h: automatic and configured, sorted), which -C
  // matches; sinfo's %f, scontrol show node's AvailableFeatures.
  std::vector<std::string> features;
  // Its agent's wall clock minus the server's (ms), measured at its latest work poll
  // (server/clock_offsets.h); none: not since the server started, or an older agent.
  // API only, in memory.
  std::optional<int64_t> clock_offset_ms;
  // A node of a burst pool (docs/pools.md): its pool and its power state ("on", "off",
  // "resuming", "burn-in", "suspending", "resume-failed"); both "" for another node.
  // A burst node that has not registered is shown with its pool's shape, down.
  std::string pool;
  std::string power;
};

// An API token the server issued (`hachi token create`, server/auth.h). The token's
// text is shown once and never stored: only its SHA-256, which is what a presented
// token is looked up by.
struct TokenRecord {
  std::string id;      // 12 hex digits: what `hachi token list` shows and revoke takes
  std::string sha256;  // of the whole token text, 64 hex digits
  std::string user;    // who the bearer is
  uint32_t uid = 0;    // resolved at issue time (the password database, or given)
  uint32_t gid = 0;
  bool admin = false;
  Time created = 0;
  std::string created_by;  // the admin who issued it
};

// A job step: one `srun` inside a job's allocation, its tasks run on some
// of the job's nodes through their agents. Steps belong to one run of the job
// (job_start, JobRecord::start_time of that run): a requeued job's new run numbers its
// steps from 0 again, and sacct shows the latest run's. The batch script itself is not
// a step record: sacct's ID.batch is made from the job's record.
struct StepRecord {
  JobId job = 0;
  Time job_start = 0;  // the run of the job it belongs to
  int step = 0;        // 0, 1, ... in the order the run's steps were created
  std::string name;    // srun -J, else the command's base name (sacct's JobName)
  std::string user;    // who created it (the job's user, or an admin: --overlap)
  std::vector<std::string> nodes;  // where its tasks run, in node-rank order
  int ntasks = 0;
  int cpus = 0;                         // all tasks together
  int gpus = 0;                         // all nodes together
  JobState state = JobState::kRunning;  // kRunning, then a final state
  Time start_time = 0;
  Time end_time = 0;   // 0 while running
  int exit_code = 0;   // the worst task's (srun's exit status)
  int signal = 0;      // when the worst task was killed by a signal
  std::string reason;  // why it ended, when not by its tasks' own exits
};
// Steps by (job, job_start, step).
struct StepKey {
  JobId job = 0;
  Time job_start = 0;
  int step = 0;
  friend auto operator<=>(const StepKey&, const StepKey&) = default;
};

// All records: what Store::Load returns and what the server applies edits to.
struct StateImage {
  std::map<JobId, JobRecord> jobs;
  std::map<std::string, NodeRecord> nodes;
  std::map<std::string, TokenRecord> tokens;  // by id; revoked tokens are removed
  std::map<StepKey, StepRecord> steps;
  JobId last_job_id = 0;  // ids are never reused, even after a restart
};

}  // namespace hachi::state
