// The pieces of the "hachi" objective (docs/allocator.md), computed directly from a
// NodeModel. hachi_tables.h precomputes the same quantities for every mask; this file
// is the plain definition, used for explanations and by the tables' builders.
// Pure functions; thread-safe.
//
// Choose S ⊆ free, |S| = count, S ⊇ required, maximising lexicographically:
//  1. conn(S) = (bottleneck link score within S, total pair score within S,
//     fewer NUMA nodes spanned, fewer PCIe groups spanned);
//  2. Q(free \ S), the leftover quality: for each group size m in GroupSizes(n)
//     (largest first), greedily take the best m-subset of what is left by conn, then
//     the best m-subset of the rest, ...; compare the conn vectors lexicographically,
//     a longer vector with an equal prefix being better; big groups first;
//  3. the set whose sorted index list is lexicographically smallest (LexPrefer).
#pragma once

#include <cstdint>
#include <vector>

#include "alloc/node_model.h"

namespace hachi::alloc {

// conn(S) of one set. For a single GPU, bottleneck is ScoreParts::kNoPair: all
// singletons tie.
struct Conn {
  int bottleneck = 0;
  int total = 0;
  int numa_nodes = 0;
  int pcie_groups = 0;
  int bottleneck_a = -1;  // one pair with the bottleneck score (lowest indices)
  int bottleneck_b = -1;
};
Conn ConnOf(const NodeModel& model, uint32_t mask);

// conn as one integer: a larger value is a better set of the same size. 0 for the
// empty set.
uint64_t PackConn(const Conn& c);

// The leftover group sizes for an n-GPU node: powers of two m, 2 <= m < n, largest
// first. 8 -> {4, 2}; 16 -> {8, 4, 2}; 2 -> {}.
std::vector<int> GroupSizes(int n);

// The deterministic tie-break between two different masks of the same size: true when
// `a` holds the lowest index of a XOR b, i.e. its sorted index list is smaller.
inline bool LexPrefer(uint32_t a, uint32_t b) {
  const uint32_t d = a ^ b;
  return (a & d & (~d + 1)) != 0;
}

}  // namespace hachi::alloc
