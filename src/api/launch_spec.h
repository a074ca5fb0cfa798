// What the server tells an agent to run (DESIGN.md §3 "agent gets the launch"), and
// what the agent reports back: the agent protocol's plain structs, in api/ because both
// server/ and agent/ speak it (DESIGN.md §2). The JSON codecs are in protocol_json.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/gpu_set.h"
#include "core/time.h"
#include "state/records.h"

namespace hachi::api {

// A MIG device of the job on this node (sched/mig.h): what the agent needs
// for CUDA_VISIBLE_DEVICES (the UUID) and the cgroup's /dev/nvidia-caps rules (the
// parent GPU and the GPU and compute instance ids, topo/mig_caps.h).
struct MigLaunch {
  std::string uuid;  // "MIG-..."
  int gpu = -1;      // the parent GPU's index
  int gpu_instance = -1;
  int compute_instance = -1;
  bool operator==(const MigLaunch&) const = default;
};

struct LaunchSpec {
  state::JobId job = 0;
  state::JobSpec spec;  // command/script, workdir, env, output patterns, uid/gid, ...
  std::string user;     // the submitting user's name
  std::string partition;
  // This node's part.
  std::string node;  // this node's name
  GpuSet gpus;       // node-local GPU indices, CUDA_VISIBLE_DEVICES in
                     // ascending order
  int cpus = 0;
  int64_t memory_mib = 0;
  int share_milli = 0;  // GPU share: MPS limits (agent::MpsEnvironment)
  int64_t gpu_memory_mib = 0;
  // MIG devices: when not empty, `gpus` are their parent GPUs, which the job
  // does not get whole; CUDA_VISIBLE_DEVICES names the devices by UUID.
  std::vector<MigLaunch> mig;
  // Filled in by the agent, never sent: the MPS control daemon that serves
  // this share on its GPU (agent/mps.h): its pipe and log directories, and the share's
  // CUDA_VISIBLE_DEVICES under it (the GPU's UUID, else "0"). Empty: no MPS serves it
  // (the agent's soft limit watches its GPU memory instead).
  std::string mps_pipe_dir;
  std::string mps_log_dir;
  std::string mps_device;
  // The whole job (gangs): every node in rank order; node_rank is this node's place.
  std::vector<std::string> nodelist;
  std::vector<std::string> node_addresses;  // same order; MASTER_ADDR is the first
  int node_rank = 0;
  int master_port = 29500;   // MASTER_PORT, chosen by the server per job
  int gpus_per_node = 0;     // NPROC_PER_NODE
  Duration time_limit = 0;   // seconds; 0 = none
  Duration kill_grace = 30;  // SIGTERM -> SIGKILL, for the time limit and cancel
  Time start_time = 0;       // when the server started it (time limit counts from here)
  // Seconds of the time limit left when the server sent this launch, by the server's
  // clock: the agent counts them on its monotonic clock from when it gets them, so that
  // its own wall clock, however wrong, decides nothing. -1: not given (an older server;
  // the agent counts from start_time on its wall clock).
  Duration time_left = -1;
  int restart_count = 0;  // the job's requeues: SLURM_RESTART_COUNT when > 0
  // The run's job credential (server/auth.h): HACHI_JOB_TOKEN, with which srun and the
  // other commands inside the job reach the server as its user. "": none.
  std::string credential;
};

// Which of a job's processes a signal is for, as Slurm's scancel and --signal say it:
// without -b/--full (or B:) the tasks of its steps alone, not the batch shell (whose
// default action for USR1/USR2 is to exit) nor srun; -b (B:) the batch shell alone;
// --full every process of the job.
// The numbers are kept in the agent's run records (agent/run_records.h).
enum class SignalScope : uint8_t {
  kAll = 0,    // the job's process group and every process of its cgroup (--full)
  kBatch = 1,  // the batch shell alone, on the job's first node (-b, B:)
  kSteps = 2,  // the tasks of its steps, on every node (Slurm's default)
};
struct SignalScopeName {
  SignalScope scope;
  const char* name;  // as the API says it
};
inline constexpr SignalScopeName kSignalScopeNames[] = {
    {SignalScope::kAll, "all"},
    {SignalScope::kBatch, "batch"},
    {SignalScope::kSteps, "steps"},
};
inline const char* SignalScopeText(SignalScope s) {
  for (const SignalScopeName& n : kSignalScopeNames) {
    if (n.scope == s) return n.name;
  }
  return "all";
}
// nullopt for a word that is no scope.
inline std::optional<SignalScope> ParseSignalScope(std::string_view word) {
  for (const SignalScopeName& n : kSignalScopeNames) {
    if (word == n.name) return n.scope;
  }
  return std::nullopt;
}

// A signal for a running job (POST /jobs/ID/signal, scancel --signal, --signal's time).
struct JobSignal {
  state::JobId job = 0;
  int signal = 0;
  SignalScope scope = SignalScope::kAll;
};

// Why a job's process ended, as the agent saw it.
enum class ExitKind : uint8_t {
  kExited,        // exit status in exit_code
  kSignaled,      // killed by `signal` (not by us)
  kTimeLimit,     // we stopped it at its time limit
  kCancelled,     // we stopped it on the server's request
  kOutOfMemory,   // the cgroup's OOM killer
  kLaunchFailed,  // never started: exec failed, workdir or output file unusable, ...
  kLost,          // ended while no agent watched it, and how is not known
};

struct JobExit {
  state::JobId job = 0;
  ExitKind kind = ExitKind::kExited;
  int exit_code = 0;
  int signal = 0;
  std::string message;  // launch failures: what failed ("cannot open /x/out: Permission
                        // denied"); otherwise empty
  Time end_time = 0;
  // The run it ends (LaunchSpec::start_time; the agent fills it in): the server ignores
  // a stale exit of an earlier run of a requeued job. 0 = unknown.
  Time start_time = 0;
  // How long before this report was sent the run ended, in ms of the agent's monotonic
  // clock: the server dates the end by its own clock (now - this), so that an agent's
  // wrong wall clock never makes an end before its start. -1: not given (an older agent:
  // end_time counts).
  int64_t ended_ago_ms = -1;
  // kLaunchFailed because its MASTER_PORT was held by a process outside Hachi on this
  // (rank-0) node: that port. The server skips it there and places the job again.
  int busy_port = 0;
  // The agent's own bookkeeping, never on the wire: when the run ended by its monotonic
  // clock (0: not yet noted), from which each send computes ended_ago_ms.
  int64_t ended_mono_ms = 0;
};

}  // namespace hachi::api
