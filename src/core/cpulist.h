// Linux cpulist strings ("0-55,112-167", "6,14,22,30"): parse and format.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hachi {

// Sorted, de-duplicated CPU ids. Errors name the bad token. Ids above 65535 are refused.
Result<std::vector<int>> ParseCpuList(std::string_view text);
// The canonical folded form: {0,1,2,3,8} -> "0-3,8".
std::string FormatCpuList(const std::vector<int>& cpus);

}  // namespace hachi
