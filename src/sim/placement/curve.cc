// The published curve's binning (notes/fgd-protocol.md §5), Python rounding included:
// round() on a float rounds its exact binary value half-to-even, which is what printf's
// correctly rounded "%.Nf" does too.
#include <cstdio>
#include <cstdlib>

#include "sim/placement/bench.h"

namespace hachi::placement {
namespace {

double PyRound(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return std::strtod(buf, nullptr);
}

}  // namespace

std::vector<double> AllocValues(const BenchResult& r) {
  std::vector<double> v(r.allocated.size());
  for (size_t i = 0; i < v.size(); ++i) {
    // The merge script's own expression, allocated / G / 10, for the same last bit.
    v[i] = static_cast<double>(r.allocated[i]) /
           (static_cast<double>(r.capacity_milli) / 1000.0) / 10.0;
  }
  return v;
}

std::vector<double> DiscreteCurve(const std::vector<int64_t>& arrived,
                                  int64_t capacity_milli,
                                  const std::vector<double>& values) {
  const double gpus = static_cast<double>(capacity_milli) / 1000.0;
  std::vector<double> ar(arrived.size()), al(arrived.size());
  for (size_t i = 0; i < arrived.size(); ++i) {
    ar[i] = PyRound(static_cast<double>(arrived[i]) / gpus / 10.0, 0);
    al[i] = PyRound(values[i], 2);
  }
  std::vector<double> curve(131, 0.0);
  for (int x = 0; x <= 130; ++x) {
    double sum = 0;
    int n = 0;
    for (size_t i = 0; i < ar.size(); ++i) {
      if (ar[i] == x) sum += al[i], ++n;
    }
    if (n == 0) {
      for (size_t i = 0; i < ar.size(); ++i) {
        if (ar[i] >= x - 1 && ar[i] <= x + 1) sum += al[i], ++n;
      }
    }
    curve[x] = n > 0 ? PyRound(sum / n, 2) : 0.0;
  }
  return curve;
}

}  // namespace hachi::placement
