// What the controller's services are configured with and the small types they share
// (server/controller.h wires them; each service's header says its own concern).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "api/protocol.h"
#include "config/cluster_config.h"
#include "core/clock.h"
#include "sched/scheduler.h"
#include "server/power_programs.h"
#include "state/records.h"

namespace hachi::server {

using api::AgentRegistration;
using api::AgentWork;
using api::SubmitRequest;

// A pending job's reason, as the last cycle found it.
struct PendingInfo {
  std::string reason;     // Slurm-like word: "Priority", "Resources", ...
  std::string diagnosis;  // with numbers (sched::Diagnosis::Format)
};

struct ControllerOptions {
  sched::SchedConfig sched;                     // explain is forced on
  std::optional<config::ClusterConfig> config;  // partitions, QoS, limits
  Duration agent_timeout = 30;                  // seconds without a poll: node down
  Duration kill_grace = 10;                     // SIGTERM -> SIGKILL on cancel/limit
  // Fencing (docs/fencing.md). An agent that has not reached the server for `lease`
  // seconds stops its jobs itself (the server tells it the lease when it registers);
  // the server counts a silent node's runs dead, and requeues or ends them, only
  // `lease + kill_grace + fence_margin` after it last heard from the agent. Until then
  // they stay RUNNING and keep their GPUs. lease 0: agent_timeout (so 30 s by default,
  // and the runs are counted dead 45 s after the last contact).
  Duration lease = 0;
  Duration fence_margin = 5;     // clock rates and a slow SIGKILL
  int cycle_interval_ms = 1000;  // the timer; changes wake it at once
  // How often the running jobs' usage is written to the store (a crash loses
  // at most this much of it; a run's end writes its own at once). 0: only at the end.
  int usage_flush_s = 60;
  // Each node's MASTER_PORT range, [base, base + count): a job gets the lowest port of
  // it that no other running job whose rank-0 node has the same address holds
  // (cycle.cc; nodes on one host, as `hachi dev`'s, share a range).
  int master_port_base = 29500;
  int master_port_count = 1000;
  // What one user may have pending, each 0 for no bound: jobs (an array's
  // tasks each count), and bytes of script + environment + argv
  // (state::JobPayload::bytes: an array's once, as it is kept once). A submit past either
  // is refused (kBusy: 409), naming the user, the limit and what the user has pending.
  int64_t max_pending_jobs_per_user = 10000;
  int64_t max_pending_bytes_per_user = int64_t{1} << 30;
  // The key of the job credentials (server/auth.h, JobCredential): the cluster secret.
  // "": jobs get none (their srun then needs the user's own token over TCP).
  std::string credential_key;
  // Every time the controller decides by (records' times, agent silence, the workload
  // refresh) is read here; tests give a FakeClock. Not owned; outlives the controller.
  const Clock* clock = RealClock();
  // How the burst pools' power programs run (power_programs.h); null: as child
  // processes. Tests give their own.
  std::shared_ptr<PowerPrograms> power_programs;
};

// An active job as the dashboard's history samples it (server/history.h): no spec, so a
// sample of 100k pending jobs copies a few MB rather than their environments.
struct JobBrief {
  state::JobId id = 0;
  std::string partition;
  state::JobState state = state::JobState::kPending;
  bool held = false;
  Time submit_time = 0;
  Time start_time = 0;
  int gpus = 0;
};

struct ControllerStats {
  int64_t cycles = 0;
  double last_cycle_ms = 0;  // the scheduler's time in the last cycle
  double max_cycle_ms = 0;   // and in the slowest since the server started
  int64_t starts = 0;
  int64_t submits = 0;
  int64_t internal_errors = 0;  // Plan::errors (a scheduler bug), all cycles together
  bool cycle_due = false;       // a change waits for the next cycle, which runs at once
};

}  // namespace hachi::server
