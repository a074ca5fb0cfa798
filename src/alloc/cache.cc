#include "alloc/cache.h"

#include <vector>

#include "alloc/hachi_tables.h"
#include "alloc/policy.h"

namespace hachi::alloc {

struct AllocCache::Layout {
  int n = 0;
  std::vector<uint16_t> table;                  // [free * (n + 1) + count]; may be empty
  std::unordered_map<uint32_t, uint16_t> lazy;  // (free << 5 | count) -> chosen
};

AllocCache::AllocCache() = default;
AllocCache::~AllocCache() = default;

Result<GpuSet> AllocCache::Pick(const NodeModel& model, GpuSet free,
                                const Request& request) {
  HACHI_RETURN_IF_ERROR(CheckRequest(model, free, request));
  const uint32_t f = static_cast<uint32_t>(free.mask());
  const uint32_t lazy_key = f << 5 | static_cast<uint32_t>(request.count);
  const bool cacheable = request.required.empty();
  if (cacheable) {
    MutexLock lock(&mu_);
    auto it = layouts_.find(model.key());
    if (it != layouts_.end()) {
      const Layout& l = *it->second;
      if (!l.table.empty()) {
        ++stats_.hits;
        return GpuSet(l.table[static_cast<size_t>(f) * (l.n + 1) + request.count]);
      }
      auto hit = l.lazy.find(lazy_key);
      if (hit != l.lazy.end()) {
        ++stats_.hits;
        return GpuSet(hit->second);
      }
    }
  }
  // Search outside the lock; two threads missing on the same key compute the same
  // answer, and the second insert is a no-op.
  const uint32_t chosen = SharedHachiTables(model)->Decide(
      f, request.count, static_cast<uint32_t>(request.required.mask()));
  MutexLock lock(&mu_);
  if (!cacheable) {
    ++stats_.direct;
    return GpuSet(chosen);
  }
  ++stats_.misses;
  std::unique_ptr<Layout>& l = layouts_[model.key()];
  if (!l) {
    l = std::make_unique<Layout>();
    l->n = model.gpu_count();
  }
  if (l->table.empty()) l->lazy.emplace(lazy_key, static_cast<uint16_t>(chosen));
  return GpuSet(chosen);
}

Result<Choice> AllocCache::Choose(const NodeModel& model, GpuSet free,
                                  const Request& request) {
  Result<GpuSet> gpus = Pick(model, free, request);
  if (!gpus.ok()) return gpus.status();
  Choice c;
  c.gpus = *gpus;
  c.parts = DescribeChoice(model, free, c.gpus);
  return c;
}

void AllocCache::BuildTable(const NodeModel& model) {
  if (HasTable(model)) return;
  std::vector<uint16_t> table = SharedHachiTables(model)->DecisionTable();
  MutexLock lock(&mu_);
  std::unique_ptr<Layout>& l = layouts_[model.key()];
  if (!l) l = std::make_unique<Layout>();
  l->n = model.gpu_count();
  l->table = std::move(table);
  l->lazy.clear();  // the table answers everything the lazy map held
}

bool AllocCache::HasTable(const NodeModel& model) const {
  MutexLock lock(&mu_);
  auto it = layouts_.find(model.key());
  return it != layouts_.end() && !it->second->table.empty();
}

AllocCache::Stats AllocCache::stats() const {
  MutexLock lock(&mu_);
  Stats s = stats_;
  s.layouts = layouts_.size();
  s.lazy_entries = 0;
  for (const auto& [key, l] : layouts_) s.lazy_entries += l->lazy.size();
  return s;
}

void AllocCache::Clear() {
  MutexLock lock(&mu_);
  layouts_.clear();
  stats_ = Stats();
}

}  // namespace hachi::alloc
