// RapidCheck properties of the "hachi" policy on random layouts of up to 8 GPUs
// (random symmetric link matrix, random NUMA ids) and random free masks and requests,
// checked against the brute-force reference in reference_testing.h.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "alloc/besteffort_policy.h"
#include "alloc/cache.h"
#include "alloc/hachi_policy.h"
#include "alloc/reference_testing.h"

namespace hachi::alloc {
namespace {

// A uniform draw from [lo, hi), whatever RapidCheck's current size: inRange scales
// with size, which would make most cases 1-3 GPU nodes.
template <typename T>
T Uniform(T lo, T hi) {
  return *rc::gen::resize(rc::kNominalSize, rc::gen::inRange<T>(lo, hi));
}

using testing::ReferenceChoose;

// A random layout: every pair unknown, a PCIe relation or NV1-NV4 (with or without a
// PCIe relation), NUMA ids in {-1, 0, 1, 2}.
NodeModel GenModel(int max_gpus) {
  // Half the layouts have 5 or more GPUs: they hold the interesting leftovers.
  const int n =
      Uniform<int>(0, 2) ? Uniform<int>(5, max_gpus + 1) : Uniform<int>(1, max_gpus + 1);
  topo::Topology t(n);
  for (int a = 0; a < n; ++a) {
    t.mutable_gpu(a).numa_node = Uniform<int>(-1, 3);
    for (int b = a + 1; b < n; ++b) {
      topo::Link l;
      l.pcie = static_cast<topo::PciePath>(Uniform<int>(0, 6));
      if (Uniform<int>(0, 3) == 0) l.nvlinks = Uniform<int>(1, 5);
      t.SetSymmetricLink(a, b, l);
    }
  }
  Result<NodeModel> m = NodeModel::Compile(t);
  RC_ASSERT(m.ok());
  return *m;
}

struct Input {
  GpuSet free;
  Request request;
};

// A random valid request with enough free GPUs (invalid ones are covered by tables).
Input GenInput(const NodeModel& m, bool with_required) {
  const int n = m.gpu_count();
  const uint32_t all = (1u << n) - 1;
  Input in;
  in.free = GpuSet(Uniform<uint32_t>(1, all + 1));
  in.request.count = Uniform<int>(1, in.free.size() + 1);
  if (with_required) {
    GpuSet r = GpuSet(Uniform<uint32_t>(0, all + 1)) & in.free;
    while (r.size() > in.request.count) r.Erase(r.First());
    in.request.required = r;
  }
  return in;
}

RC_GTEST_PROP(HachiProperties, ValidDeterministicAndCachedAlike, ()) {
  const NodeModel m = GenModel(8);
  const Input in = GenInput(m, *rc::gen::arbitrary<bool>());
  Result<Choice> c = HachiPolicy().Choose(m, in.free, in.request);
  RC_ASSERT(c.ok());
  RC_ASSERT(c->gpus.IsSubsetOf(in.free));
  RC_ASSERT(c->gpus.size() == in.request.count);
  RC_ASSERT(in.request.required.IsSubsetOf(c->gpus));
  RC_ASSERT(HachiPolicy().Choose(m, in.free, in.request)->gpus == c->gpus);
  AllocCache cache;
  RC_ASSERT(*cache.Pick(m, in.free, in.request) == c->gpus);  // miss
  RC_ASSERT(*cache.Pick(m, in.free, in.request) == c->gpus);  // hit
  cache.BuildTable(m);
  RC_ASSERT(*cache.Pick(m, in.free, in.request) == c->gpus);  // table
}

RC_GTEST_PROP(HachiProperties, NoSubsetBeatsTheChoice, ()) {
  const NodeModel m = GenModel(8);
  for (int k = 0; k < 4; ++k) {  // several questions per layout
    const Input in = GenInput(m, *rc::gen::arbitrary<bool>());
    Result<Choice> c = HachiPolicy().Choose(m, in.free, in.request);
    RC_ASSERT(c.ok());
    const GpuSet want =
        ReferenceChoose(m, in.free, in.request.count, in.request.required);
    RC_ASSERT(c->gpus.ToString() == want.ToString());
  }
}

RC_GTEST_PROP(HachiProperties, BusyWhenTooFewFree, ()) {
  const NodeModel m = GenModel(8);
  const int n = m.gpu_count();
  const GpuSet free(Uniform<uint32_t>(0, 1u << n));
  RC_PRE(free.size() < n);
  const int count = Uniform<int>(free.size() + 1, n + 1);
  Result<Choice> c = HachiPolicy().Choose(m, free, {count, {}});
  RC_ASSERT(!c.ok());
  RC_ASSERT(c.status().code() == StatusCode::kBusy);
  Result<Choice> b = BestEffortPolicy().Choose(m, free, {count, {}});
  RC_ASSERT(b.status().code() == StatusCode::kBusy);
}

}  // namespace
}  // namespace hachi::alloc
