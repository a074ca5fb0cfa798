#include "sched/eligibility.h"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace hachi::sched {
namespace {

bool ContainsNoCase(std::string_view hay, std::string_view needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                        [](char a, char b) {
                          return std::tolower(static_cast<unsigned char>(a)) ==
                                 std::tolower(static_cast<unsigned char>(b));
                        });
  return it != hay.end();
}

}  // namespace

bool GpuModelMatches(std::string_view node_model, std::string_view wanted) {
  if (wanted.empty()) return true;
  for (size_t start = 0;;) {
    const size_t bar = wanted.find('|', start);
    const std::string_view alt = wanted.substr(start, bar - start);
    if (!alt.empty() && ContainsNoCase(node_model, alt)) return true;
    if (bar == std::string_view::npos) return false;
    start = bar + 1;
  }
}

bool GresTypeMatches(std::string_view gres_type, std::string_view wanted) {
  if (gres_type.empty() || wanted.empty()) return false;
  for (size_t start = 0;;) {
    const size_t bar = wanted.find('|', start);
    if (wanted.substr(start, bar - start) == gres_type) return true;
    if (bar == std::string_view::npos) return false;
    start = bar + 1;
  }
}

bool NodeMatchesStatic(const Node& node, const JobRequest& r) {
  if (!GpuModelMatches(node.gpu_model, r.gpu_model) &&
      !GresTypeMatches(node.gres_type, r.gpu_model)) {
    return false;
  }
  // A share's promised memory must fit one GPU too.
  return node.gpu_memory_mib >= std::max(r.min_gpu_memory_mib, r.gpu_memory_mib);
}

}  // namespace hachi::sched
