// What ProcessLauncher does for a job beyond fork and exec (docs/isolation.md):
// its cgroup (memory limit, CPU set from its GPUs' NUMA nodes, pids limit, GPU device
// filter), its rlimits (memlock unlimited, many open files) and a private /dev/shm of
// its shm size; at its end, whether the OOM killer hit it, and the kill of everything
// left in its cgroup.
//
// Thread-safety: all methods may be called from any thread; the CPU bookings are
// guarded by an internal mutex. The driver is constant after construction.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/cgroup.h"
#include "agent/spawn.h"
#include "api/launch_spec.h"
#include "core/mutex.h"

namespace hachi::agent {

// One GPU of this node as isolation needs it (from the node's topology).
struct GpuPlacement {
  unsigned minor = 0;     // of /dev/nvidia<minor>; the GPU's index unless known
  std::vector<int> cpus;  // the CPUs of its NUMA node; empty when unknown
};

struct IsolationOptions {
  std::shared_ptr<CgroupDriver> cgroups;  // null: no cgroups (not root, none mounted)
  std::vector<GpuPlacement> gpus;         // by GPU index; missing: minor = index
  std::vector<int> node_cpus;             // empty: the CPUs the agent may run on
  int64_t pids_per_gpu = 4096;  // pids.max at most this x max(1, the job's GPUs)
  // The node's pids kept for the agent and the system: the pids.max of all
  // running jobs together never pass min(kernel.pid_max, kernel.threads-max) minus this.
  // -1: the larger of 4096 and a tenth of that minimum (NodePidsBudget).
  int64_t pids_reserve = -1;
  // The kernel's limits, for tests: 0 = read /proc/sys/kernel/{pid_max,threads-max}.
  int64_t pid_max = 0, threads_max = 0;
  // As root: each job in its own mount namespace with a tmpfs /dev/shm of its shm size.
  bool private_shm = true;
  rlim_t max_open_files = 1 << 20;  // RLIMIT_NOFILE, capped at fs.nr_open
  // Where /proc/driver/nvidia-caps/mig-minors and /proc/devices are read
  // for jobs on MIG devices ("/" on a node; tests give a fake tree).
  std::string mig_caps_root = "/";
};

// A job's part: its cgroup and CPUs (empty when it has none).
struct JobIsolation {
  state::JobId job = 0;
  std::optional<JobCgroup> cgroup;
  std::vector<int> cpus;  // booked for it
  int64_t memory_mib = 0;
};

class Isolation {
 public:
  explicit Isolation(IsolationOptions options);

  CgroupMode mode() const;
  // For the agent's log: the driver's description, or "none (why)".
  std::string Describe(const std::string& why_none) const;

  // Makes the job's cgroup (when there is a driver) and fills `setup` for its child.
  // Errors: the cgroup could not be made; the job is then not started.
  Result<JobIsolation> Prepare(const api::LaunchSpec& spec, SpawnRequest::Setup* setup)
      EXCLUDES(mu_);
  // The job's main process has ended: kills what is left in its cgroup and removes it,
  // frees its CPUs. Returns "out of memory: the job used more than its 2048 MiB" when
  // the OOM killer killed a process of it, else "".
  std::string Finish(JobIsolation& job) EXCLUDES(mu_);
  // Job cgroups an earlier agent left: those of `keep` (runs adopted) are returned to be
  // watched, the others are killed and removed ("cgroup job-12 (3 processes)" in
  // `stopped`).
  std::vector<JobIsolation> TakeOverLeftovers(const std::set<state::JobId>& keep,
                                              std::vector<std::string>* stopped)
      EXCLUDES(mu_);

  // Removes the directories holding the jobs' cgroups when no job cgroup is left in
  // them (the launcher's end), so agents that come and go leave nothing behind.
  void RemoveParentsIfEmpty();

  // The /dev/nvidia-caps rules of a job on MIG devices (spec.mig): the two
  // access devices of each of its devices allowed, every other one the driver lists
  // denied (topo/mig_caps.h, read under `caps_root`; the GPU minor is the placement's,
  // else the GPU index). An error naming the file or the missing entry when they
  // cannot be read: the job is then not started rather than run unisolated.
  static Status MigDeviceLimits(const api::LaunchSpec& spec,
                                const std::vector<GpuPlacement>& gpus,
                                const std::string& caps_root, CgroupLimits* limits);

  // The size of a job's /dev/shm: its --shm-size, else half its memory, at most 64 GiB
  // (a tmpfs only caps; its pages count against the job's memory limit).
  // Never more than the job's memory (a tmpfs's pages count against it anyway; a
  // bigger one only invites a job to run its cgroup out of memory through /dev/shm).
  static int64_t ShmMib(const api::LaunchSpec& spec);

  // What all jobs' pids.max may add up to on this node: min(pid_max, threads_max) minus
  // the reserve (-1: max(4096, a tenth of that minimum)), at least 0.
  static int64_t NodePidsBudget(int64_t pid_max, int64_t threads_max, int64_t reserve);
  // What a job holds of its node, which its share of the pids budget follows.
  struct PidsClaim {
    double gpus = 0;    // its GPUs (a GPU share: the fraction of one)
    int node_gpus = 0;  // the node's
    int cpus = 0;       // its CPUs (0: none asked, it may use all of them)
    int node_cpus = 0;  // the node's
  };
  // The pids.max a job gets: its share of the budget in proportion to what it holds —
  // its GPUs among the node's, or for a job without GPUs its CPUs among the node's — at
  // most pids_per_gpu x max(1, its GPUs). The scheduler never books more GPUs than a
  // node has, so the GPU jobs that run together fit in the budget and none fails to
  // start for want of pids (each taking 4096 of the 28,672 a pid_max of 32,768 leaves,
  // the eighth 1-GPU job did). What the running jobs hold is still summed (runs adopted
  // after an agent restart keep the pids.max their cgroups were given): kUnavailable
  // when less than kMinJobPids is left.
  static constexpr int64_t kMinJobPids = 64;
  static Result<int64_t> JobPidsMax(int64_t per_gpu, const PidsClaim& claim,
                                    int64_t budget, int64_t booked);
  // The budget this isolation enforces and what running jobs hold of it now.
  int64_t pids_budget() const { return pids_budget_; }
  int64_t pids_booked() const EXCLUDES(mu_);

 private:
  std::vector<int> BookCpus(const api::LaunchSpec& spec) EXCLUDES(mu_);

  const IsolationOptions options_;
  const std::vector<int> node_cpus_;
  const rlim_t nofile_;        // RLIMIT_NOFILE to give, as root
  const int64_t pids_budget_;  // NodePidsBudget of the options

  mutable Mutex mu_;
  std::map<state::JobId, std::vector<int>> booked_ GUARDED_BY(mu_);  // running jobs' CPUs
  std::map<state::JobId, int64_t> pids_ GUARDED_BY(mu_);  // running jobs' pids.max
};

}  // namespace hachi::agent
