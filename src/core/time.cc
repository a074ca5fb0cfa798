#include "core/time.h"

#include <cstdio>

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

}  // namespace hachi
