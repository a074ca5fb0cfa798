// Who runs on the node's GPUs ("users who pin GPU ids by hand"): NVML lists the
// compute processes on each GPU (GpuHealthMonitor's on_processes); DescribeGpuProcesses
// finds out, from /proc, which Hachi job each belongs to, its owner and its command line,
// so that the server can report the ones no job was given that GPU for. A process that
// a user started by hand on a GPU silently takes memory and compute from the job the
// scheduler placed there, and fragments the node.
//
// Free functions; they only read files under the given /proc root.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "agent/gpu_health.h"
#include "api/protocol.h"

namespace hachi::agent {

// The Hachi job of process `pid`: the job cgroup it is in ("<cgroup_parent>/job-<N>" in
// any hierarchy of /proc/PID/cgroup, agent/cgroup.h), else the HACHI_JOB_ID in its
// environment (jobs without cgroups; every job process inherits it), else 0. A process
// that cleared its environment and has no cgroup cannot be told apart from a stray one.
state::JobId JobOfProcess(unsigned pid, const std::string& proc_root = "/proc",
                          const std::string& cgroup_parent = "hachi");

// The reports for NVML's list: job, owner and command of each process. Processes that
// exited meanwhile (no /proc entry) are left out.
std::vector<api::GpuProcessReport> DescribeGpuProcesses(
    const std::vector<GpuProcess>& processes, const std::string& proc_root = "/proc",
    const std::string& cgroup_parent = "hachi");

// The GPU memory soft limit (docs/isolation.md "GPU shares"): a GPU share
// that no MPS server limits, and its GPU and the memory it was promised (--gpu-mem).
struct ShareMemoryLimit {
  int gpu = -1;
  int64_t promised_mib = 0;
};

// The shares of `limits` whose processes on their GPU (in NVML's `processes`, with
// their jobs found) use more than they were promised together, ascending by job, each
// with why: "used 23.1 GiB of GPU memory on GPU 2, promised 20 GiB (--gpu-mem)".
// Processes whose memory NVML does not say are not counted.
std::vector<std::pair<state::JobId, std::string>> OverSoftLimit(
    const std::vector<api::GpuProcessReport>& processes,
    const std::map<state::JobId, ShareMemoryLimit>& limits);

// "23.1 GiB"; whole numbers without a fraction ("20 GiB").
std::string FormatGib(int64_t mib);

}  // namespace hachi::agent
