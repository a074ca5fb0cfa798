// "hachi" against the "besteffort" reference, on every (free mask, count) of the 8-GPU
// hand-built layouts and on random layouts. What must hold:
//   - hachi's bottleneck (hachi link scores) is never below besteffort's: hachi
//     maximises it over every candidate, besteffort's set is one candidate;
//   - when the two sets have equal conn (bottleneck, total, NUMA, PCIe), hachi's
//     leftover quality Q is at least besteffort's (the objective's second key).
// What need not hold, and is counted and printed rather than hidden: when hachi wins
// on conn, its leftover can be worse. docs/allocator.md quotes these counts.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdio>

#include "alloc/besteffort_policy.h"
#include "alloc/hachi_policy.h"
#include "alloc/reference_testing.h"
#include "alloc/testing.h"

namespace hachi::alloc {
namespace {

// A uniform draw from [lo, hi), whatever RapidCheck's current size: inRange scales
// with size, which would make most cases 1-3 GPU nodes.
template <typename T>
T Uniform(T lo, T hi) {
  return *rc::gen::resize(rc::kNominalSize, rc::gen::inRange<T>(lo, hi));
}

using testing::ReferenceConn;
using testing::ReferenceQuality;

// An independent "how usable is what stays free" measure: the best bottleneck a
// 4-GPU job and a 2-GPU job could still get (-1 when too few GPUs are left).
std::pair<int, int> UsableLeftover(const NodeModel& m, GpuSet left) {
  auto best = [&](int k) {
    int b = -1;
    for (const std::vector<int>& s : testing::Combinations(left.Indices(), k)) {
      b = std::max(b, std::get<0>(ReferenceConn(m, s)));
    }
    return b;
  };
  return {best(4), best(2)};
}

struct Tally {
  int decisions = 0;
  int same = 0;
  int conn_better = 0;      // hachi's set strictly better on conn
  int leftover_better = 0;  // equal conn, strictly better Q
  int tie_lex = 0;          // equal conn and Q, different set (tie-break)
  int usable_worse = 0;     // hachi's leftover worse on UsableLeftover
  int usable_better = 0;
};

// Compares the two policies on one decision; returns false (with a message) when a
// guarantee fails.
::testing::AssertionResult Compare(const NodeModel& m, GpuSet free, int count, Tally* t) {
  Result<Choice> h = HachiPolicy().Choose(m, free, {count, {}});
  Result<Choice> b = BestEffortPolicy().Choose(m, free, {count, {}});
  if (!h.ok() || !b.ok()) return ::testing::AssertionFailure() << "policy error";
  ++t->decisions;
  if (h->gpus == b->gpus) {
    ++t->same;
    return ::testing::AssertionSuccess();
  }
  const auto hc = ReferenceConn(m, h->gpus.Indices());
  const auto bc = ReferenceConn(m, b->gpus.Indices());
  const std::string where = "free " + free.ToString() + " count " +
                            std::to_string(count) + ": hachi " + h->gpus.ToString() +
                            ", besteffort " + b->gpus.ToString();
  if (std::get<0>(hc) < std::get<0>(bc)) {
    return ::testing::AssertionFailure() << "lower bottleneck; " << where;
  }
  if (hc > bc) {
    ++t->conn_better;
  } else if (hc == bc) {
    const auto hq = ReferenceQuality(m, (free - h->gpus).Indices());
    const auto bq = ReferenceQuality(m, (free - b->gpus).Indices());
    if (hq < bq) return ::testing::AssertionFailure() << "worse leftover; " << where;
    (hq > bq ? t->leftover_better : t->tie_lex)++;
  } else {
    return ::testing::AssertionFailure() << "worse conn; " << where;
  }
  const auto hu = UsableLeftover(m, free - h->gpus);
  const auto bu = UsableLeftover(m, free - b->gpus);
  if (hu < bu && t->usable_worse < 3) std::printf("[ worse    ] %s\n", where.c_str());
  if (hu < bu) ++t->usable_worse;
  if (hu > bu) ++t->usable_better;
  return ::testing::AssertionSuccess();
}

class CompareLayoutTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CompareLayoutTest, EveryFreeMaskAndCount) {
  const NodeModel m = testing::NamedModel(GetParam());
  Tally t;
  for (uint32_t f = 1; f < (1u << m.gpu_count()); ++f) {
    for (int count = 1; count <= std::popcount(f); ++count) {
      ASSERT_TRUE(Compare(m, GpuSet(f), count, &t));
    }
  }
  std::printf(
      "[ compare  ] %-10s decisions %d: same %d; differ: conn better %d, leftover "
      "better %d, tie-break %d; usable leftover (best 4-set, 2-set bottleneck) "
      "hachi worse %d, better %d\n",
      GetParam(), t.decisions, t.same, t.conn_better, t.leftover_better, t.tie_lex,
      t.usable_worse, t.usable_better);
}

INSTANTIATE_TEST_SUITE_P(Layouts, CompareLayoutTest,
                         ::testing::Values("nvswitch8", "pairs8", "pcie8", "dgx1"),
                         [](const auto& p) { return std::string(p.param); });

RC_GTEST_PROP(CompareProperties, HachiNeverLosesItsGuarantees, ()) {
  const int n = Uniform<int>(0, 2) ? Uniform<int>(5, 9) : Uniform<int>(1, 9);
  topo::Topology topo(n);
  for (int a = 0; a < n; ++a) {
    topo.mutable_gpu(a).numa_node = Uniform<int>(-1, 2);
    for (int c = a + 1; c < n; ++c) {
      topo::Link l;
      l.pcie = static_cast<topo::PciePath>(Uniform<int>(0, 6));
      if (Uniform<int>(0, 3) == 0) l.nvlinks = Uniform<int>(1, 5);
      topo.SetSymmetricLink(a, c, l);
    }
  }
  const NodeModel m = *NodeModel::Compile(topo);
  const GpuSet free(Uniform<uint32_t>(1, 1u << n));
  const int count = Uniform<int>(1, free.size() + 1);
  Tally t;
  RC_ASSERT(Compare(m, free, count, &t));
}

}  // namespace
}  // namespace hachi::alloc
