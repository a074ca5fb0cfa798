// GpuSet: a set of GPU indices on one node, as a 64-bit mask (DESIGN.md: ≤ 64 GPUs a
// node; the allocator itself handles ≤ 16). A plain value type; thread-compatible.
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hachi {

class GpuSet {
 public:
  static constexpr int kMaxGpus = 64;

  constexpr GpuSet() = default;
  constexpr explicit GpuSet(uint64_t mask) : mask_(mask) {}
  static GpuSet FromIndices(const std::vector<int>& indices);
  // The first n GPUs: {0, 1, ..., n-1}.
  static constexpr GpuSet FirstN(int n) {
    return GpuSet(n >= 64 ? ~uint64_t{0} : ((uint64_t{1} << n) - 1));
  }
  // Parses "0,2,5", "0-3,6" or "" (empty set). Names the bad token on error.
  static Result<GpuSet> Parse(std::string_view text);

  constexpr uint64_t mask() const { return mask_; }
  constexpr bool empty() const { return mask_ == 0; }
  constexpr int size() const { return std::popcount(mask_); }
  constexpr bool contains(int i) const { return (mask_ >> i) & 1; }
  constexpr bool IsSubsetOf(GpuSet other) const { return (mask_ & ~other.mask_) == 0; }
  void Insert(int i) { mask_ |= uint64_t{1} << i; }
  void Erase(int i) { mask_ &= ~(uint64_t{1} << i); }
  // Lowest index in the set; -1 if empty.
  int First() const { return mask_ ? std::countr_zero(mask_) : -1; }

  std::vector<int> Indices() const;
  // "0,1,4-7" style (ranges of 3 or more are folded), "" for the empty set.
  std::string ToString() const;
  // "0,1,4,5,6,7": every index spelled out, as CUDA_VISIBLE_DEVICES wants.
  std::string ToList() const;

  friend constexpr GpuSet operator|(GpuSet a, GpuSet b) {
    return GpuSet(a.mask_ | b.mask_);
  }
  friend constexpr GpuSet operator&(GpuSet a, GpuSet b) {
    return GpuSet(a.mask_ & b.mask_);
  }
  friend constexpr GpuSet operator-(GpuSet a, GpuSet b) {
    return GpuSet(a.mask_ & ~b.mask_);
  }
  friend constexpr bool operator==(GpuSet a, GpuSet b) = default;

 private:
  uint64_t mask_ = 0;
};

}  // namespace hachi
