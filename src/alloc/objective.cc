#include "alloc/objective.h"

#include <bit>

#include "alloc/choice.h"

namespace hachi::alloc {

Conn ConnOf(const NodeModel& model, uint32_t mask) {
  Conn c;
  c.bottleneck = ScoreParts::kNoPair;
  uint32_t numa_seen = 0;  // bit (numa + 1): -1 (unknown) is bit 0; ids past 30 share
  uint32_t pcie_seen = 0;
  for (uint32_t rest = mask; rest != 0; rest &= rest - 1) {
    const int a = std::countr_zero(rest);
    const int numa = model.numa(a);
    numa_seen |= 1u << (numa < 0 ? 0 : (numa + 1 > 31 ? 31 : numa + 1));
    pcie_seen |= 1u << (model.pcie_group(a) + 1);
    for (uint32_t r2 = rest & (rest - 1); r2 != 0; r2 &= r2 - 1) {
      const int b = std::countr_zero(r2);
      const int s = model.score(a, b);
      c.total += s;
      if (s < c.bottleneck) {
        c.bottleneck = s;
        c.bottleneck_a = a;
        c.bottleneck_b = b;
      }
    }
  }
  c.numa_nodes = std::popcount(numa_seen);
  c.pcie_groups = std::popcount(pcie_seen);
  return c;
}

uint64_t PackConn(const Conn& c) {
  if (c.numa_nodes == 0) return 0;  // empty set
  // Scores are <= 10 + 10*64 = 650 (NV64) and totals <= 120 pairs * 650 < 2^17;
  // kNoPair (singletons) maps to the top of the 10-bit field.
  const uint64_t b = c.bottleneck >= ScoreParts::kNoPair ? 1023 : c.bottleneck;
  return b << 27 | static_cast<uint64_t>(c.total) << 10 |
         static_cast<uint64_t>(31 - c.numa_nodes) << 5 |
         static_cast<uint64_t>(31 - c.pcie_groups);
}

std::vector<int> GroupSizes(int n) {
  std::vector<int> out;
  int m = 1;
  while (m * 2 < n) m *= 2;
  for (; m >= 2; m /= 2) out.push_back(m);
  return out;
}

}  // namespace hachi::alloc
