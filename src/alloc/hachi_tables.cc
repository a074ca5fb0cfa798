#include "alloc/hachi_tables.h"

#include <algorithm>
#include <bit>
#include <numeric>
#include <unordered_map>

#include "alloc/choice.h"
#include "alloc/objective.h"
#include "core/mutex.h"

namespace hachi::alloc {
namespace {

// Replaces every value by its rank among the distinct values (0 = smallest).
std::vector<uint32_t> RankCompress(const std::vector<uint64_t>& values) {
  std::vector<uint64_t> distinct = values;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  std::vector<uint32_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    out[i] = static_cast<uint32_t>(
        std::lower_bound(distinct.begin(), distinct.end(), values[i]) - distinct.begin());
  }
  return out;
}

}  // namespace

bool HachiTables::Better(uint32_t a, uint32_t b) const {
  if (conn_rank_[a] != conn_rank_[b]) return conn_rank_[a] > conn_rank_[b];
  return LexPrefer(a, b);
}

std::shared_ptr<const HachiTables> HachiTables::Build(const NodeModel& model) {
  auto t = std::make_shared<HachiTables>();
  const int n = model.gpu_count();
  const uint32_t masks = 1u << n;
  t->n_ = n;
  t->key_ = model.key();
  t->sizes_ = GroupSizes(n);

  // conn for every mask, by DP on the lowest GPU: S = {i} ∪ R.
  std::vector<int> bottleneck(masks), total(masks);
  std::vector<uint32_t> numa_bits(masks), pcie_bits(masks);
  std::vector<uint64_t> packed(masks, 0);
  for (uint32_t s = 1; s < masks; ++s) {
    const int i = std::countr_zero(s);
    const uint32_t r = s & (s - 1);
    int b = r ? bottleneck[r] : ScoreParts::kNoPair;
    int sum = total[r];
    for (uint32_t x = r; x != 0; x &= x - 1) {
      const int sc = model.score(i, std::countr_zero(x));
      sum += sc;
      b = std::min(b, sc);
    }
    bottleneck[s] = b;
    total[s] = sum;
    const int numa = model.numa(i);
    numa_bits[s] = numa_bits[r] | 1u << (numa < 0 ? 0 : std::min(numa + 1, 31));
    pcie_bits[s] = pcie_bits[r] | 1u << (model.pcie_group(i) + 1);
    Conn c;
    c.bottleneck = b;
    c.total = sum;
    c.numa_nodes = std::popcount(numa_bits[s]);
    c.pcie_groups = std::popcount(pcie_bits[s]);
    packed[s] = PackConn(c);
  }
  t->conn_rank_ = RankCompress(packed);

  // best_m[L] = L if |L| == m, else the best of best_m[L \ {i}]; L \ {i} < L, so a
  // single increasing pass sees every smaller mask first.
  for (int m : t->sizes_) {
    std::vector<uint16_t> best(masks, 0);
    for (uint32_t l = 1; l < masks; ++l) {
      const int pc = std::popcount(l);
      if (pc < m) continue;
      if (pc == m) {
        best[l] = static_cast<uint16_t>(l);
        continue;
      }
      uint32_t top = 0;
      for (uint32_t x = l; x != 0; x &= x - 1) {
        const uint32_t cand = best[l & ~(x & (~x + 1))];
        if (top == 0 || t->Better(cand, top)) top = cand;
      }
      best[l] = static_cast<uint16_t>(top);
    }
    t->best_.push_back(std::move(best));
  }

  // Q: each mask's greedy vectors, every m-group padded with 0 to n/m slots so that a
  // longer vector with an equal prefix compares higher (entries are rank + 1 >= 1).
  size_t width = 0;
  for (int m : t->sizes_) width += static_cast<size_t>(n / m);
  std::vector<uint32_t> rows(static_cast<size_t>(masks) * width, 0);
  for (uint32_t l = 0; l < masks; ++l) {
    uint32_t* row = rows.data() + static_cast<size_t>(l) * width;
    size_t off = 0;
    for (size_t k = 0; k < t->sizes_.size(); ++k) {
      const int m = t->sizes_[k];
      uint32_t rest = l;
      int slot = 0;
      while (std::popcount(rest) >= m) {
        const uint32_t pick = t->best_[k][rest];
        row[off + slot++] = t->conn_rank_[pick] + 1;
        rest &= ~pick;
      }
      off += static_cast<size_t>(n / m);
    }
  }
  std::vector<uint32_t> order(masks);
  std::iota(order.begin(), order.end(), 0u);
  auto row_of = [&](uint32_t l) { return rows.data() + static_cast<size_t>(l) * width; };
  auto row_less = [&](uint32_t a, uint32_t b) {
    return std::lexicographical_compare(row_of(a), row_of(a) + width, row_of(b),
                                        row_of(b) + width);
  };
  std::sort(order.begin(), order.end(), row_less);
  t->q_rank_.assign(masks, 0);
  uint32_t rank = 0;
  for (uint32_t k = 0; k < masks; ++k) {
    if (k > 0 && row_less(order[k - 1], order[k])) ++rank;
    t->q_rank_[order[k]] = rank;
  }
  return t;
}

