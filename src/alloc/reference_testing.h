// A straightforward, independent implementation of the "hachi" objective for tests:
// tuples and vectors, every subset enumerated, no ranks, no tables, no bit tricks
// shared with the library. Test-only; slow on purpose (fine up to 8 GPUs).
#pragma once

#include <algorithm>
#include <climits>
#include <set>
#include <tuple>
#include <vector>

#include "alloc/node_model.h"
#include "core/gpu_set.h"
#include "topo/topology.h"

namespace hachi::alloc::testing {

// (bottleneck, total, -NUMA nodes, -PCIe groups): larger is better.
using RefConn = std::tuple<int, int, int, int>;
// Per leftover group size (largest first), the conn of each greedy set.
using RefQuality = std::vector<std::vector<RefConn>>;

inline RefConn ReferenceConn(const NodeModel& m, const std::vector<int>& s) {
  int bottleneck = INT_MAX;
  int total = 0;
  std::set<int> numa;
  std::set<int> pcie;
  for (size_t i = 0; i < s.size(); ++i) {
    numa.insert(m.numa(s[i]));
    pcie.insert(m.pcie_group(s[i]));
    for (size_t j = i + 1; j < s.size(); ++j) {
      bottleneck = std::min(bottleneck, m.score(s[i], s[j]));
      total += m.score(s[i], s[j]);
    }
  }
  return {bottleneck, total, -static_cast<int>(numa.size()),
          -static_cast<int>(pcie.size())};
}

// Every k-subset of `items` (sorted), in lexicographic order.
inline std::vector<std::vector<int>> Combinations(const std::vector<int>& items, int k) {
  std::vector<std::vector<int>> out;
  std::vector<int> cur;
  auto rec = [&](auto&& self, size_t start) -> void {
    if (static_cast<int>(cur.size()) == k) {
      out.push_back(cur);
      return;
    }
    for (size_t i = start; i < items.size(); ++i) {
      cur.push_back(items[i]);
      self(self, i + 1);
      cur.pop_back();
    }
  };
  rec(rec, 0);
  return out;
}

// Best k-subset by conn; ties: the lexicographically smallest sorted list, which is
// the first met since Combinations() is in lexicographic order.
inline std::vector<int> ReferenceBestSubset(const NodeModel& m,
                                            const std::vector<int>& items, int k) {
  std::vector<int> best;
  RefConn best_conn{};
  for (const std::vector<int>& c : Combinations(items, k)) {
    const RefConn conn = ReferenceConn(m, c);
    if (best.empty() || conn > best_conn) {
      best = c;
      best_conn = conn;
    }
  }
  return best;
}

inline RefQuality ReferenceQuality(const NodeModel& m, const std::vector<int>& left) {
  RefQuality q;
  std::vector<int> sizes;  // powers of two 2 <= size < n, largest first
  for (int size = 2; size < m.gpu_count(); size *= 2) sizes.insert(sizes.begin(), size);
  for (int size : sizes) {
    std::vector<RefConn> v;
    std::vector<int> rest = left;
    while (static_cast<int>(rest.size()) >= size) {
      std::vector<int> t = ReferenceBestSubset(m, rest, size);
      v.push_back(ReferenceConn(m, t));
      std::vector<int> next;
      std::set_difference(rest.begin(), rest.end(), t.begin(), t.end(),
                          std::back_inserter(next));
      rest = next;
    }
    q.push_back(v);
  }
  return q;
}

// The objective's argmax over every S ⊆ free, |S| = count, S ⊇ required.
// Precondition: a valid request with enough free GPUs.
inline GpuSet ReferenceChoose(const NodeModel& m, GpuSet free, int count,
                              GpuSet required) {
  std::vector<int> best;
  RefConn best_conn{};
  RefQuality best_q;
  for (const std::vector<int>& s : Combinations(free.Indices(), count)) {
    if (!required.IsSubsetOf(GpuSet::FromIndices(s))) continue;
    const RefConn conn = ReferenceConn(m, s);
    const RefQuality q = ReferenceQuality(m, (free - GpuSet::FromIndices(s)).Indices());
    // Combinations() is lexicographic, so strict > keeps the smallest list on ties.
    if (best.empty() || std::tie(conn, q) > std::tie(best_conn, best_q)) {
      best = s;
      best_conn = conn;
      best_q = q;
    }
  }
  return GpuSet::FromIndices(best);
}

}  // namespace hachi::alloc::testing
