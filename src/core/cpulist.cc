#include "core/cpulist.h"

#include <algorithm>

#include "core/strings.h"

namespace hachi {

Result<std::vector<int>> ParseCpuList(std::string_view text) {
  std::vector<int> out;
  std::string_view t = Trim(text);
  if (t.empty()) return InvalidArgument("empty CPU list");
  for (std::string_view part : Split(t, ',')) {
    part = Trim(part);
    size_t dash = part.find('-');
    std::optional<long long> lo, hi;
    if (dash == std::string_view::npos) {
      lo = hi = ParseInt(part);
    } else {
      lo = ParseInt(Trim(part.substr(0, dash)));
      hi = ParseInt(Trim(part.substr(dash + 1)));
    }
    if (!lo || !hi || *lo < 0 || *hi > 65535 || *hi < *lo) {
      return InvalidArgument("bad CPU list item '" + std::string(part) + "' in '" +
                             std::string(t) + "'");
    }
    for (long long c = *lo; c <= *hi; ++c) out.push_back(static_cast<int>(c));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    // Appended piece by piece: `"-" + std::to_string(...)` makes GCC 12 at -O3 warn
    // -Wrestrict, a known false positive.
    if (j > i) {
      out += '-';
      out += std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return out;
}

}  // namespace hachi
