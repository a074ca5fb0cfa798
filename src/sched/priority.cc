#include "sched/priority.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <string_view>

namespace hachi::sched {
namespace {

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}
uint64_t Bits(double d) { return std::bit_cast<uint64_t>(d); }

}  // namespace

Time PriorityTime(Time now, Duration period) {
  if (period <= 0) return now;
  Time r = now % period;
  if (r < 0) r += period;
  return now - r;
}

int LargestNode(const ClusterState& state) {
  int largest = 1;
  for (const Node& n : state.nodes) largest = std::max(largest, n.gpu_count());
  return largest;
}

PriorityTerms JobPriorityTerms(const ClusterState& state, const Job& job, Time t,
                               double fairshare_factor, int largest_node) {
  const PriorityWeights& w = state.weights;
  double age = 0;
  if (w.age_max > 0 && t > job.submit_time) {
    age = std::min(
        1.0, static_cast<double>(t - job.submit_time) / static_cast<double>(w.age_max));
  }
  int tier = 0;
  if (job.partition >= 0 && job.partition < static_cast<int>(state.partitions.size())) {
    tier = state.partitions[job.partition].tier;
  }
  int qos = 0;
  if (!job.req.qos.empty()) {
    for (const Qos& q : state.qos) {
      if (q.name == job.req.qos) qos = q.priority;
    }
  }
  const double size = largest_node > 0 ? static_cast<double>(job.req.TotalGpus()) /
                                             static_cast<double>(largest_node)
                                       : 0.0;
  PriorityTerms p;
  p.age = w.age * age;
  p.fairshare = w.fairshare * fairshare_factor;
  p.tier = w.tier * tier;
  p.qos = w.qos * qos / 1000.0;
  p.size = w.size * size;
  p.nice = job.req.nice;  // --nice
  return p;
}

QueueOrder::Key QueueOrder::KeyOf(const Job& j) {
  return {j.id, j.submit_time, j.partition, j.req.gpus, j.req.nodes};
}

bool QueueOrder::Before(const Entry& a, const Entry& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  if (a.submit != b.submit) return a.submit < b.submit;
  return a.id < b.id;
}

uint64_t QueueOrder::InputsHash(const ClusterState& state, Time rounded) const {
  if (kind_ == OrderKind::kSubmit) return 1;
  uint64_t h = Mix(0, static_cast<uint64_t>(rounded));
  const PriorityWeights& w = state.weights;
  for (double d :
       {w.age, static_cast<double>(w.age_max), w.fairshare, w.tier, w.qos, w.size}) {
    h = Mix(h, Bits(d));
  }
  // The rounded fair-share factors (sorted by account, so in a fixed order).
  uint64_t fs = 0;
  std::hash<std::string_view> hs;
  for (const FairShareAccount& a : FairShareFactors(state.fairshare)) {
    fs = Mix(Mix(fs, hs(a.account)), Bits(a.factor));
  }
  h = Mix(h, fs);
  for (const Partition& p : state.partitions) h = Mix(h, static_cast<uint64_t>(p.tier));
  for (const Qos& q : state.qos) h = Mix(Mix(h, hs(q.name)), q.priority);
  for (const Node& n : state.nodes) h = Mix(h, static_cast<uint64_t>(n.gpu_count()));
  return h;
}

double QueueOrder::PriorityOf(const ClusterState& state, const Job& j) const {
  if (kind_ == OrderKind::kSubmit) return 0;
  return JobPriority(state, j, rounded_, FactorOf(fs_factor_, j.req.account),
                     largest_node_);
}

void QueueOrder::Rebuild(const ClusterState& state) {
  // Fair share: usage and share normalised over accounts; 2^(-usage/share). An
  // account without a share gets 0 when shares are configured; no shares: all 1.
  fs_factor_.clear();
  if (kind_ == OrderKind::kMultifactor) fs_factor_ = FairShareFactors(state.fairshare);
  largest_node_ = LargestNode(state);
  entries_.clear();
  entries_.reserve(state.pending.size());
  for (size_t i = 0; i < state.pending.size(); ++i) {
    const Job& j = state.pending[i];
    entries_.push_back({PriorityOf(state, j), j.submit_time, j.id, static_cast<int>(i)});
  }
  std::sort(entries_.begin(), entries_.end(), Before);
}

void QueueOrder::Update(const ClusterState& state) {
  // Merge pass: old position -> new position for jobs met in the same relative order.
  const size_t n_old = keys_.size(), n_new = state.pending.size();
  std::vector<int> moved(n_old, -1);
  std::vector<uint8_t> kept(n_new, 0);
  size_t i = 0, j = 0;
  size_t matched = 0;
  while (i < n_old && j < n_new) {
    if (keys_[i] == KeyOf(state.pending[j])) {
      moved[i++] = static_cast<int>(j);
      kept[j++] = 1;
      ++matched;
    } else {
      // Old jobs up to the next match left the queue (a short look-ahead); else new j
      // is new, or moved: erased and re-inserted below, with the same priority.
      const Key k = KeyOf(state.pending[j]);
      size_t d = 1;
      while (d <= 16 && i + d < n_old && !(keys_[i + d] == k)) ++d;
      if (d <= 16 && i + d < n_old) {
        i += d;
      } else {
        ++j;
      }
    }
  }
  if ((n_new - matched) * 8 > n_new + 64) {  // mostly new: sorting is cheaper
    Rebuild(state);
    return;
  }
  size_t w = 0;
  for (size_t r = 0; r < entries_.size(); ++r) {
    const int to = moved[entries_[r].pos];
    if (to < 0) continue;
    entries_[w] = entries_[r];
    entries_[w++].pos = to;
  }
  entries_.resize(w);
  for (size_t k = 0; k < n_new; ++k) {
    if (kept[k]) continue;
    const Job& job = state.pending[k];
    Entry e{PriorityOf(state, job), job.submit_time, job.id, static_cast<int>(k)};
    entries_.insert(std::upper_bound(entries_.begin(), entries_.end(), e, Before), e);
  }
}

void QueueOrder::Emit(const ClusterState& state) {
  keys_.resize(state.pending.size());
  for (size_t i = 0; i < state.pending.size(); ++i) keys_[i] = KeyOf(state.pending[i]);
  order_.clear();
  prio_by_index_.assign(state.pending.size(), 0);
  for (const Entry& e : entries_) {
    order_.push_back(e.pos);
    prio_by_index_[e.pos] = e.priority;
  }
  min_gpus_from_.assign(order_.size() + 1, 1 << 30);
  for (size_t k = order_.size(); k-- > 0;) {
    min_gpus_from_[k] =
        std::min(min_gpus_from_[k + 1], state.pending[order_[k]].req.GpusPerNode());
  }
}

const std::vector<int>& QueueOrder::Order(const ClusterState& state, Time now) {
  const Time rounded = PriorityTime(now, period_);
  const uint64_t h = InputsHash(state, kind_ == OrderKind::kSubmit ? 0 : rounded);
  if (valid_ && h == inputs_hash_ && keys_.size() == state.pending.size()) {
    bool same = true;
    for (size_t i = 0; i < keys_.size() && same; ++i) {
      same = keys_[i] == KeyOf(state.pending[i]);
    }
    if (same) return order_;
  }
  rounded_ = rounded;
  if (!valid_ || h != inputs_hash_) {
    Rebuild(state);
  } else {
    Update(state);
  }
  inputs_hash_ = h;
  valid_ = true;
  Emit(state);
  return order_;
}

}  // namespace hachi::sched
