// HachiTables: the "hachi" objective (objective.h) precomputed for every GPU mask of
// one node layout, so that a decision is a scan of integer keys and the whole
// decision table of a node is one pass over all (free, chosen) pairs.
//
//   conn_rank[S]   conn(S) rank-compressed to a uint32 (a larger rank is better)
//   best_m[L]      the best m-subset of L by (conn, LexPrefer), by DP over masks
//   q_rank[L]      Q(L), the leftover quality vector, rank-compressed to a uint32
//
// A decision maximises (conn_rank[S] << 32 | q_rank[free ^ S]), then LexPrefer.
// Memory: about 26 bytes per mask (1.7 MB at 16 GPUs), plus 2 bytes per (free, count)
// for the full decision table. Immutable after Build(); safe to share across threads.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "alloc/node_model.h"

namespace hachi::alloc {

class HachiTables {
 public:
  static std::shared_ptr<const HachiTables> Build(const NodeModel& model);

  int gpu_count() const { return n_; }
  uint64_t key() const { return key_; }
  uint32_t conn_rank(uint32_t mask) const { return conn_rank_[mask]; }
  uint32_t q_rank(uint32_t mask) const { return q_rank_[mask]; }
  // The greedy partition of `mask` into best m-sets, for each m in GroupSizes(n).
  std::vector<std::vector<uint32_t>> LeftoverPartition(uint32_t mask) const;

  // The best S ⊆ free with |S| = count and S ⊇ required. Preconditions (checked by
  // CheckRequest): required ⊆ free ⊆ all GPUs, |required| <= count <= |free|.
  uint32_t Decide(uint32_t free, int count, uint32_t required) const;

  // Every decision without `required`: entry [free * (n + 1) + count] is the chosen
  // mask, 0 when count > |free| or count == 0. 3^n steps (43 M at 16 GPUs).
  std::vector<uint16_t> DecisionTable() const;

 private:
  bool Better(uint32_t a, uint32_t b) const;  // same-size sets, by conn then LexPrefer

  int n_ = 0;
  uint64_t key_ = 0;
  std::vector<int> sizes_;                   // GroupSizes(n)
  std::vector<uint32_t> conn_rank_;          // 2^n
  std::vector<uint32_t> q_rank_;             // 2^n
  std::vector<std::vector<uint16_t>> best_;  // per sizes_[k]: 2^n (0: too few GPUs)
};

// The tables of `model`'s layout, built on first use and shared by every caller with
// the same key. A process-wide memo of a pure function: mutex-guarded, at most 64
// layouts (the memo is emptied when a 65th arrives; holders keep their copies).
std::shared_ptr<const HachiTables> SharedHachiTables(const NodeModel& model);

}  // namespace hachi::alloc
