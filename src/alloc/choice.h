// The request an allocator answers and the answer it gives, with the reasons.
// Plain values; thread-compatible.
#pragma once

#include <string>

#include "core/gpu_set.h"

namespace hachi::alloc {

class NodeModel;

// `count` GPUs on one node, which must include `required` (may be empty).
struct Request {
  int count = 0;
  GpuSet required;
};

// What made a choice, measured with the "hachi" objective whatever policy chose it, so
// two policies' answers can be compared (docs/allocator.md).
struct ScoreParts {
  // The weakest link within the set: its score and label ("NV2", "PIX"). For a single
  // GPU there is no pair: kNoPair and "-".
  static constexpr int kNoPair = 1 << 20;
  int bottleneck = kNoPair;
  std::string bottleneck_label = "-";
  int total = 0;        // sum of the link scores of all pairs within the set
  int numa_nodes = 0;   // distinct NUMA nodes spanned (unknown counts as one)
  int pcie_groups = 0;  // distinct PCIe-switch groups spanned (unknown counts as one)
  // The leftover quality vector in a printable form: for each group size m (largest
  // first), the greedy best m-sets of what stays free with their bottleneck, e.g.
  // "4: 4-7 NV12 | 2: 4,5 NV12; 6,7 NV12". Empty when nothing of size >= 2 is left.
  std::string leftover;
};

struct Choice {
  GpuSet gpus;
  ScoreParts parts;

  // One line for people: "GPUs 0-3: bottleneck NV12 (score 130), total 780, 1 NUMA
  // node, 1 PCIe group; leaves 4: 4-7 NV12 | ...".
  std::string Explain() const;
};

// Scores `chosen` (and the leftover `free - chosen`) on `model` with the hachi
// objective's measures. Direct computation, not the precomputed tables: for
// explanations and tests, not for hot paths (up to tens of ms at 16 GPUs).
ScoreParts DescribeChoice(const NodeModel& model, GpuSet free, GpuSet chosen);

}  // namespace hachi::alloc
