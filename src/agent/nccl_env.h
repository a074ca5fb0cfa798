// NCCL's environment for the GPUs a job was granted ("NCCL_* environment for the
// GPUs granted"). On an 8-GPU server with a NIC per GPU pair (rail-optimised HGX boxes),
// a job on GPUs 0-1 should talk through the NICs beside those GPUs, not through the ones
// beside GPUs 6-7 that another job's traffic uses; NCCL left to itself takes every HCA it
// finds. So the agent names them: NCCL_IB_HCA="=mlx5_0,mlx5_1" (exact names), the NICs on
// the closest PCIe path to each granted GPU (PIX before PXB before PHB before NODE; a NIC
// across the CPU interconnect (SYS) is never "near").
//
// The NICs come from the node's topology (`nvidia-smi topo -m` or a topology file; NVML
// does not list NICs, so an agent that discovered its GPUs through NVML sets nothing).
// A variable the job set itself is left alone.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "agent/environment.h"
#include "core/gpu_set.h"
#include "topo/topology.h"

namespace hachi::agent {

// By GPU index: the device names ("mlx5_0") of the NICs nearest that GPU; empty when the
// topology lists no NIC within the GPU's NUMA node.
std::vector<std::vector<std::string>> NearestNics(const topo::Topology& node);

// Adds NCCL_IB_HCA for `gpus` (the union of their nearest NICs, GPU by GPU) unless
// `env` has it already or no granted GPU has a near NIC.
void AddNcclEnvironment(const std::vector<std::vector<std::string>>& nearest_nics,
                        const GpuSet& gpus, EnvList* env);

}  // namespace hachi::agent
