// Time windows (cluster.h TimeWindow): when a partition owns its window nodes. Times
// are the scheduler's `now` scale; `offset` (ClusterState::clock_offset) turns them
// into UTC seconds since the Unix epoch, whose days start at midnight UTC (day 0,
// 1970-01-01, was a Thursday). Pure functions; thread-safe.
#pragma once

#include <vector>

#include "core/time.h"
#include "sched/cluster.h"

namespace hachi::sched {

// One occurrence of a window: [start, end).
struct WindowSpan {
  Time start = kNever;
  Time end = kNever;
};

// The occurrence of any of `windows` that contains `t`, else the next one to start
// after `t` (within 8 days; {kNever, kNever} when none). A job of another partition may
// run over [t, t + d) on the window nodes iff t + d <= ActiveOrNext(...).start.
WindowSpan ActiveOrNext(const std::vector<TimeWindow>& windows, Time t, Duration offset);

// Appends the ends of the occurrences that end in (from, to] to `out` (unsorted).
void WindowEnds(const std::vector<TimeWindow>& windows, Time from, Time to,
                Duration offset, std::vector<Time>* out);

// "08:00-20:00", "22:00-06:00 Mon,Tue" (several windows joined by ", ").
std::string FormatWindows(const std::vector<TimeWindow>& windows);

}  // namespace hachi::sched
