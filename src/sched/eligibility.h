// Static facts about a job and a node that every phase shares: does a node's hardware
// ever suit a request (GPU model, GPU memory), is a job whole-node, what it needs per
// node. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "sched/cluster.h"

namespace hachi::sched {

// True when the job gets whole nodes: a whole-node partition, or `exclusive`. A job
// without GPUs in a whole-node partition that takes CPU jobs is not: it
// takes CPUs and memory beside the GPUs, isolated from whole-node jobs as shared jobs.
inline bool IsWholeNode(const Partition& p, const JobRequest& r) {
  return r.exclusive || (p.mode == PartitionMode::kWholeNode && r.TotalGpus() > 0);
}
inline bool IsWholeNode(const ClusterState& s, const Job& j) {
  return j.partition >= 0 && j.partition < static_cast<int>(s.partitions.size())
             ? IsWholeNode(s.partitions[j.partition], j.req)
             : j.req.exclusive;
}

// CPUs and memory the job needs on each of its nodes.
inline int NodeCpus(const JobRequest& r) {
  return r.cpus + r.cpus_per_gpu * r.GpusPerNode();
}
inline int64_t NodeMemory(const JobRequest& r) {
  return r.memory_mib + r.memory_mib_per_gpu * r.GpusPerNode();
}

// A node's GPU model suits `wanted`: empty matches all; else `wanted` is one or more
// alternatives separated by '|' ("V100M16|V100M32"), each matched as a
// case-insensitive substring ("H100" matches "NVIDIA H100 80GB HBM3").
bool GpuModelMatches(std::string_view node_model, std::string_view wanted);

// `wanted` ('|' alternatives) names the node's gres.conf GPU type
// (Node::gres_type) exactly, case-sensitive, as Slurm matches --gres=gpu:TYPE:N.
bool GresTypeMatches(std::string_view gres_type, std::string_view wanted);

// The node's GPUs suit the request: model (GpuModelMatches, or the gres.conf type,
// GresTypeMatches) and minimum GPU memory.
// Ignores counts and state.
bool NodeMatchesStatic(const Node& node, const JobRequest& r);

}  // namespace hachi::sched
