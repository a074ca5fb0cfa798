#include "server/fence.h"

#include <algorithm>

namespace hachi::server {

bool AgentLost(int64_t silent_ms, Duration agent_timeout) {
  return silent_ms < 0 || silent_ms > agent_timeout * 1000;
}

std::string AgentLostReason(Duration agent_timeout) {
  return "agent silent for more than " + FormatDuration(agent_timeout);
}

int64_t FenceLeftMs(int64_t silent_ms, const FenceTimes& times) {
  if (silent_ms < 0) return 0;  // never heard from since this server started
  const int64_t fence_ms = (times.lease + times.kill_grace + times.margin) * 1000;
  return std::max<int64_t>(0, fence_ms - silent_ms);
}

std::string FenceNote(const std::string& node, int64_t left_ms, bool requeues) {
  return "waiting for node " + node + "'s lease to expire before " +
         (requeues ? "requeue" : "ending it NODE_FAIL") + ", " +
         std::to_string((left_ms + 999) / 1000) + " s";
}

std::string FencedExitMessage(const std::string& node, const FenceTimes& times) {
  return "node " + node + " down: no contact with its agent for " +
         FormatDuration(times.lease) + " (its lease) + " +
         FormatDuration(times.kill_grace) + " (kill grace) + " +
         FormatDuration(times.margin);
}

bool RunOverdue(Time start, Duration time_limit, Time now, int64_t checking_ms,
                const FenceTimes& times) {
  if (time_limit <= 0) return false;
  const Duration after = times.lease + times.kill_grace + times.margin;
  return checking_ms >= (times.lease + times.margin) * 1000 &&
         now > start + time_limit + after;
}

std::string OverdueReason(Duration time_limit, Duration over) {
  return "time limit " + FormatDuration(time_limit) + ": still running " +
         FormatDuration(over) +
         " past it on the server's clock (its node did not end "
         "it), stopped by the server";
}

}  // namespace hachi::server
