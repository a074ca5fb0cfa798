// Order phase: the pending queue in priority order (docs/scheduler.md, "Priority").
//
//   kSubmit ("fifo", "easy"): submit time, then job id.
//   kMultifactor ("hachi"): priority (PriorityWeights in cluster.h) descending, then
//     submit time, then id. Age uses `now` rounded down to the priority period, so the
//     order only changes when the period ticks, when the pending set changes, or when
//     the inputs of the priority (weights, fair share, tiers, QoS) change.
//
// QueueOrder memoises the order between cycles: an unchanged queue costs one linear
// comparison; otherwise one merge pass over the old and new pending lists keeps the
// jobs found in the same relative order (the usual case: jobs leave, new ones are
// appended), erases the rest and inserts the new ones by binary search. A job erased
// and re-inserted gets the same priority, so the memo never changes the answer. A pending
// job is recognised by (id, submit time, partition, GPUs, nodes): changing its account or
// QoS in place without changing one of these is not noticed until the period ticks. Not
// thread-safe (owned by one Scheduler).
#pragma once

#include <cstdint>
#include <vector>

#include "sched/cluster.h"
#include "sched/fair_share.h"

namespace hachi::sched {

enum class OrderKind : uint8_t { kSubmit, kMultifactor };

// The multifactor priority's terms for `job` at time `t` (already rounded), each
// weighted, with the account's fair-share factor precomputed (FairShareFactors); what
// the order sorts by is their Total(). `sprio` shows these.
struct PriorityTerms {
  double age = 0;
  double fairshare = 0;
  double tier = 0;  // the partition's
  double qos = 0;
  double size = 0;
  double nice = 0;  // subtracted
  double Total() const { return age + fairshare + tier + qos + size - nice; }
};
PriorityTerms JobPriorityTerms(const ClusterState& state, const Job& job, Time t,
                               double fairshare_factor, int largest_node);
inline double JobPriority(const ClusterState& state, const Job& job, Time t,
                          double fairshare_factor, int largest_node) {
  return JobPriorityTerms(state, job, t, fairshare_factor, largest_node).Total();
}
// The largest node's GPU count (the size term's denominator), at least 1.
int LargestNode(const ClusterState& state);
// `now` rounded down to the priority period, as the order uses it for the age term.
Time PriorityTime(Time now, Duration period);

class QueueOrder {
 public:
  QueueOrder(OrderKind kind, Duration period) : kind_(kind), period_(period) {}

  // Indices into state.pending, first to schedule first; and each one's priority
  // (0 for kSubmit), by pending index. Valid until the next call.
  const std::vector<int>& Order(const ClusterState& state, Time now);
  const std::vector<double>& priorities() const { return prio_by_index_; }
  // min_gpus_from()[k]: the fewest GPUs per node any job at order position >= k asks
  // for; lets a cycle stop when no remaining job fits the largest free set.
  const std::vector<int>& min_gpus_from() const { return min_gpus_from_; }

 private:
  struct Key {  // what identifies a pending job to the memo
    JobId id;
    Time submit;
    int partition;
    int gpus;
    int nodes;
    bool operator==(const Key&) const = default;
  };
  struct Entry {
    double priority;
    Time submit;
    JobId id;
    int pos;  // index into state.pending
  };
  static Key KeyOf(const Job& j);
  static bool Before(const Entry& a, const Entry& b);
  uint64_t InputsHash(const ClusterState& state, Time rounded) const;
  double PriorityOf(const ClusterState& state, const Job& j) const;
  void Rebuild(const ClusterState& state);
  void Update(const ClusterState& state);
  void Emit(const ClusterState& state);

  OrderKind kind_;
  Duration period_;
  // Memo, valid for (inputs_hash_, keys_).
  bool valid_ = false;
  uint64_t inputs_hash_ = 0;
  Time rounded_ = 0;
  std::vector<Key> keys_;       // by pending index, as last seen
  std::vector<Entry> entries_;  // in order
  std::vector<int> order_;
  std::vector<double> prio_by_index_;
  std::vector<int> min_gpus_from_;
  // Derived per inputs: fair-share factor per account, largest node.
  std::vector<FairShareAccount> fs_factor_;
  int largest_node_ = 8;
};

}  // namespace hachi::sched
