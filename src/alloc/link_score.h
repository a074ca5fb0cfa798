// Link scores: one integer per GPU pair saying how well the two GPUs talk, higher is
// better. The allocator's objective (docs/allocator.md) compares sets of GPUs by these
// numbers only, so the scale is the contract:
//
//   unknown 0, SYS 1, NODE 2, PHB 3, PXB 4, PIX 5, NV<n> = 10 + 10*n
//
// Every NVLink pair beats every PCIe-only pair (NV1 = 20 > PIX = 5), and more bonded
// links beat fewer (NV18 = 190 > NV12 = 130). When a pair is NVLinked its PCIe relation
// is ignored: `nvidia-smi topo -m` hides it anyway. Pure functions; thread-safe.
#pragma once

#include "topo/topology.h"

namespace hachi::alloc {

inline constexpr int kUnknownLinkScore = 0;

// The score of one direction of a link (see the table above).
int LinkScore(const topo::Link& link);

}  // namespace hachi::alloc
