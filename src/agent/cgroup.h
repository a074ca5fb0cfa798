// Per-job cgroups (docs/isolation.md): each job runs in a cgroup of its own with
// its memory limit, CPU set, pids limit and GPU device filter, and every process in it is
// killed when the job ends, however it forked or setsid()ed.
//
// CgroupDriver is the interface ProcessLauncher drives. Two implementations live in
// cgroup.cc: v1 (a directory per controller hierarchy: memory, cpuset, pids, devices,
// freezer) and v2 (one directory in the unified hierarchy; devices through a
// BPF_PROG_TYPE_CGROUP_DEVICE program, cgroup_v2_devices.cc). OpenCgroups detects which
// one this machine has. Every file access goes through CgroupFs, so that tests can run
// the limit code paths against a temporary directory tree where the controllers are
// absent (cgroup_test.cc).
//
// Thread-safety: a driver is constant after OpenCgroups; its methods may be called from
// any thread, for different jobs at once. CgroupFs implementations must be thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hachi::agent {

enum class CgroupMode : uint8_t { kNone, kV1, kV2 };
std::string_view CgroupModeName(CgroupMode m);  // "none", "v1", "v2"

// The file operations of a driver. The default implementation is the real file system;
// a test overrides RemoveDir (a plain directory with files in it cannot be rmdir'ed, a
// cgroup can).
class CgroupFs {
 public:
  virtual ~CgroupFs() = default;
  virtual Status MakeDir(const std::string& path);    // EEXIST is fine
  virtual Status RemoveDir(const std::string& path);  // ENOENT is fine
  // Writes `text` in one write() (cgroup files take one value per write).
  virtual Status Write(const std::string& path, const std::string& text);
  virtual Result<std::string> Read(const std::string& path);
  virtual bool Exists(const std::string& path);
};
CgroupFs* RealCgroupFs();  // a process-wide instance

// What a job's cgroup enforces. Zero / empty fields are not limited.
struct CgroupLimits {
  int64_t memory_bytes = 0;
  std::string cpus;  // cpulist, e.g. "0-3,8"; "" = the parent's
  std::string mems;  // NUMA nodes for cpuset.mems; "" = the parent's
  int64_t pids_max = 0;
  // GPU devices: when set, the job may open the NVIDIA device nodes (major 195) of
  // `gpu_minors`, nvidia-modeset (254) and nvidiactl (255), and no other 195:* node.
  // Other devices (nvidia-uvm's dynamic major, /dev/null, InfiniBand's uverbs) stay
  // open: jobs need RDMA, and the only thing one job must not reach is another's GPU.
  bool restrict_gpus = false;
  std::vector<unsigned> gpu_minors;
  // MIG devices (topo/mig_caps.h): when caps_major >= 0, the job may open
  // the /dev/nvidia-caps devices (that major) of `cap_minors` only. v1 cannot deny a
  // major and re-allow minors, so it denies each of `cap_others` (every other minor
  // the driver lists in mig-minors); v2's program denies the whole major but these.
  int caps_major = -1;
  std::vector<unsigned> cap_minors;
  std::vector<unsigned> cap_others;
};

// A job's cgroup once created: its directory in each hierarchy used.
struct JobCgroup {
  std::string name;               // "job-12"
  std::vector<std::string> dirs;  // v1: one per controller; v2: one
  // The cgroup.procs files a process writes "0" to in order to join (the launcher's
  // child does that before exec, spawn.cc).
  std::vector<std::string> procs_files;
};

struct CgroupOptions {
  std::string mode = "auto";     // "auto", "v1", "v2", "none"
  std::string parent = "hachi";  // the directory holding the jobs' cgroups
  // Where the hierarchies are mounted: found in /proc/self/mountinfo when empty. Tests
  // name a temporary tree: v1 then uses <root>/<controller>, v2 <root>.
  std::string root;
  std::string mountinfo = "/proc/self/mountinfo";
  std::string self_cgroup = "/proc/self/cgroup";  // v1 nests under the agent's own cgroup
  CgroupFs* fs = nullptr;                         // RealCgroupFs() when null
};

class CgroupDriver {
 public:
  virtual ~CgroupDriver() = default;
  virtual CgroupMode mode() const = 0;
  // For the agent's log: "v1 (memory cpuset pids devices freezer) at
  // /sys/fs/cgroup/*/hachi".
  virtual std::string Describe() const = 0;
  // Whether jobs' cgroups enforce `controller` ("memory", "cpuset", "pids", "devices").
  virtual bool Enforces(std::string_view controller) const = 0;
  // Makes the job's cgroup and writes its limits. A limit whose controller this machine
  // lacks is skipped (Describe names what is missing); any other failure removes what
  // was made and is returned.
  virtual Result<JobCgroup> Create(const std::string& name,
                                   const CgroupLimits& limits) = 0;
  // The processes in it now.
  virtual std::vector<pid_t> Pids(const JobCgroup& cg) const = 0;
  // How many processes the kernel's OOM killer killed in it (its memory limit).
  virtual int OomKills(const JobCgroup& cg) const = 0;
  // Kills every process in it and waits (up to about 5 s) until none is left, then
  // removes its directories. Idempotent.
  virtual Status Destroy(const JobCgroup& cg) = 0;
  // Job cgroups left under the parent (an earlier agent's), as Create would name them.
  virtual std::vector<JobCgroup> Leftovers() const = 0;
  // The directories holding the jobs' cgroups (made by OpenCgroups; kept, empty, while
  // no job runs).
  virtual std::vector<std::string> ParentDirs() const = 0;
};

// The driver for options.mode: "none" gives a null driver; "auto" takes v2 when cgroup2
// is mounted at the hierarchy root alone (a v2-only machine), else v1 when its
// controllers are mounted (v1 or hybrid: the v1 controllers are where the limits are),
// and fails when there is neither or the agent is not root. The parent directories are
// made here. The caller logs a failure and runs jobs without cgroups.
Result<std::unique_ptr<CgroupDriver>> OpenCgroups(const CgroupOptions& options);

// Internal to agent/, in cgroup_v2_devices.cc: attaches to the cgroup2 directory
// `cgroup_fd` a BPF_PROG_TYPE_CGROUP_DEVICE program that denies character devices
// 195:0-253 other than `allowed_minors`, and when `caps_major` >= 0 every device of
// that major but `cap_minors` (MIG's /dev/nvidia-caps), and allows everything else.
Status AttachGpuDeviceFilter(int cgroup_fd, const std::vector<unsigned>& allowed_minors,
                             int caps_major = -1,
                             const std::vector<unsigned>& cap_minors = {});

// The CPUs a job of `want` CPUs gets: first the free CPUs of `preferred` (its GPUs' NUMA
// nodes), then free CPUs elsewhere, then (all CPUs busy) CPUs of `preferred` shared with
// other jobs, then any. Ascending; all of `all` when want <= 0 or want >= all.size().
std::vector<int> ChooseCpus(int want, const std::vector<int>& all,
                            const std::vector<int>& preferred, const std::set<int>& busy);

}  // namespace hachi::agent
