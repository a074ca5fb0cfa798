// The scheduler's input: a snapshot of the cluster (nodes, partitions, limits, jobs)
// owned by the caller (the server's state, or the simulator). The scheduler only reads
// it (DESIGN.md §2 sched/: snapshot in, plan out). Plain values; thread-compatible.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "alloc/node_model.h"
#include "core/gpu_set.h"
#include "core/time.h"
#include "topo/analysis.h"

namespace hachi::sched {

using JobId = int64_t;

// ---- Nodes ----

enum class NodeState : uint8_t { kUp, kDrained, kDown };

// What the shares on one GPU use: thousandths of the GPU, and promised memory; and
// whose they are. The agent runs one MPS control daemon per shared GPU, and an MPS
// server serves one Linux user at a time (a client of another uid waits until the
// first user's server has no clients), so the shares of one GPU all belong to `user`
// (JobRequest::user) until the last leaves (gpu_share.h).
struct GpuShareUse {
  int32_t milli = 0;
  // Shares of two users that were already running together (records from before the
  // rule) are kept as they are; no new share joins them until the GPU is empty.
  bool mixed = false;
  int64_t memory_mib = 0;
  std::string user;
};

// A MIG device (mig.h): one GPU instance of a GPU in MIG mode, scheduled as a
// device of its own. The layout is the one the node's agent found (Hachi never changes
// MIG layouts), in the topology's order: by GPU index, then as NVML lists them.
struct MigSlot {
  int gpu = -1;         // the parent GPU's index
  std::string profile;  // "1g.10gb", "3g.40gb", "1c.3g.40gb"
  int64_t memory_mib = 0;
  std::string uuid;  // "MIG-..."
  JobId job = 0;     // the running job holding it; 0: free
};

struct Node {
  // Constant after registration.
  std::string name;
  std::shared_ptr<const alloc::NodeModel> model;  // GPU links, for alloc/ (shared by
                                                  // nodes of one layout)
  topo::InterconnectClass interconnect = topo::InterconnectClass::kUnknown;
  std::string gpu_model;       // "NVIDIA H100 80GB HBM3"
  int64_t gpu_memory_mib = 0;  // per GPU
  int cpus = 0;
  int64_t memory_mib = 0;
  std::string block;            // network block (leaf switch) for gang placement
  std::vector<int> partitions;  // indices into ClusterState::partitions
  // (features.h): the features the config gives the node (`features =
  // ["ib", "volta32gb"]`; the automatic ones, GPU model, memory and interconnect, are
  // derived, NodeFeatures) and its GPU type as the site's gres.conf names it
  // (`gres_type = "a100-80"`; --gres=gpu:TYPE:N matches it exactly). Constant after
  // the config is applied.
  std::vector<std::string> features;
  std::string gres_type;
  // Node pools (power.h, docs/pools.md): 0 for a node that is paid for anyway (no pool,
  // a fixed pool); a burst pool's nodes 1 + the pool's rank by price. Placement takes
  // the lowest rank that fits, so work drains off rented nodes and they can be
  // powered down. ClusterState::max_cost_rank is the highest.
  int cost_rank = 0;

  // Changing state.
  NodeState state = NodeState::kUp;
  GpuSet free_gpus;  // allocatable now (excludes unhealthy and allocated GPUs)
  GpuSet unhealthy;  // drained GPUs (health); never allocated
  int free_cpus = 0;
  int64_t free_memory_mib = 0;
  int whole_node_jobs = 0;  // running jobs that own the whole node (isolation)
  int shared_jobs = 0;      // running jobs of shared-mode partitions
  // GPU shares (gpu_share.h): GPUs that hold fractional jobs. Such a GPU is not in
  // free_gpus, so whole-GPU jobs never land on it; it returns there when its last
  // share leaves. `share_use` is per GPU, empty until a GPU is first shared (cheap to
  // copy for the many nodes that never share).
  GpuSet shared_gpus;
  std::vector<GpuShareUse> share_use;
  // MIG (mig.h): the GPUs in MIG mode, never in free_gpus (never given whole), and
  // their devices (`mig_gpus` constant after registration, MigSlot::job changing).
  GpuSet mig_gpus;
  std::vector<MigSlot> mig;

