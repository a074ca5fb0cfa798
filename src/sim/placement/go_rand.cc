#include "sim/placement/go_rand.h"

#include <numeric>
#include <utility>

namespace hachi::placement {
namespace {

constexpr uint64_t kCooked[] = {
#include "sim/placement/go_rand_cooked.inc"
};
static_assert(sizeof kCooked / sizeof kCooked[0] == 607);

constexpr uint64_t kMask63 = (uint64_t{1} << 63) - 1;
constexpr int32_t kInt32Max = 0x7fffffff;

// Park-Miller step, x <- 48271 x mod (2^31 - 1), as Go writes it (Schrage's method).
int32_t SeedRand(int32_t x) {
  constexpr int32_t kA = 48271, kQ = 44488, kR = 3399;
  const int32_t hi = x / kQ, lo = x % kQ;
  x = kA * lo - kR * hi;
  if (x < 0) x += kInt32Max;
  return x;
}

}  // namespace

GoRand::GoRand(int64_t seed) {
  seed %= kInt32Max;
  if (seed < 0) seed += kInt32Max;
  if (seed == 0) seed = 89482311;
  auto x = static_cast<int32_t>(seed);
  for (int i = -20; i < kLen; ++i) {
    x = SeedRand(x);
    if (i < 0) continue;
    uint64_t u = static_cast<uint64_t>(x) << 40;
    x = SeedRand(x);
    u ^= static_cast<uint64_t>(x) << 20;
    x = SeedRand(x);
    u ^= static_cast<uint64_t>(x);
    vec_[i] = (u ^ kCooked[i]) & kMask63;
  }
}

int64_t GoRand::Int63() {
  if (--tap_ < 0) tap_ += kLen;
  if (--feed_ < 0) feed_ += kLen;
  // Only the low 63 bits are ever read, so unsigned wrap-around is exactly Go's sum.
  const uint64_t x = vec_[feed_] + vec_[tap_];
  vec_[feed_] = x;
  return static_cast<int64_t>(x & kMask63);
}

int32_t GoRand::Intn(int32_t n) {
  if ((n & (n - 1)) == 0) return Int31() & (n - 1);
  const int32_t max = kInt32Max - static_cast<int32_t>((uint32_t{1} << 31) % n);
  int32_t v = Int31();
  while (v > max) v = Int31();
  return v % n;
}

double GoRand::Float64() {
  for (;;) {
    const double f = static_cast<double>(Int63()) / 9223372036854775808.0;
    if (f < 1) return f;
  }
}

int32_t GoRand::BoundedLemire(int32_t n) {
  uint64_t prod = uint64_t{Uint32()} * static_cast<uint64_t>(n);
  auto low = static_cast<uint32_t>(prod);
  if (low < static_cast<uint32_t>(n)) {
    const uint32_t thresh = (0u - static_cast<uint32_t>(n)) % static_cast<uint32_t>(n);
    while (low < thresh) {
      prod = uint64_t{Uint32()} * static_cast<uint64_t>(n);
      low = static_cast<uint32_t>(prod);
    }
  }
  return static_cast<int32_t>(prod >> 32);
}

std::vector<int> GoRand::ShuffleOrder(int n) {
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  for (int i = n - 1; i > 0; --i) std::swap(order[i], order[BoundedLemire(i + 1)]);
  return order;
}

std::vector<int> GoRand::Perm(int n) {
  std::vector<int> m(n);
  for (int i = 0; i < n; ++i) {
    const int j = Intn(i + 1);
    m[i] = m[j];
    m[j] = i;
  }
  return m;
}

}  // namespace hachi::placement
