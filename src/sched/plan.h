// The scheduler's output: jobs to start (with their nodes and GPUs), backfill
// reservations, and a diagnosis for every job left pending. Plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/time.h"
#include "sched/cluster.h"

namespace hachi::sched {

struct Start {
  JobId job = 0;
  std::vector<Allocation> allocations;  // one per node (gangs: several)
  bool backfilled = false;              // started ahead of a higher-priority job
};

// A future start the scheduler holds resources for (conservative backfill).
struct Reservation {
  JobId job = 0;
  Time start = 0;
  std::vector<Allocation> allocations;
};

// A running job to stop: signal at `signal_at`, stop at `kill_at` (= signal_at + the
// grace of the job's partition), then requeue or cancel per `mode`. The caller sets
// Job::preempt_kill_at when it applies one, so the job is not chosen again.
struct Preemption {
  JobId job = 0;
  PreemptMode mode = PreemptMode::kRequeue;
  Time signal_at = 0;
  Time kill_at = 0;
  JobId for_job = 0;       // the pending job that needs its resources (tier), or 0
  int for_partition = -1;  // time windows: the partition whose window opens, or -1
};

// Why a job is still pending. Codes are stable (API, `hachi show job`, metrics).
enum class Reason : uint8_t {
  kNone = 0,
  kPriority,          // resources exist but higher-priority jobs come first
  kResources,         // no node (set) has enough free GPUs/CPUs/memory now
  kFragmented,        // enough free GPUs in total, but not on few enough nodes
  kReservedForOther,  // the fitting resources are reserved for a higher-priority job
  kUserQuota,         // user at their GPU quota
  kAccountQuota,      // account at its GPU quota
  kDependency,        // waiting for another job
  kDependencyNeverMet,
  kHeld,
  kIsolation,         // nodes held by whole-node jobs (or their reservations)
  kNodesUnavailable,  // the partition's fitting nodes are drained/down
  kPreempting,        // lower-tier jobs were told to leave for it; waits for their grace
  kTimeWindow,        // the fitting nodes belong to another partition's time window
  kInternal,          // the scheduler failed (e.g. the GPU allocator): Plan::errors
  // (Slurm's words):
  kBadConstraints,   // -C/-w/-x: no node of the partition can ever hold the job
  kReqNodeNotAvail,  // -w/-C/-x: the nodes it may use are all down or drained
  kBeginTime,        // --begin: not before JobRequest::begin_time
  kDeadline,         // --deadline: it can no longer end by then; the caller ends it
  // A GPU share: the only shared GPUs with room for it hold another user's shares, and
  // an MPS server serves one user per GPU (gpu_share.h); no free GPU took it either.
  kMpsOtherUser,
  // MIG devices (mig.h): no node of the partition has enough free devices of the
  // job's profile (free_gpus: free ones, largest_free: the most on one node, mig_total:
  // all of them).
  kMigBusy,
};
std::string_view ReasonName(Reason r);  // "Priority", "Resources", ... (Slurm-like)

// Numbers behind a reason, filled without string formatting; Format() makes the text
// ("needs 8 GPUs on one node; largest free set is 5 (node n3); earliest start 14:20 on
// n1 when job 812 hits its time limit", "account ml-infra at quota: 32/32 GPUs").
struct Diagnosis {
  JobId job = 0;
  Reason reason = Reason::kNone;
  // kPreempting: how many jobs leave for it (saturates at 255) and their partition (-1:
  // several); kTimeWindow: `partition` owns the nodes in a window. Small types fill
  // padding: 100k diagnoses a cycle are copied, so the struct stays small (88 bytes).
  uint8_t preempt_jobs = 0;
  int16_t partition = -1;
  int needed_gpus = 0;  // per node
  int needed_nodes = 1;
  int largest_free = 0;  // largest free GPU set on an eligible node
  int largest_free_node = -1;
  int eligible_nodes = 0;        // nodes of the partition that could ever hold the job
  int free_gpus = 0;             // free GPUs in the partition, all nodes together
  int queue_position = 0;        // 1-based, in priority order
  Time earliest_start = kNever;  // from the backfill timeline, when known
  int earliest_node = -1;
  int32_t preempt_grace = 0;  // kPreempting: seconds, the longest of the victims'
  JobId blocking_job = 0;     // the job whose end frees the resources, when known
  int quota_used = 0, quota_limit = 0;
  int other_user_gpus = 0;  // kMpsOtherUser: shared GPUs with room, another user's
  int mig_total = 0;        // kMigBusy: devices of the profile on the eligible nodes
  double priority = 0;

  std::string Format(const ClusterState& state, Time now) const;
};

struct Plan {
  std::vector<Start> starts;
  std::vector<Reservation>
      reservations;  // preemptors' included, from their victims' exit
  std::vector<Preemption> preemptions;
  std::vector<Diagnosis> pending;  // one per job left pending, in priority order
  // Cycle statistics (for metrics and benchmarks).
  int considered = 0;  // pending jobs looked at
  int backfilled = 0;
  // The caller should run a cycle by then even if nothing else happens: a time window
  // opens or closes, or a window preemption falls due. kNever: no such need.
  Time wake_at = kNever;
  // Internal errors of this cycle, for the caller's log ("job 12 on node n3: allocator:
  // ..."): such a job is not started (Reason::kInternal), never placed some other way.
  std::vector<std::string> errors;
};

}  // namespace hachi::sched
