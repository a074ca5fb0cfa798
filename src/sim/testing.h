// Test builders for the simulator's tests. Test-only.
#pragma once

#include <initializer_list>
#include <string>
#include <tuple>
#include <vector>

#include "sim/trace.h"

namespace hachi::sim::testing {

// Jobs from (submit, gpus, duration) rows, numbered 1, 2, ... in row order.
inline std::vector<TraceJob> Trace(
    std::initializer_list<std::tuple<Time, int, Duration>> rows,
    const std::string& account = "a") {
  std::vector<TraceJob> out;
  for (auto [submit, gpus, duration] : rows) {
    TraceJob j;
    j.id = static_cast<int64_t>(out.size()) + 1;
    j.submit = submit;
    j.gpus = gpus;
    j.duration = duration;
    j.account = j.user = account;
    out.push_back(j);
  }
  return out;
}

}  // namespace hachi::sim::testing
