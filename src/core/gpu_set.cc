#include "core/gpu_set.h"

#include <charconv>

#include "core/strings.h"

namespace hachi {

GpuSet GpuSet::FromIndices(const std::vector<int>& indices) {
  GpuSet s;
  for (int i : indices) s.Insert(i);
  return s;
}

namespace {

Result<int> ParseIndex(std::string_view tok, std::string_view whole) {
  int v = -1;
  auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
  if (ec != std::errc() || p != tok.data() + tok.size() || v < 0 ||
      v >= GpuSet::kMaxGpus) {
    return InvalidArgument("bad GPU index '" + Clip(tok) + "' in '" + Clip(whole) +
                           "' (expected 0-63)");
  }
  return v;
}

}  // namespace

Result<GpuSet> GpuSet::Parse(std::string_view text) {
  GpuSet out;
  std::string_view rest = Trim(text);
  if (rest.empty()) return out;
  for (std::string_view part : Split(rest, ',')) {
    part = Trim(part);
    if (part.empty()) {
      return InvalidArgument("empty item in GPU list '" + Clip(text) + "'");
    }
    size_t dash = part.find('-');
    if (dash == std::string_view::npos) {
      Result<int> v = ParseIndex(part, text);
      if (!v.ok()) return v.status();
      out.Insert(*v);
      continue;
    }
    Result<int> lo = ParseIndex(Trim(part.substr(0, dash)), text);
    if (!lo.ok()) return lo.status();
    Result<int> hi = ParseIndex(Trim(part.substr(dash + 1)), text);
    if (!hi.ok()) return hi.status();
    if (*hi < *lo) {
      return InvalidArgument("descending range '" + Clip(part) + "' in GPU list '" +
                             Clip(text) + "'");
    }
    for (int i = *lo; i <= *hi; ++i) out.Insert(i);
  }
  return out;
}

std::vector<int> GpuSet::Indices() const {
  std::vector<int> out;
  for (uint64_t m = mask_; m; m &= m - 1) out.push_back(std::countr_zero(m));
  return out;
}

std::string GpuSet::ToString() const {
  std::string out;
  std::vector<int> idx = Indices();
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && idx[j + 1] == idx[j] + 1) ++j;
    if (!out.empty()) out += ',';
    if (j - i >= 2) {
      out += std::to_string(idx[i]) + "-" + std::to_string(idx[j]);
    } else {
      for (size_t k = i; k <= j; ++k) {
        if (k > i) out += ',';
        out += std::to_string(idx[k]);
      }
    }
    i = j + 1;
  }
  return out;
}

std::string GpuSet::ToList() const {
  std::string out;
  for (int i : Indices()) {
    if (!out.empty()) out += ',';
    out += std::to_string(i);
  }
  return out;
}

}  // namespace hachi
