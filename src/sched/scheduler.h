// The scheduler: a deterministic function from a cluster snapshot and `now` to a
// plan (DESIGN.md §2 sched/, §4). No I/O, no clock reads. The same code runs in the
// server and in `hachi sim`.
//
// A Scheduler object holds the policy configuration and memoised, derived data (the
// priority order of the queue, per-layout allocator tables) between cycles. The memo
// never changes the answer: Schedule(state, now) equals what a fresh Scheduler with the
// same config returns (a test checks it). Not thread-safe: one cycle at a time.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sched/cluster.h"
#include "sched/plan.h"

namespace hachi::sched {

struct SchedConfig {
  // "fifo": submit order, first fit, stop at the first job that does not fit.
  // "easy": submit order, first fit, EASY backfill (reservation depth 1).
  // "hachi": multifactor priority, topology- and fragmentation-aware placement
  //          (node and GPU set chosen together through alloc/), conservative backfill
  //          with `backfill_depth` reservations.
  std::string policy = "hachi";
  int backfill_depth = 16;         // reservations made per cycle (hachi); EASY is 1
  int backfill_max_jobs = 100000;  // pending jobs examined per cycle, at most
  // Priorities use the time rounded down to this period, so the queue order only
  // changes at period boundaries or when jobs arrive/leave (and can be memoised).
  Duration priority_period = 5 * kMinute;
  // true: the plan explains every pending job (Plan::pending) and holds every
  // reservation the depth allows. false (the simulator): the plan holds the starts and
  // only the reservations computed to decide them, and the cycle stops as soon as no
  // remaining job can start now. The starts are the same either way (a test checks).
  bool explain = true;
};

std::vector<std::string_view> PolicyNames();  // "hachi" first
// Whether `policy` orders its queue by the multifactor priority (else by submit time).
bool PolicyUsesPriority(std::string_view policy);

class Scheduler {
 public:
  // kInvalidArgument for an unknown policy or bad numbers.
  static Result<std::unique_ptr<Scheduler>> Create(const SchedConfig& config);
  virtual ~Scheduler() = default;
  virtual const SchedConfig& config() const = 0;

  // One cycle. `state.pending` may be in any order; the plan's starts never give a GPU
  // twice, never exceed a quota, never break isolation, never start part of a gang.
  virtual Plan Schedule(const ClusterState& state, Time now) = 0;
};

// Checks a request against the cluster at submit time and fills its defaults
// (partition when empty, time limit from the partition). Errors, with the reason:
// kUnsatisfiable — can never run here ("asks for 9 GPUs on one node; the largest node
// in partition gpu-shared has 8", "time limit 9d exceeds partition gpu8's maximum 7d",
// "no node of partition p has GPU model X"); kNotFound — no such partition or QoS;
// kInvalidArgument — malformed (0 GPUs, gang without gpus per node, ...);
// kPermissionDenied-like — user/account not allowed in the partition
// (kInvalidArgument, naming the partition and the allowed list).
Result<Job> ValidateRequest(const ClusterState& state, const JobRequest& req);

// The server's submit, after ValidateRequest: a job that asks for no memory
// (neither --mem nor --mem-per-gpu) gets its partition's default_mem_per_gpu_mib per
// GPU, or, when the partition names none, the smallest memory per GPU among the
// partition's nodes (node memory / its GPUs: a node full of such jobs is exactly full,
// never over-committed). A GPU share gets that times its share of the GPU. The job's
// record then carries the memory it was given, and the agent's cgroup limit and /dev/shm
// follow. Nothing changes when the job asked for memory or no node says its memory.
// The simulator does not call it: a trace's jobs keep the memory they had.
// kAllOfNodeMemory (Slurm's --mem=0) becomes the memory of the partition's smallest
// node: a whole node's where the nodes are alike.
void ApplyDefaultMemory(const ClusterState& state, Job* job);
// The same for CPUs (Slurm's DefCpuPerGPU): a GPU job that asks for none (neither -c nor
// --cpus-per-gpu) gets its partition's default_cpus_per_gpu per GPU, or the smallest
// CPUs per GPU among its nodes (node CPUs / its GPUs: an 8-GPU job has the node's CPUs,
// a node full of such jobs is exactly full). A GPU share or a MIG device gets its part
// of a GPU's worth, at least 1. The record then says what the job holds (NumCPUs, the
// node's CPUAlloc, sinfo's %C) and the agent pins it to that many CPUs, its GPUs' NUMA
// node's first. Nothing changes for a job that asked, one without GPUs (validation gave
// it 1) or where no node says its CPUs. The simulator does not call it.
void ApplyDefaultCpus(const ClusterState& state, Job* job);

}  // namespace hachi::sched
