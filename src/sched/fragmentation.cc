#include "sched/fragmentation.h"

#include <algorithm>
#include <cmath>

#include "sched/eligibility.h"
#include "sched/gpu_share.h"

namespace hachi::sched {
namespace {

uint64_t HashKey(const std::array<uint64_t, 6>& k) {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (uint64_t w : k) h = (h ^ w) * 0xC2B2AE3D27D4EB4Full + (h >> 29);
  return h ^ (h >> 31);
}

}  // namespace

double NodeFragmentation(const std::vector<WorkloadClass>& workload,
                         const std::vector<double>& weights, const NodeFree& n) {
  const int idle = n.idle();
  double f = 0;
  for (size_t t = 0; t < workload.size(); ++t) {
    const WorkloadClass& c = workload[t];
    int phi = idle;
    const int need = c.share_milli > 0 ? c.share_milli : kFullGpuMilli;
    const int count = c.share_milli > 0 ? 1 : c.gpus;
    if (count > 0 && (n.model_ok >> t & 1u) && n.cpus >= c.cpus &&
        n.memory_mib >= c.memory_mib) {
      int fits = 0, unusable = 0;
      for (int g = 0; g < n.gpus; ++g) {
        if (n.milli[g] >= need) {
          ++fits;
        } else {
          unusable += n.milli[g];
        }
      }
      if (fits >= count) phi = unusable;
    }
    f += weights[t] * phi;
  }
  return f;
}

int FragScore(double delta) {
  return static_cast<int>(100.0 * (1.0 / (1.0 + std::exp(delta / 1000.0))));
}

void FragMeasure::Reset(const std::vector<WorkloadClass>& workload) {
  if (workload == given_) return;
  given_ = workload;
  classes_.clear();
  weights_.clear();
  model_masks_.clear();
  table_.assign(1 << 12, Entry{});
  used_ = 0;
  std::vector<size_t> idx;
  for (size_t i = 0; i < workload.size(); ++i) {
    if (workload[i].weight > 0) idx.push_back(i);
  }
  if (idx.size() > kMaxClasses) {
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
      return workload[a].weight > workload[b].weight;
    });
    idx.resize(kMaxClasses);
    std::sort(idx.begin(), idx.end());
  }
  double total = 0;
  for (size_t i : idx) total += workload[i].weight;
  for (size_t i : idx) {
    classes_.push_back(workload[i]);
    weights_.push_back(workload[i].weight / total);
  }
  cpu_steps_.clear();
  memory_steps_.clear();
  for (const WorkloadClass& c : classes_) {
    cpu_steps_.push_back(c.cpus);
    memory_steps_.push_back(c.memory_mib);
  }
  std::sort(cpu_steps_.begin(), cpu_steps_.end());
  cpu_steps_.erase(std::unique(cpu_steps_.begin(), cpu_steps_.end()), cpu_steps_.end());
  std::sort(memory_steps_.begin(), memory_steps_.end());
  memory_steps_.erase(std::unique(memory_steps_.begin(), memory_steps_.end()),
                      memory_steps_.end());
}

uint64_t FragMeasure::ModelMask(const std::string& gpu_model) {
  auto it = model_masks_.find(gpu_model);
  if (it != model_masks_.end()) return it->second;
  uint64_t mask = 0;
  for (size_t t = 0; t < classes_.size(); ++t) {
    if (GpuModelMatches(gpu_model, classes_[t].gpu_model)) mask |= uint64_t{1} << t;
  }
  model_masks_.emplace(gpu_model, mask);
  return mask;
}

double FragMeasure::Frag(const NodeFree& n) {
  // F is order-free over GPUs and depends on CPUs and memory only through which
  // classes' requests they cover: key on the sorted milli and those two classes.
  NodeFree v = n;
  for (int g = 1; g < v.gpus; ++g) {  // insertion sort: at most 16 values
    const int16_t x = v.milli[g];
    int k = g;
    for (; k > 0 && v.milli[k - 1] > x; --k) v.milli[k] = v.milli[k - 1];
    v.milli[k] = x;
  }
  const auto cpu_class = static_cast<uint64_t>(
      std::upper_bound(cpu_steps_.begin(), cpu_steps_.end(), v.cpus) -
      cpu_steps_.begin());
  const auto mem_class = static_cast<uint64_t>(
      std::upper_bound(memory_steps_.begin(), memory_steps_.end(), v.memory_mib) -
      memory_steps_.begin());
  std::array<uint64_t, 6> key{};
  for (int g = 0; g < v.gpus; ++g) {  // 11 bits per GPU, 5 per word
    key[g / 5] |= static_cast<uint64_t>(v.milli[g]) << (11 * (g % 5));
  }
  key[4] = v.model_ok;
  key[5] = static_cast<uint64_t>(v.gpus) | cpu_class << 8 | mem_class << 32;
  if (table_.empty()) table_.resize(1 << 12);
  if (used_ * 2 >= table_.size()) {  // grow: rehash
    std::vector<Entry> old(table_.size() * 2);
    old.swap(table_);
    for (const Entry& e : old) {
      if (!e.used) continue;
      size_t h = HashKey(e.key);
      while (table_[h & (table_.size() - 1)].used) ++h;
      table_[h & (table_.size() - 1)] = e;
    }
  }
  for (size_t h = HashKey(key);; ++h) {
    Entry& e = table_[h & (table_.size() - 1)];
    if (!e.used) {
      e = {key, NodeFragmentation(classes_, weights_, v), true};
      ++used_;
      return e.value;
    }
    if (e.key == key) return e.value;
  }
}

}  // namespace hachi::sched
