// GPU fragmentation of a node against the recent workload (FGD: Weng et al., "Beware of
// Fragmentation", USENIX ATC'23): the expected amount of the node's free GPU capacity,
// in thousandths of a GPU, that a job drawn from the workload's size distribution
// (ClusterState::workload) could not use. For each class t, with weight w_t summing
// to 1, F(n) = Σ_t w_t · φ_t(n):
//   - t uses no GPU, or the node's GPU model does not suit t, or the node cannot host
//     t (fewer than t.gpus GPUs with at least t's per-GPU need free, or too few free
//     CPUs or memory): φ = every free milli of the node;
//   - else φ = the free milli on GPUs with less free than t needs per GPU (1000 for
//     whole GPUs, share_milli for a share).
// Cluster fragmentation is the sum over nodes. `hachi` placement (placement.h) picks
// the node and GPUs whose F rises least; FragScore turns the rise into a 0-100 score.
//
// FragMeasure is a memo owned by the Scheduler and kept between cycles: F is a pure
// function of (workload, which classes the node's model suits, sorted free milli per
// GPU, which classes' CPU and memory the node still has), so it is computed once per
// distinct value of that key. The memo never changes an answer. Not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/gpu_set.h"
#include "sched/cluster.h"

namespace hachi::sched {

// What F depends on for one node.
struct NodeFree {
  int gpus = 0;                                   // GPUs of the node
  std::array<int16_t, GpuSet::kMaxGpus> milli{};  // free per GPU: 0..1000
  int cpus = 0;                                   // free
  int64_t memory_mib = 0;                         // free
  uint64_t model_ok = 0;  // bit t: the node's GPU model suits class t
  int idle() const {
    int s = 0;
    for (int g = 0; g < gpus; ++g) s += milli[g];
    return s;
  }
};

// F(n) by the definition above, in milli; weights as given (the caller normalises).
// Classes are summed in order. The reference the memo and the tests use.
double NodeFragmentation(const std::vector<WorkloadClass>& workload,
                         const std::vector<double>& weights, const NodeFree& n);

// FGD's score of a placement that changes a node's F by `delta` (milli): 0-100,
// trunc(100 · sigmoid(−delta / 1000)); 50 for no change, higher for a fall. The
// truncation makes placements within ~40 milli of each other tie, so the next keys
// (topology, packing) decide among them.
int FragScore(double delta);

class FragMeasure {
 public:
  // At most this many classes are used (the heaviest, in the given order otherwise).
  static constexpr int kMaxClasses = 64;

  // Takes the workload of this cycle; the memo survives while it is unchanged.
  void Reset(const std::vector<WorkloadClass>& workload);
  bool active() const { return !classes_.empty(); }
  // Bit t set: `gpu_model` (a node's) suits class t.
  uint64_t ModelMask(const std::string& gpu_model);
  // F(n), memoised.
  double Frag(const NodeFree& n);

 private:
  struct Entry {
    std::array<uint64_t, 6> key{};
    double value = 0;
    bool used = false;
  };
  std::vector<WorkloadClass> given_;    // as supplied, to notice a change
  std::vector<WorkloadClass> classes_;  // used: at most kMaxClasses
  std::vector<double> weights_;         // normalised to sum 1
  std::vector<int> cpu_steps_;          // sorted distinct class CPU requests
  std::vector<int64_t> memory_steps_;   // sorted distinct class memory requests
  std::unordered_map<std::string, uint64_t> model_masks_;
  std::vector<Entry> table_;  // open addressing, power-of-two size
  size_t used_ = 0;
};

}  // namespace hachi::sched
