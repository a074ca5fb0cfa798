#include "sched/window.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace hachi::sched {
namespace {

constexpr int kLookAheadDays = 8;  // covers weekly patterns

Time FloorDiv(Time a, Time b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

bool OnDay(const TimeWindow& w, Time day) {
  if (w.days.empty()) return true;
  const int dow = static_cast<int>(((day + 4) % 7 + 7) % 7);  // day 0 was a Thursday
  return std::find(w.days.begin(), w.days.end(), dow) != w.days.end();
}

// Calls f(start, end) for every occurrence starting on days [first, last], in the
// caller's time scale.
template <typename F>
void ForEach(const std::vector<TimeWindow>& windows, Time first, Time last,
             Duration offset, F f) {
  for (Time day = first; day <= last; ++day) {
    for (const TimeWindow& w : windows) {
      if (!OnDay(w, day)) continue;
      const Time s = day * kDay + w.start_minute * kMinute - offset;
      Time e = day * kDay + w.end_minute * kMinute - offset;
      if (w.end_minute <= w.start_minute) e += kDay;
      f(s, e);
    }
  }
}

}  // namespace

WindowSpan ActiveOrNext(const std::vector<TimeWindow>& windows, Time t, Duration offset) {
  WindowSpan best;
  if (windows.empty()) return best;
  const Time day = FloorDiv(t + offset, kDay);
  ForEach(windows, day - 1, day + kLookAheadDays, offset, [&](Time s, Time e) {
    if (e <= t) return;
    if (s < best.start || (s == best.start && e > best.end)) best = {s, e};
  });
  return best;
}

void WindowEnds(const std::vector<TimeWindow>& windows, Time from, Time to,
                Duration offset, std::vector<Time>* out) {
  if (windows.empty() || to <= from) return;
  const Time first = FloorDiv(from + offset, kDay) - 1;
  const Time last = std::min(FloorDiv(to + offset, kDay), first + 1 + kLookAheadDays);
  ForEach(windows, first, last, offset, [&](Time, Time e) {
    if (e > from && e <= to) out->push_back(e);
  });
}

std::string FormatWindows(const std::vector<TimeWindow>& windows) {
  static const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  std::string out;
  for (const TimeWindow& w : windows) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%02d:%02d-%02d:%02d", w.start_minute / 60 % 24,
                  w.start_minute % 60, w.end_minute / 60 % 24, w.end_minute % 60);
    if (!out.empty()) out += ", ";
    out += buf;
    for (size_t i = 0; i < w.days.size(); ++i) {
      out += i == 0 ? " " : ",";
      out += w.days[i] >= 0 && w.days[i] < 7 ? kDays[w.days[i]] : "?";
    }
  }
  return out;
}

}  // namespace hachi::sched
