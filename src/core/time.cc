#include "core/time.h"

#include <cstdio>
#include <ctime>

namespace hachi {

std::string FormatDuration(Duration d) {
  if (d == kNever) return "never";
  char buf[48];
  const char* sign = d < 0 ? "-" : "";
  if (d < 0) d = -d;
  if (d < kMinute) {
    std::snprintf(buf, sizeof buf, "%s%llds", sign, static_cast<long long>(d));
  } else if (d < kHour) {
    std::snprintf(buf, sizeof buf, "%s%lldm%02llds", sign,
                  static_cast<long long>(d / kMinute),
                  static_cast<long long>(d % kMinute));
  } else if (d < kDay) {
    std::snprintf(buf, sizeof buf, "%s%lldh%02lldm", sign,
                  static_cast<long long>(d / kHour),
                  static_cast<long long>((d % kHour) / kMinute));
  } else {
    std::snprintf(buf, sizeof buf, "%s%lldd%02lldh", sign,
                  static_cast<long long>(d / kDay),
                  static_cast<long long>((d % kDay) / kHour));
  }
  return buf;
}

namespace {

// A time the C library cannot break down (past year 2^31) prints as its number.
std::string Strftime(Time t, const char* format, bool utc) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  if ((utc ? gmtime_r(&tt, &tm) : localtime_r(&tt, &tm)) == nullptr) {
    return std::to_string(t);
  }
  char buf[48];
  if (std::strftime(buf, sizeof buf, format, &tm) == 0) return std::to_string(t);
  return buf;
}

}  // namespace

std::string FormatIsoUtc(Time t) { return Strftime(t, "%Y-%m-%dT%H:%M:%SZ", true); }

std::string FormatSlurmLocal(Time t) { return Strftime(t, "%Y-%m-%dT%H:%M:%S", false); }

std::string FormatUtcReadable(Time t) {
  return Strftime(t, "%Y-%m-%d %H:%M:%S UTC", true);
}

}  // namespace hachi
