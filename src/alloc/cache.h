// AllocCache: remembers the "hachi" policy's decisions, keyed by (layout key, free
// mask, count), so a scheduler asking the same question of many identical nodes (or
// the same node cycle after cycle) pays for a hash lookup, not a search.
//
// Two modes per layout, which can be mixed across layouts:
//  - lazy (default): the first Pick for a (free, count) computes it with the layout's
//    shared tables (hachi_tables.h; built on first use) and stores the answer;
//  - BuildTable(model): every (free mask, count) is precomputed in one pass (3^n
//    steps: milliseconds for 8 GPUs, about 0.2 s for 16), after which every Pick is an
//    array lookup.
// Requests with a non-empty `required` are computed directly from the tables and are
// not cached: they are rare (`--require`, re-placement) and would multiply the keys.
//
// Answers are exactly HachiPolicy's: a cached decision equals a direct one.
//
// Thread-safety: every method may be called from many threads at once. One mutex
// guards the maps; searches and table builds run outside it. Memory grows with the
// number of layouts seen (at most 2.2 MB per 16-GPU layout with a full table, a lazy
// map bounded by the same number of entries); Clear() drops everything.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "alloc/choice.h"
#include "alloc/node_model.h"
#include "core/mutex.h"
#include "core/status.h"

namespace hachi::alloc {

class AllocCache {
 public:
  AllocCache();
  ~AllocCache();
  AllocCache(const AllocCache&) = delete;
  AllocCache& operator=(const AllocCache&) = delete;

  // The GPUs HachiPolicy would choose, without the explanation: the hot path.
  // Errors as in CheckRequest (policy.h).
  Result<GpuSet> Pick(const NodeModel& model, GpuSet free, const Request& request)
      EXCLUDES(mu_);
  // Pick plus the explanation (DescribeChoice: direct computation, not cached).
  Result<Choice> Choose(const NodeModel& model, GpuSet free, const Request& request)
      EXCLUDES(mu_);

  // Precomputes every decision without `required` for `model`'s layout. Idempotent.
  void BuildTable(const NodeModel& model) EXCLUDES(mu_);
  bool HasTable(const NodeModel& model) const EXCLUDES(mu_);

  struct Stats {
    uint64_t hits = 0;     // answered from a table or the lazy map
    uint64_t misses = 0;   // computed and stored
    uint64_t direct = 0;   // computed, not stored (required non-empty)
    uint64_t layouts = 0;  // layouts with an entry
    uint64_t lazy_entries = 0;
  };
  Stats stats() const EXCLUDES(mu_);
  void Clear() EXCLUDES(mu_);

 private:
  struct Layout;  // per-layout state, defined in cache.cc

  mutable Mutex mu_;
  std::unordered_map<uint64_t, std::unique_ptr<Layout>> layouts_ GUARDED_BY(mu_);
  Stats stats_ GUARDED_BY(mu_);
};

}  // namespace hachi::alloc
