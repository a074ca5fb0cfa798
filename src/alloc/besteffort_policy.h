// BestEffortPolicy ("besteffort"): a port of NVIDIA go-gpuallocator's besteffort
// policy (gpuallocator/besteffort_policy.go), kept as the reference Hachi's own policy
// is measured against. Its algorithm, unchanged:
//
//  1. pad the free GPUs (in index order) with empty slots to a multiple of `count`;
//  2. walk every partition of them into sets of `count` (a set holds no padding or all
//     of it), keep those with a padding-free set containing `required`, and take the
//     first with the highest partition score (sum of its sets' scores);
//  3. return that partition's highest-scoring set containing `required` (first wins).
//
// A set's score is the sum of its pair scores. Pair scores follow upstream's
// P2PLinkType table, mapped from our Link (both parts add up, as upstream lists a PCIe
// and an NVLink entry per pair):
//     SYS -> P2PLinkCrossCPU 10, NODE -> P2PLinkSameCPU 20, PHB -> P2PLinkHostBridge 30,
//     PXB -> P2PLinkMultiSwitch 40, PIX -> P2PLinkSingleSwitch 50, unknown -> 0,
//     plus NV<n> -> 100 * n.
// Upstream's P2PLinkSameBoard (60, dual-GPU boards) has no counterpart in our model.
// Deviations, all at the edges: upstream scores only NV1..NV12 (NV13+ score 0 there);
// we extend 100 * n. Upstream panics on an asymmetric matrix; we take the better
// direction, as NodeModel does. Upstream can return a set with padding when every
// score ties or the padded set scores highest; we never pick a padded set in step 3.
// Invalid requests get CheckRequest's errors instead of upstream's empty list.
//
// Cost: the number of partitions, e.g. 105 for pairs of 8 GPUs, 2.6 M for quads of
// 16. Stateless; thread-safe.
#pragma once

#include "alloc/policy.h"

namespace hachi::alloc {

class BestEffortPolicy final : public Policy {
 public:
  std::string_view name() const override { return "besteffort"; }
  Result<Choice> Choose(const NodeModel& model, GpuSet free,
                        const Request& request) const override;
};

// The upstream pair score of GPUs a and b on `model` (the table above).
int BestEffortPairScore(const NodeModel& model, int a, int b);

}  // namespace hachi::alloc
