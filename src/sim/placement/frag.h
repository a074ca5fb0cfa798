// FGD's fragmentation measure (Weng et al., ATC'23; notes/fgd-protocol.md §4): a node's
// fragmentation is the expected amount of its free GPU milli that a task drawn from the
// workload's typical tasks could not use.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/placement/openb.h"

namespace hachi::placement {

struct TypicalTask {
  int64_t cpu_milli = 0;
  int gpu_milli = 0;  // per GPU; 0: CPU-only
  int num_gpu = 0;
  uint32_t spec_mask = 0;
  double freq = 0;  // the frequencies of all typical tasks sum to 1
};

// The most common pod shapes (cpu, gpu_milli, num_gpu, gpu_spec) covering >= 95 % of
// `pods`, most common first (equal counts: the larger key first), frequencies
// renormalised.
std::vector<TypicalTask> TypicalTasks(const std::vector<OpenbPod>& pods);

// What F depends on: the node's model, CPU left and the free milli of each GPU.
struct NodeView {
  int model = 0;
  int64_t cpu_left = 0;
  int gpus = 0;
  std::array<int, kMaxGpusPerNode> free{};  // per GPU, 0..1000
  int idle() const {
    int s = 0;
    for (int g = 0; g < gpus; ++g) s += free[g];
    return s;
  }
};

// F(n) in milli, summed in the order of `tasks` (the sum order fixes the float result,
// and FGD's integer score truncation can tell the last bit apart).
double NodeFrag(const NodeView& n, const std::vector<TypicalTask>& tasks);

// NodeFrag memoised on (model, the CPU class, the sorted free milli): F depends on CPU
// only through which typical tasks' CPU the node still fits, so few distinct keys occur
// and a score costs a lookup rather than |tasks| x GPUs work.
class FragCache {
 public:
  explicit FragCache(std::vector<TypicalTask> tasks);
  double Frag(const NodeView& n);
  const std::vector<TypicalTask>& tasks() const { return tasks_; }

 private:
  struct Entry {
    uint64_t k1 = 0, k2 = 0;
    double value = 0;
    bool used = false;
  };
  std::vector<TypicalTask> tasks_;
  std::vector<int64_t> cpu_steps_;  // sorted distinct task CPU requests
  std::vector<Entry> table_;        // open addressing, power-of-two size
  size_t used_ = 0;
};

}  // namespace hachi::placement
