// When a silent node's agent counts as lost, and when its jobs' fence passes (its lease,
// its kill grace and a margin after the server last heard from it: by then its agent
// has stopped them itself), and how both are worded. Pure functions; docs/fencing.md
// tells the protocol.
#pragma once

#include <cstdint>
#include <string>

#include "core/time.h"

namespace hachi::server {

struct FenceTimes {
  Duration lease = 0;       // seconds an agent runs on without the server
  Duration kill_grace = 0;  // SIGTERM -> SIGKILL
  Duration margin = 0;      // clock rates and a slow SIGKILL
};

// Whether an up node whose agent was last heard `silent_ms` ago (< 0: never, since this
// server started) is lost.
bool AgentLost(int64_t silent_ms, Duration agent_timeout);
// The lost node's reason.
std::string AgentLostReason(Duration agent_timeout);

// Milliseconds until a down node's fence passes; 0 when it has, or when its agent was
// never heard from since this server started (silent_ms < 0).
int64_t FenceLeftMs(int64_t silent_ms, const FenceTimes& times);

// `show job`'s reason for a RUNNING job on a down node whose fence has `left_ms` to go.
std::string FenceNote(const std::string& node, int64_t left_ms, bool requeues);

// The exit message of a part whose node's fence passed.
std::string FencedExitMessage(const std::string& node, const FenceTimes& times);

// Whether a RUNNING run that started at `start` (the server's clock) with `time_limit`
// (0: none) is overdue at `now`: past its limit by more than the lease, the kill grace
// and the margin. Its agent ends a run at its limit on its own monotonic clock and
// reports the exit; one still running here that long after is one its agent did not
// end (a clock or a bug on the node), and the server stops it. Not before this server
// has checked its agents for the lease and the margin (`checking_ms`): an exit an agent
// held through a server outage comes at its registration, just after.
bool RunOverdue(Time start, Duration time_limit, Time now, int64_t checking_ms,
                const FenceTimes& times);
// The reason an overdue run ends with (TIMEOUT, unless it ended by itself meanwhile).
std::string OverdueReason(Duration time_limit, Duration over);

}  // namespace hachi::server
