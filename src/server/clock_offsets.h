// What each agent's wall clock says against the server's (docs/fencing.md, "Clocks"):
// taken at every work poll from the agent's time in the request (its `clock_ms`), kept
// in memory -- an observation, not state: a restarted server learns it again at the
// next poll. Its error is the request's one-way delay. Limits and accounting never read
// an agent's wall clock; a large offset is a node problem (api/clock_offset.h), shown by
// `hachi show node` and `hachi doctor` and logged once when it goes past the bound and
// once when it comes back. Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/clock.h"
#include "core/mutex.h"

namespace hachi::server {

class ClockOffsets {
 public:
  explicit ClockOffsets(const Clock* clock) : clock_(clock) {}
  ClockOffsets(const ClockOffsets&) = delete;
  ClockOffsets& operator=(const ClockOffsets&) = delete;

  // The agent of `node` read `agent_ms` (its wall clock, ms since the epoch) as it sent
  // a request that arrives now.
  void Note(const std::string& node, int64_t agent_ms) EXCLUDES(mu_);
  // The node's latest offset (agent minus server, ms); none before its first.
  std::optional<int64_t> OffsetMs(const std::string& node) const EXCLUDES(mu_);

 private:
  const Clock* const clock_;
  mutable Mutex mu_;
  struct Seen {
    int64_t offset_ms = 0;
    bool problem = false;  // past the bound when last logged
  };
  std::unordered_map<std::string, Seen> nodes_ GUARDED_BY(mu_);
};

}  // namespace hachi::server
