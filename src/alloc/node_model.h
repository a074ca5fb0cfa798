// NodeModel: what the allocator needs to know about one node, compiled once from a
// topo::Topology: the GPU count, a symmetric pairwise link-score matrix (link_score.h),
// the NUMA node and PCIe-switch group of every GPU, and a `key` that hashes exactly
// what a "hachi" decision depends on.
//
// Two nodes with the same layout get the same key, so they share precomputed tables
// and cached decisions (cache.h). A NodeModel is an immutable value once compiled:
// copyable and safe to read from many threads.
#pragma once

#include <array>
#include <cstdint>

#include "core/gpu_set.h"
#include "core/status.h"
#include "topo/topology.h"

namespace hachi::alloc {

class NodeModel {
 public:
  // The allocator is exact (it enumerates subsets), so nodes are capped at 16 GPUs.
  static constexpr int kMaxGpus = 16;

  // Compiles `t`. Fails with kInvalidArgument for more than 16 (or zero) GPUs.
  // An asymmetric link matrix is read as the better of the two directions.
  static Result<NodeModel> Compile(const topo::Topology& t);

  int gpu_count() const { return n_; }
  GpuSet all_gpus() const { return GpuSet::FirstN(n_); }

  // Link score of the pair (a, b), a != b; symmetric. 0 on the diagonal.
  int score(int a, int b) const { return score_[a * kMaxGpus + b]; }
  // The link behind score(a, b): the better direction of the pair as read.
  const topo::Link& link(int a, int b) const { return link_[a * kMaxGpus + b]; }
  // NUMA node of GPU i as read (-1 when unknown).
  int numa(int i) const { return numa_[i]; }
  // PCIe-switch group of GPU i: connected components of the PIX/PXB relation, numbered
  // 0, 1, ... by their lowest GPU; -1 when the GPU's PCIe relations are not all known
  // (e.g. NVLinked pairs read from `nvidia-smi topo -m`, which hides them).
  int pcie_group(int i) const { return pcie_group_[i]; }

  // Hash of (n, score matrix, NUMA partition, PCIe groups): the cache key. NUMA ids
  // are relabelled by first appearance first, since only the grouping matters.
  uint64_t key() const { return key_; }

 private:
  int n_ = 0;
  std::array<int16_t, kMaxGpus * kMaxGpus> score_{};
  std::array<topo::Link, kMaxGpus * kMaxGpus> link_{};
  std::array<int, kMaxGpus> numa_{};
  std::array<int, kMaxGpus> pcie_group_{};
  uint64_t key_ = 0;
};

}  // namespace hachi::alloc