  int gpu_count() const { return model ? model->gpu_count() : 0; }
};

// ---- Partitions, QoS, limits ----

enum class PartitionMode : uint8_t {
  kShared,     // per-GPU jobs (e.g. gpu-shared, 1-4 GPUs), packed onto busy nodes
  kWholeNode,  // every job gets whole nodes (e.g. gpu8); hard isolation from shared jobs
};

// What happens to a running job that is preempted (docs/scheduler.md, "Preemption"):
// the mode and grace of the *victim's* partition apply, as in Slurm.
enum class PreemptMode : uint8_t {
  kRequeue,  // signalled, then stopped after the grace and put back to pending (same
             // id and submit time); the work done so far is lost
  kCancel,   // signalled, then stopped after the grace and ended as cancelled
};

// A daily period during which a partition owns some nodes (Partition::window_nodes).
// Minutes since midnight, UTC, of the scheduler's clock: `now + ClusterState::
// clock_offset` taken as seconds since the Unix epoch (the server's clock is Unix time,
// offset 0; the simulator's time 0 is the trace start, so the offset says which UTC
// time that was). [start_minute, end_minute); end <= start crosses midnight (22:00-06:00
// runs into the next day); start == end is the whole day.
struct TimeWindow {
  int start_minute = 0;   // 0..1439
  int end_minute = 0;     // 0..1440
  std::vector<int> days;  // days of the week the window starts on, 0 = Sunday .. 6 =
                          // Saturday; empty: every day
};

struct Partition {
  std::string name;
  std::vector<int> nodes;  // indices into ClusterState::nodes
  PartitionMode mode = PartitionMode::kShared;
  int min_gpus = 1;  // per job
  int max_gpus = 0;  // per job; 0 = no limit beyond the nodes
  Duration default_time = 4 * kHour;
  Duration max_time = 7 * kDay;
  int tier = 0;                               // priority tier: higher is scheduled first
  std::vector<std::string> allowed_users;     // empty: everyone
  std::vector<std::string> allowed_accounts;  // empty: every account
  // Preemption (hachi policy): a pending job of this partition that cannot start soon
  // may stop running jobs of partitions with a lower tier.
  bool preempt_lower_tiers = false;
  // How this partition's own jobs are preempted (by a higher tier or a time window):
  // a signal, then after `grace` the job is stopped and requeued or cancelled.
  PreemptMode preempt_mode = PreemptMode::kRequeue;
  Duration grace = 5 * kMinute;
  // Time windows: during a window only this partition's jobs may start on
  // `window_nodes` (indices into ClusterState::nodes, normally among `nodes`). Outside
  // them other partitions may use those nodes, for jobs whose time limit ends by the
  // next window start; their jobs still running there get a preemption signal `grace`
  // (their partition's) before the window opens. A node should be in one partition's
  // windows at most (the first such partition owns it).
  std::vector<TimeWindow> windows;
  std::vector<int> window_nodes;
  // GPU shares: jobs of this partition may ask for a fraction of one GPU.
  bool allow_gpu_sharing = false;
  // The memory per GPU a job that asks for none gets (the server's submit,
  // ApplyDefaultMemory); 0 = the built-in default, the smallest memory per GPU of the
  // partition's nodes, so that defaults alone never over-commit a node.
  int64_t default_mem_per_gpu_mib = 0;
  // The CPUs per GPU a GPU job that asks for none gets (ApplyDefaultCpus, Slurm's
  // DefCpuPerGPU); 0 = the smallest CPUs per GPU of the partition's nodes.
  int default_cpus_per_gpu = 0;
  // Jobs without GPUs (CPUs and memory only: Snakemake rules, dask workers)
  // may run here; so may they where min_gpus is 0. They are never whole-node jobs
  // unless --exclusive, and keep clear of whole-node jobs (isolation, as shared jobs).
  bool allow_cpu_jobs = false;
  bool AcceptsCpuJobs() const { return allow_cpu_jobs || min_gpus == 0; }
};

struct Qos {
  std::string name;
  int priority = 0;  // 0..1000, scaled by the QoS weight
};

// Weights of the multifactor priority (docs/scheduler.md). A job's priority is
//   age  * min(wait / age_max, 1)
// + fairshare * 2^(-usage/share)        (usage and share normalised over accounts)
// + tier * partition.tier + qos * qos.priority/1000 + size * gpus/largest_node
// - nice                                 (--nice; a job without GPUs: size 0)
struct PriorityWeights {
  double age = 1000;
  Duration age_max = 7 * kDay;
  double fairshare = 10000;
  double tier = 100000;
  double qos = 2000;
  double size = 500;
};

struct Limits {
  std::unordered_map<std::string, int> user_gpus;     // GPUs in use, at most
  std::unordered_map<std::string, int> account_gpus;  // GPUs in use, at most
};

struct FairShare {
  std::unordered_map<std::string, double> shares;  // account -> share (any scale)
  // account -> decayed GPU-seconds used, maintained by the caller (half-life decay).
  std::unordered_map<std::string, double> usage;
};

// ---- Jobs ----

// kAfterNotOk: runs only if the job failed, timed out, was cancelled or
// lost its node; never if it completed. kSingleton: `job` is 0; waits while another
// job of the same name and user runs or is pending ahead of it (the caller decides).
enum class DependencyKind : uint8_t { kAfterOk, kAfterAny, kAfterNotOk, kSingleton };

struct Dependency {
  DependencyKind kind = DependencyKind::kAfterOk;
  JobId job = 0;
  bool operator==(const Dependency&) const = default;
};

// Slurm's --mem=0 in JobRequest::memory_mib: all of each node's memory.
inline constexpr int64_t kAllOfNodeMemory = -1;

// What a job asks for. `gpus` GPUs on one node, or a gang of `nodes` nodes with
// `gpus_per_node` each (all or nothing).
struct JobRequest {
  int gpus = 0;           // single-node jobs: GPUs on one node
  int nodes = 1;          // > 1: a gang
  int gpus_per_node = 0;  // gangs: GPUs on each node (0: = gpus / nodes)
  int cpus_per_gpu = 0;   // CPUs = cpus + cpus_per_gpu * GPUs (per node)
  int cpus = 0;
  int64_t memory_mib_per_gpu = 0;
  // Per node; kAllOfNodeMemory (--mem=0) until the server's submit resolves it
  // (ApplyDefaultMemory).
  int64_t memory_mib = 0;
  std::string gpu_model;  // empty: any; "A|B": either (eligibility.h)
  int64_t min_gpu_memory_mib = 0;
  std::string partition;  // empty: the first partition the user may use
  std::string qos;
  std::string user;
  std::string account;
  Duration time_limit = 0;  // 0: the partition's default
  bool exclusive = false;   // whole nodes, whatever the partition
  std::vector<Dependency> dependencies;
  // GPU shares (gpu_share.h): 0 = whole GPUs; 1..999 = thousandths of ONE GPU (gpus
  // must be 1), e.g. 250 for --gpu-share 0.25. `gpu_memory_mib`: the GPU memory
  // promised to a shared job (0: none promised).
  int gpu_share_milli = 0;
  int64_t gpu_memory_mib = 0;
  // Node selection (features.h): -C/--constraint, Slurm's feature
  // expression; -w/--nodelist, a host list the job's nodes must include; -x/--exclude,
  // a host list it never runs on. Empty: no such limit. As written by the user.
  std::string constraint;
  std::string nodelist;
  std::string exclude;
  // Timing: --begin, not started before this time (0: as soon as it can);
  // --deadline, never started unless start + time limit <= deadline (0: none); --nice,
  // subtracted from the priority (negative: admins only, checked by the server).
  Time begin_time = 0;
  Time deadline = 0;
  int nice = 0;
  // MIG (mig.h): `gpus` MIG devices of this profile ("1g.10gb") on one
  // node, from --gres=gpu:1g.10gb:N; empty: whole GPUs (or a share).
  std::string mig_profile;

