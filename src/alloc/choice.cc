#include "alloc/choice.h"

#include <bit>

#include "alloc/node_model.h"
#include "alloc/objective.h"

namespace hachi::alloc {
namespace {

std::string Plural(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// The best m-subset of `rest` by (conn, LexPrefer), by enumeration.
uint32_t BestSubset(const NodeModel& model, uint32_t rest, int m) {
  uint32_t best = 0;
  uint64_t best_key = 0;
  for (uint32_t s = rest; s != 0; s = (s - 1) & rest) {
    if (std::popcount(s) != m) continue;
    const uint64_t key = PackConn(ConnOf(model, s));
    if (best == 0 || key > best_key || (key == best_key && LexPrefer(s, best))) {
      best = s;
      best_key = key;
    }
  }
  return best;
}

}  // namespace

ScoreParts DescribeChoice(const NodeModel& model, GpuSet free, GpuSet chosen) {
  ScoreParts p;
  const uint32_t s = static_cast<uint32_t>(chosen.mask());
  const Conn c = ConnOf(model, s);
  p.bottleneck = c.bottleneck;
  if (c.bottleneck_a >= 0) {
    p.bottleneck_label = model.link(c.bottleneck_a, c.bottleneck_b).Label();
  }
  p.total = c.total;
  p.numa_nodes = c.numa_nodes;
  p.pcie_groups = c.pcie_groups;

  const uint32_t left = static_cast<uint32_t>((free - chosen).mask());
  for (int m : GroupSizes(model.gpu_count())) {
    uint32_t rest = left;
    std::string sets;
    while (std::popcount(rest) >= m) {
      const uint32_t t = BestSubset(model, rest, m);
      rest &= ~t;
      const Conn tc = ConnOf(model, t);
      if (!sets.empty()) sets += "; ";
      sets += GpuSet(t).ToString() + " " +
              model.link(tc.bottleneck_a, tc.bottleneck_b).Label();
    }
    if (sets.empty()) continue;
    if (!p.leftover.empty()) p.leftover += " | ";
    p.leftover += std::to_string(m) + ": " + sets;
  }
  return p;
}

std::string Choice::Explain() const {
  std::string out = (gpus.size() == 1 ? "GPU " : "GPUs ") + gpus.ToString() + ": ";
  if (parts.bottleneck >= ScoreParts::kNoPair) {
    out += "a single GPU";
  } else {
    out += "bottleneck " + parts.bottleneck_label + " (score " +
           std::to_string(parts.bottleneck) + "), total " + std::to_string(parts.total);
  }
  out += ", " + Plural(parts.numa_nodes, "NUMA node", "NUMA nodes") + ", " +
         Plural(parts.pcie_groups, "PCIe group", "PCIe groups");
  out +=
      parts.leftover.empty() ? "; leaves no group of 2+" : "; leaves " + parts.leftover;
  return out;
}

}  // namespace hachi::alloc
