#include "server/clock_offsets.h"

#include <iostream>

#include "api/clock_offset.h"

namespace hachi::server {

void ClockOffsets::Note(const std::string& node, int64_t agent_ms) {
  const int64_t offset = agent_ms - clock_->NowMicros() / 1000;
  const bool problem = api::ClockOffsetIsProblem(offset);
  bool changed = false;
  {
    MutexLock lock(&mu_);
    auto [it, added] = nodes_.try_emplace(node);
    it->second.offset_ms = offset;
    changed = it->second.problem != problem;
    it->second.problem = problem;
  }
  if (!changed) return;
  if (problem) {
    std::cerr << "hachi server: node " << node << ": its clock is "
              << api::FormatClockOffset(offset)
              << " off the server's: fix its time sync (chrony, NTP); jobs are not "
                 "affected, but its logs' times are\n";
  } else {
    std::cerr << "hachi server: node " << node << ": its clock agrees with the server's "
              << "again (" << api::FormatClockOffset(offset) << ")\n";
  }
}

std::optional<int64_t> ClockOffsets::OffsetMs(const std::string& node) const {
  MutexLock lock(&mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return std::nullopt;
  return it->second.offset_ms;
}

}  // namespace hachi::server