  bool Shared() const { return gpu_share_milli > 0; }
  bool Mig() const { return !mig_profile.empty(); }
  bool operator==(const JobRequest&) const = default;

  int GpusPerNode() const {
    return nodes > 1 ? (gpus_per_node > 0 ? gpus_per_node : gpus / nodes) : gpus;
  }
  int TotalGpus() const { return nodes > 1 ? GpusPerNode() * nodes : gpus; }
};

enum class DependencyState : uint8_t {
  kNone,      // no dependency, or all satisfied
  kWaiting,   // a dependency has not finished yet
  kNeverMet,  // an after-ok dependency failed: the job can never run
};

// One node's share of a running job.
struct Allocation {
  int node = -1;
  GpuSet gpus;
  int cpus = 0;
  int64_t memory_mib = 0;
  // A GPU share: `gpus` is the one GPU; share_milli > 0 thousandths of it and
  // gpu_memory_mib of its memory (the agent's MpsEnvironment, agent/environment.h,
  // sets the limits).
  int share_milli = 0;
  int64_t gpu_memory_mib = 0;
  // MIG devices (mig.h): their UUIDs; `gpus` is then their parent GPUs, which the job
  // does not hold whole.
  std::vector<std::string> mig = {};

  // The GPUs held whole: none for a share or MIG devices (their GPUs are never counted
  // on to come back whole when the job ends).
  GpuSet WholeGpus() const { return share_milli > 0 || !mig.empty() ? GpuSet() : gpus; }
};

struct Job {
  JobId id = 0;
  JobRequest req;      // as resolved at submit: partition set, time_limit set
  int partition = -1;  // index into ClusterState::partitions
  Time submit_time = 0;
  DependencyState deps = DependencyState::kNone;  // evaluated by the caller
  JobId deps_job = 0;  // the dependency it waits on / that failed (dependencies.h)
  bool held = false;   // user/admin hold: never started while held
  // Running jobs only.
  Time start_time = 0;
  std::vector<Allocation> allocations;
  // Set by the caller when it applies a sched::Preemption of this job: the job leaves
  // by then, and is never chosen as a victim again.
  Time preempt_kill_at = kNever;

