// GoRand: Go 1.x math/rand (the global source), replayed bit for bit. FGD's published
// runs draw every random decision from it (notes/fgd-protocol.md §2), so matching their
// numbers exactly needs the same stream, not just any good generator.
#pragma once

#include <cstdint>
#include <vector>

namespace hachi::placement {

class GoRand {
 public:
  explicit GoRand(int64_t seed);

  int64_t Int63();
  uint32_t Uint32() { return static_cast<uint32_t>(Int63() >> 31); }
  int32_t Int31() { return static_cast<int32_t>(Int63() >> 32); }
  // rand.Intn / Int31n: rejection sampling (n > 0, n < 2^31).
  int32_t Intn(int32_t n);
  double Float64();
  // rand.Shuffle's index stream: Lemire's bounded draw (int31n), i = n-1 ... 1.
  std::vector<int> ShuffleOrder(int n);
  // rand.Perm(n).
  std::vector<int> Perm(int n);

 private:
  int32_t BoundedLemire(int32_t n);

  static constexpr int kLen = 607;
  static constexpr int kTap = 273;
  int tap_ = 0;
  int feed_ = kLen - kTap;
  uint64_t vec_[kLen];
};

}  // namespace hachi::placement
