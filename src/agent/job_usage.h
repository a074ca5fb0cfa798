// A job's CPU time and memory on this node, from its cgroup: what the agent
// adds to its GPUs' figures in each sample. cgroup v2: cpu.stat's usage_usec,
// memory.current and memory.peak (Linux 5.19+); v1: the memory controller's
// memory.usage_in_bytes and memory.max_usage_in_bytes, and the CPU time of the
// processes in the cgroup now (/proc/PID/stat's utime + stime + cutime + cstime: v1's
// hierarchy has no cpuacct here, so the time of children that exited unwaited is not
// counted). A job without a cgroup has no figures (-1).
//
// Free functions on files; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "state/usage.h"

namespace hachi::agent {

struct CgroupUse {
  int64_t cpu_usec = -1;
  int64_t mem_mib = -1;
  int64_t mem_peak_mib = -1;
};

// From the job's cgroup.procs files (agent::StepContext::cgroup_procs: one per
// hierarchy, their directories are the job's cgroup); `proc_root` for v1's processes.
CgroupUse ReadCgroupUse(const std::vector<std::string>& procs_files,
                        const std::string& proc_root = "/proc");

// The job's sample: `gpus`' figures from the node's (GpuSampler::Sample, any order) and
// the cgroup's.
state::JobUsageSample JobSample(sched::JobId job, Time start_time, Time at,
                                const std::vector<int>& gpus,
                                const std::vector<state::GpuSample>& node_gpus,
                                const CgroupUse& cgroup);

}  // namespace hachi::agent