  Time EndEstimate() const { return start_time + req.time_limit; }
  // When the job leaves at the latest: its limit, or its preemption.
  Time LeaveEstimate() const {
    return preempt_kill_at < EndEstimate() ? preempt_kill_at : EndEstimate();
  }
};

// One kind of job in the recent workload, for fragmentation-aware placement
// (fragmentation.h): what such a job asks of one node, and how often it comes.
struct WorkloadClass {
  int gpus = 0;         // whole GPUs; 0 with share_milli 0: a job that uses no GPU
  int share_milli = 0;  // 1..999: a share of ONE GPU (gpus is then 1)
  int cpus = 0;         // per job, in the units of Node::cpus
  int64_t memory_mib = 0;
  std::string gpu_model;  // as JobRequest::gpu_model ('|' alternatives); empty: any
  double weight = 0;      // relative frequency, any scale (normalised over the classes)

  bool operator==(const WorkloadClass&) const = default;
};

struct ClusterState {
  std::vector<Node> nodes;
  std::vector<Partition> partitions;
  std::vector<Qos> qos;
  Limits limits;
  FairShare fairshare;
  PriorityWeights weights;
  std::vector<Job> pending;  // in any order: the scheduler orders them
  std::vector<Job> running;
  // Added to `now` to get UTC seconds since the Unix epoch, for time windows: 0 in the
  // server; in the simulator, the UTC time of the trace start (SimOptions).
  Duration clock_offset = 0;
  // The recent workload's job sizes, supplied by the caller (e.g. the shapes of the
  // last day's jobs). Empty: placement as without it. Non-empty: `hachi` places GPU
  // shares and single-node jobs where cluster fragmentation rises least
  // (fragmentation.h, docs/scheduler.md "Placement").
  std::vector<WorkloadClass> workload;
  int max_cost_rank = 0;  // the highest Node::cost_rank (0: placement as without pools)

  int PartitionIndex(const std::string& name) const;  // -1 if none
};

}  // namespace hachi::sched
