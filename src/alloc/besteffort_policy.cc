#include "alloc/besteffort_policy.h"

#include <vector>

namespace hachi::alloc {
namespace {

constexpr int kPad = -1;  // upstream's nil device

using Set = std::vector<int>;
using Partition = std::vector<Set>;

int PcieScore(topo::PciePath p) {
  switch (p) {
    case topo::PciePath::kSys:
      return 10;  // P2PLinkCrossCPU
    case topo::PciePath::kNode:
      return 20;  // P2PLinkSameCPU
    case topo::PciePath::kPhb:
      return 30;  // P2PLinkHostBridge
    case topo::PciePath::kPxb:
      return 40;  // P2PLinkMultiSwitch
    case topo::PciePath::kPix:
      return 50;  // P2PLinkSingleSwitch
    case topo::PciePath::kUnknown:
      break;
  }
  return 0;
}

bool Contains(const Set& set, int gpu) {
  for (int g : set) {
    if (g == gpu) return true;
  }
  return false;
}

bool ContainsAll(const Set& set, const Set& subset) {
  for (int g : subset) {
    if (!Contains(set, g)) return false;
  }
  return true;
}

int CountPadding(const Set& set) {
  int n = 0;
  for (int g : set) n += g == kPad;
  return n;
}

// The walk of upstream's iterateGPUPartitions + Allocate's partition selection.
class PartitionSearch {
 public:
  PartitionSearch(const NodeModel& model, int size, Set required)
      : model_(model), size_(size), required_(std::move(required)) {}

  Partition Run(Set devices) {
    if (size_ == 1) {  // upstream's shortcut: one single-GPU set per device
      for (int d : devices) Consider(Partition{Set{d}});
      return best_;
    }
    while (devices.size() % size_ != 0) devices.push_back(kPad);
    padding_ = CountPadding(devices);
    Partition accum;
    Iterate(devices, accum);
    return best_;
  }

  int SetScore(const Set& set) const {
    int score = 0;
    for (size_t i = 0; i < set.size(); ++i) {
      for (size_t j = i + 1; j < set.size(); ++j) {
        if (set[i] != kPad && set[j] != kPad && set[i] != set[j]) {
          score += BestEffortPairScore(model_, set[i], set[j]);
        }
      }
    }
    return score;
  }

 private:
  void Consider(const Partition& candidate) {
    // gpuPartitionContainsSetWithAll: some padding-free set holds every required GPU.
    bool ok = false;
    for (const Set& s : candidate) {
      if (ContainsAll(s, required_) && CountPadding(s) == 0) ok = true;
    }
    if (!ok) return;
    int score = 0;
    for (const Set& s : candidate) score += SetScore(s);
    if (score > best_score_ || !have_best_) {
      best_ = candidate;
      best_score_ = score;
      have_best_ = true;
    }
  }

  void Iterate(const Set& devices, Partition& accum) {
    if (static_cast<int>(devices.size()) == size_) {
      accum.push_back(devices);
      Consider(accum);
      accum.pop_back();
      return;
    }
    // Sets that hold devices[0] plus size-1 of the others, in upstream's order
    // (iterateGPUSets: lexicographic by position), so ties resolve the same way.
    const int rest = static_cast<int>(devices.size()) - 1;
    const int k = size_ - 1;
    std::vector<int> idx(k);
    for (int i = 0; i < k; ++i) idx[i] = i;
    while (true) {
      Set set{devices[0]};
      for (int i : idx) set.push_back(devices[1 + i]);
      const int p = CountPadding(set);
      if (p == 0 || p == padding_) {
        Set remaining;
        for (int g : devices) {
          if (!Contains(set, g)) remaining.push_back(g);
        }
        accum.push_back(set);
        Iterate(remaining, accum);
        accum.pop_back();
      }
      int i = k - 1;
      while (i >= 0 && idx[i] == rest - k + i) --i;
      if (i < 0) break;
      ++idx[i];
      for (int j = i + 1; j < k; ++j) idx[j] = idx[j - 1] + 1;
    }
  }

  const NodeModel& model_;
  const int size_;
  const Set required_;
  int padding_ = 0;
  Partition best_;
  int best_score_ = 0;
  bool have_best_ = false;
};

}  // namespace

int BestEffortPairScore(const NodeModel& model, int a, int b) {
  const topo::Link& l = model.link(a, b);
  return PcieScore(l.pcie) + 100 * l.nvlinks;
}

Result<Choice> BestEffortPolicy::Choose(const NodeModel& model, GpuSet free,
                                        const Request& request) const {
  HACHI_RETURN_IF_ERROR(CheckRequest(model, free, request));
  PartitionSearch search(model, request.count, request.required.Indices());
  const Set required = request.required.Indices();
  Partition best = search.Run(free.Indices());
  // Allocate's last step: the best set containing `required`, first wins. Padded sets
  // are skipped (see the header): upstream could return one when all scores tie.
  const Set* pick = nullptr;
  int pick_score = 0;
  for (const Set& s : best) {
    if (CountPadding(s) != 0 || !ContainsAll(s, required)) continue;
    const int score = search.SetScore(s);
    if (pick == nullptr || score > pick_score) {
      pick = &s;
      pick_score = score;
    }
  }
  if (pick == nullptr) {
    return Internal("besteffort found no set of " + std::to_string(request.count) +
                    " GPUs in free " + free.ToString());
  }
  Choice c;
  c.gpus = GpuSet::FromIndices(*pick);
  c.parts = DescribeChoice(model, free, c.gpus);
  return c;
}

}  // namespace hachi::alloc
