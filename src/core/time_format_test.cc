#include "core/time_format.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <string>

namespace hachi {
namespace {

constexpr Time kAt = 1795979885;  // 2026-11-29T19:18:05Z

struct Case {
  const char* name;
  std::string (*format)(Time);
  Time t;
  std::string tz;  // the local zone FormatSlurmLocal reads
  std::string want;
};

TEST(FormatTimeTest, Table) {
  const Case cases[] = {
      {"iso utc", FormatIsoUtc, kAt, "UTC", "2026-11-29T19:18:05Z"},
      {"iso utc ignores TZ", FormatIsoUtc, kAt, "UTC-9", "2026-11-29T19:18:05Z"},
      {"iso utc epoch", FormatIsoUtc, 0, "UTC", "1970-01-01T00:00:00Z"},
      {"slurm local in UTC", FormatSlurmLocal, kAt, "UTC", "2026-11-29T19:18:05"},
      {"slurm local east", FormatSlurmLocal, kAt, "UTC-9", "2026-11-30T04:18:05"},
      {"readable utc", FormatUtcReadable, kAt, "UTC-9", "2026-11-29 19:18:05 UTC"},
  };
  const char* old_tz = std::getenv("TZ");
  const std::string saved = old_tz == nullptr ? "" : old_tz;
  for (const Case& c : cases) {
    setenv("TZ", c.tz.c_str(), 1);
    tzset();
    EXPECT_EQ(c.format(c.t), c.want) << c.name;
  }
  if (old_tz == nullptr) {
    unsetenv("TZ");
  } else {
    setenv("TZ", saved.c_str(), 1);
  }
  tzset();
}

}  // namespace
}  // namespace hachi