std::vector<std::vector<uint32_t>> HachiTables::LeftoverPartition(uint32_t mask) const {
  std::vector<std::vector<uint32_t>> out;
  for (size_t k = 0; k < sizes_.size(); ++k) {
    std::vector<uint32_t> sets;
    uint32_t rest = mask;
    while (std::popcount(rest) >= sizes_[k]) {
      sets.push_back(best_[k][rest]);
      rest &= ~static_cast<uint32_t>(best_[k][rest]);
    }
    out.push_back(std::move(sets));
  }
  return out;
}

uint32_t HachiTables::Decide(uint32_t free, int count, uint32_t required) const {
  const uint32_t optional = free & ~required;
  const int need = count - std::popcount(required);
  uint32_t best = 0;
  uint64_t best_key = 0;
  // Every submask of `optional` (including the empty one) of the right size.
  for (uint32_t t = optional;; t = (t - 1) & optional) {
    if (std::popcount(t) == need) {
      const uint32_t s = t | required;
      const uint64_t key = static_cast<uint64_t>(conn_rank_[s]) << 32 | q_rank_[free ^ s];
      if (best == 0 || key > best_key || (key == best_key && LexPrefer(s, best))) {
        best = s;
        best_key = key;
      }
    }
    if (t == 0) break;
  }
  return best;
}

std::vector<uint16_t> HachiTables::DecisionTable() const {
  const uint32_t masks = 1u << n_;
  const size_t stride = static_cast<size_t>(n_) + 1;
  std::vector<uint16_t> table(masks * stride, 0);
  std::vector<uint64_t> best_key(stride);
  for (uint32_t f = 1; f < masks; ++f) {
    uint16_t* best = table.data() + f * stride;
    std::fill(best_key.begin(), best_key.end(), 0);
    for (uint32_t s = f; s != 0; s = (s - 1) & f) {
      const int c = std::popcount(s);
      const uint64_t key = static_cast<uint64_t>(conn_rank_[s]) << 32 | q_rank_[f ^ s];
      // Submasks come in decreasing numeric order, so on a key tie the later one
      // (numerically smaller) is not necessarily lexicographically smaller: test it.
      if (best[c] == 0 || key > best_key[c] ||
          (key == best_key[c] && LexPrefer(s, best[c]))) {
        best[c] = static_cast<uint16_t>(s);
        best_key[c] = key;
      }
    }
  }
  return table;
}

std::shared_ptr<const HachiTables> SharedHachiTables(const NodeModel& model) {
  struct Memo {
    Mutex mu;
    std::unordered_map<uint64_t, std::shared_ptr<const HachiTables>> by_key
        GUARDED_BY(mu);
  };
  static auto* memo = new Memo();
  {
    MutexLock lock(&memo->mu);
    auto it = memo->by_key.find(model.key());
    if (it != memo->by_key.end()) return it->second;
  }
  // Built outside the lock: a 16-GPU build takes tens of ms and must not stall
  // lookups for other layouts. Two racing builders make equal tables; one is kept.
  std::shared_ptr<const HachiTables> built = HachiTables::Build(model);
  MutexLock lock(&memo->mu);
  if (memo->by_key.size() >= 64) memo->by_key.clear();
  return memo->by_key.emplace(model.key(), built).first->second;
}

}  // namespace hachi::alloc
