#include "sim/placement/frag.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace hachi::placement {

std::vector<TypicalTask> TypicalTasks(const std::vector<OpenbPod>& pods) {
  using Key = std::tuple<int64_t, int, int, std::string>;
  std::map<Key, std::pair<int64_t, uint32_t>> counts;  // key -> (count, spec mask)
  for (const auto& p : pods) {
    auto& c = counts[{p.cpu_milli, p.gpu_milli, p.num_gpu, p.gpu_spec}];
    ++c.first;
    c.second = p.spec_mask;
  }
  std::vector<std::pair<Key, std::pair<int64_t, uint32_t>>> groups(counts.begin(),
                                                                   counts.end());
  std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
    if (a.second.first != b.second.first) return a.second.first > b.second.first;
    return a.first > b.first;
  });
  std::vector<TypicalTask> tasks;
  int64_t covered = 0;
  for (const auto& [key, c] : groups) {
    if (covered * 100 >= static_cast<int64_t>(pods.size()) * 95) break;
    covered += c.first;
    tasks.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), c.second,
                     static_cast<double>(c.first)});
  }
  for (auto& t : tasks) t.freq /= static_cast<double>(covered);
  return tasks;
}

double NodeFrag(const NodeView& n, const std::vector<TypicalTask>& tasks) {
  const int idle = n.idle();
  double f = 0;
  for (const auto& t : tasks) {
    int phi = idle;
    const bool model_ok = t.spec_mask == 0 || (t.spec_mask >> n.model & 1u);
    if (t.gpu_milli > 0 && model_ok && n.cpu_left >= t.cpu_milli) {
      int fits = 0, unusable = 0;
      for (int g = 0; g < n.gpus; ++g) {
        if (n.free[g] >= t.gpu_milli) {
          ++fits;
        } else {
          unusable += n.free[g];
        }
      }
      if (fits >= t.num_gpu) phi = unusable;
    }
    f += t.freq * phi;
  }
  return f;
}

FragCache::FragCache(std::vector<TypicalTask> tasks)
    : tasks_(std::move(tasks)), table_(1 << 16) {
  for (const auto& t : tasks_) cpu_steps_.push_back(t.cpu_milli);
  std::sort(cpu_steps_.begin(), cpu_steps_.end());
  cpu_steps_.erase(std::unique(cpu_steps_.begin(), cpu_steps_.end()), cpu_steps_.end());
}

double FragCache::Frag(const NodeView& n) {
  std::array<int, kMaxGpusPerNode> sorted{};
  // Insertion sort: at most 8 values.
  for (int g = 0; g < n.gpus && g < kMaxGpusPerNode; ++g) {
    int k = g;
    for (; k > 0 && sorted[k - 1] > n.free[g]; --k) sorted[k] = sorted[k - 1];
    sorted[k] = n.free[g];
  }
  const auto cpu_class = static_cast<uint64_t>(
      std::upper_bound(cpu_steps_.begin(), cpu_steps_.end(), n.cpu_left) -
      cpu_steps_.begin());
  // 11 bits per GPU (0..1000) packs 8 GPUs into 88 bits: two words.
  uint64_t k1 = 0, k2 = 0;
  for (int g = 0; g < 4; ++g) k1 = k1 << 11 | static_cast<uint64_t>(sorted[g]);
  for (int g = 4; g < 8; ++g) k2 = k2 << 11 | static_cast<uint64_t>(sorted[g]);
  k1 = k1 << 4 | static_cast<uint64_t>(n.gpus);
  k2 = k2 << 5 | static_cast<uint64_t>(n.model);
  k2 = k2 << 12 | cpu_class;
  if (used_ * 2 > table_.size()) {  // grow: rehash
    std::vector<Entry> old;
    old.swap(table_);
    table_.assign(old.size() * 2, Entry{});
    used_ = 0;
    for (const auto& e : old) {
      if (!e.used) continue;
      size_t h = (e.k1 * 0x9E3779B97F4A7C15ull ^ e.k2 * 0xC2B2AE3D27D4EB4Full) >> 7;
      while (table_[h & (table_.size() - 1)].used) ++h;
      table_[h & (table_.size() - 1)] = e;
      ++used_;
    }
  }
  size_t h = (k1 * 0x9E3779B97F4A7C15ull ^ k2 * 0xC2B2AE3D27D4EB4Full) >> 7;
  for (;; ++h) {
    Entry& e = table_[h & (table_.size() - 1)];
    if (!e.used) {
      NodeView v = n;
      v.free = sorted;  // F is order-free; the sorted view is the canonical one
      e = {k1, k2, NodeFrag(v, tasks_), true};
      ++used_;
      return e.value;
    }
    if (e.k1 == k1 && e.k2 == k2) return e.value;
  }
}

}  // namespace hachi::placement
