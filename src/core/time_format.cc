#include "core/time_format.h"

#include <ctime>

namespace hachi {
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
