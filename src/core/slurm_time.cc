#include "core/slurm_time.h"

#include <cctype>
#include <ctime>
#include <functional>
#include <optional>
#include <string>

#include "core/strings.h"

namespace hachi {
namespace {

Status Bad(std::string_view text) {
  return InvalidArgument("'" + std::string(text) +
                         "' is not a time (use HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], "
                         "now+N[unit], today, tomorrow, midnight, noon)");
}

// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void CivilFromDays(int64_t z, int64_t* y, int* m, int* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  *m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  *y = yoe + era * 400 + (*m <= 2);
}

int DaysInMonth(int64_t y, int m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

std::optional<int> Digits(std::string_view s, size_t n) {
  if (s.size() != n) return std::nullopt;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// "HH:MM[:SS]" -> seconds since midnight.
std::optional<int64_t> ClockTime(std::string_view s) {
  std::vector<std::string_view> p = Split(s, ':');
  if (p.size() < 2 || p.size() > 3) return std::nullopt;
  std::optional<int> h = p[0].size() == 1 ? Digits(p[0], 1) : Digits(p[0], 2);
  std::optional<int> m = Digits(p[1], 2);
  std::optional<int> sec = p.size() == 3 ? Digits(p[2], 2) : std::optional<int>(0);
  if (!h || !m || !sec || *h > 23 || *m > 59 || *sec > 59) return std::nullopt;
  return int64_t{*h} * 3600 + *m * 60 + *sec;
}

}  // namespace

int64_t LocalUtcOffset(Time t) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  if (localtime_r(&tt, &tm) == nullptr) return 0;
  return tm.tm_gmtoff;
}

namespace {

// "now", "now+N[unit]", "now-N[unit]": `rest` is what follows "now".
Result<Time> FromNow(std::string_view rest, Time now, std::string_view text) {
  if (rest.empty()) return now;
  const char sign = rest[0];
  if (sign != '+' && sign != '-') return Bad(text);
  rest.remove_prefix(1);
  size_t i = 0;
  while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i]))) ++i;
  if (i == 0 || i > 9) return Bad(text);
  const int64_t n = *ParseInt(rest.substr(0, i));
  const std::string unit(rest.substr(i));
  int64_t mult = 0;
  if (unit.empty() || unit == "s" || unit == "sec" || unit == "secs" ||
      unit == "second" || unit == "seconds") {
    mult = 1;
  } else if (unit == "m" || unit == "min" || unit == "mins" || unit == "minute" ||
             unit == "minutes") {
    mult = kMinute;
  } else if (unit == "h" || unit == "hour" || unit == "hours") {
    mult = kHour;
  } else if (unit == "d" || unit == "day" || unit == "days") {
    mult = kDay;
  } else if (unit == "w" || unit == "week" || unit == "weeks") {
    mult = 7 * kDay;
  } else {
    return Bad(text);
  }
  return sign == '+' ? now + n * mult : now - n * mult;
}

// HH:MM[:SS] [AM|PM]: the next time the clock shows it (`next_at`); nullopt for text
// of another form.
std::optional<Result<Time>> ClockOfDay(const std::string& s,
                                       const std::function<Time(int64_t)>& next_at,
                                       std::string_view text) {
  std::string t = s;
  int pm = -1;
  for (const char* suffix : {"am", "pm"}) {
    const std::string suf(suffix);
    if (t.size() > 2 && t.compare(t.size() - 2, 2, suf) == 0) {
      pm = suf == "pm";
      t = std::string(Trim(std::string_view(t).substr(0, t.size() - 2)));
    }
  }
  if (t.find('-') == std::string::npos && t.find('/') == std::string::npos &&
      t.find(':') != std::string::npos) {
    std::optional<int64_t> sod = ClockTime(t);
    if (!sod) return Bad(text);
    if (pm >= 0) {
      const int64_t h = *sod / kHour;
      if (h < 1 || h > 12) return Bad(text);
      *sod +=
          (pm == 1 && h != 12 ? 12 * kHour : 0) - (pm == 0 && h == 12 ? 12 * kHour : 0);
    }
    return next_at(*sod);
  }
  return std::nullopt;
}

// YYYY-MM-DD[THH:MM[:SS]], local time.
Result<Time> IsoDate(const std::string& s, int64_t utc_offset, std::string_view text) {
  std::optional<int> y = Digits(std::string_view(s).substr(0, 4), 4);
  std::optional<int> m = Digits(std::string_view(s).substr(5, 2), 2);
  std::optional<int> d = Digits(std::string_view(s).substr(8, 2), 2);
  if (!y || !m || !d || *m < 1 || *m > 12 || *d < 1 || *d > DaysInMonth(*y, *m)) {
    return Bad(text);
  }
  int64_t sod = 0;
  if (s.size() > 10) {
    if (s[10] != 't') return Bad(text);
    std::optional<int64_t> c = ClockTime(std::string_view(s).substr(11));
    if (!c) return Bad(text);
    sod = *c;
  }
  return DaysFromCivil(*y, *m, *d) * kDay - utc_offset + sod;
}

// MM/DD[/YY] or MMDD[YY] at local midnight; without a year, this year's unless that
// day is past (then next year's).
Result<Time> MonthDay(const std::string& s, int64_t local_now, int64_t today,
                      int64_t utc_offset, std::string_view text) {
  int month = 0, day = 0, year = -1;
  if (s.find('/') != std::string::npos) {
    std::vector<std::string_view> p = Split(s, '/');
    if (p.size() < 2 || p.size() > 3) return Bad(text);
    std::optional<int> m = Digits(p[0], p[0].size() == 1 ? 1 : 2);
    std::optional<int> d = Digits(p[1], p[1].size() == 1 ? 1 : 2);
    if (!m || !d) return Bad(text);
    month = *m;
    day = *d;
    if (p.size() == 3) {
      std::optional<int> yy = Digits(p[2], 2);
      if (!yy) return Bad(text);
      year = 2000 + *yy;
    }
  } else if (s.size() == 4 || s.size() == 6) {
    std::optional<int> m = Digits(std::string_view(s).substr(0, 2), 2);
    std::optional<int> d = Digits(std::string_view(s).substr(2, 2), 2);
    if (!m || !d) return Bad(text);
    month = *m;
    day = *d;
    if (s.size() == 6) {
      std::optional<int> yy = Digits(std::string_view(s).substr(4, 2), 2);
      if (!yy) return Bad(text);
      year = 2000 + *yy;
    }
  } else {
    return Bad(text);
  }
  int64_t cy = 0;
  int cm = 0, cd = 0;
  CivilFromDays(FloorDiv(local_now, kDay), &cy, &cm, &cd);
  const bool explicit_year = year >= 0;
  if (!explicit_year) year = static_cast<int>(cy);
  if (month < 1 || month > 12 || day < 1 || day > DaysInMonth(year, month)) {
    return Bad(text);
  }
  int64_t t = DaysFromCivil(year, month, day) * kDay - utc_offset;
  if (!explicit_year && t < today) {  // a day already past this year: next year's
    if (day > DaysInMonth(year + 1, month)) return Bad(text);
    t = DaysFromCivil(year + 1, month, day) * kDay - utc_offset;
  }
  return t;
}

}  // namespace

Result<Time> ParseSlurmTime(std::string_view text, Time now, int64_t utc_offset) {
  const std::string s = ToLower(Trim(text));
  if (s.empty()) return Bad(text);
  const int64_t local_now = now + utc_offset;
  const int64_t today = FloorDiv(local_now, kDay) * kDay - utc_offset;  // local 00:00
  const int64_t since_midnight = local_now - FloorDiv(local_now, kDay) * kDay;
  auto next_at = [&](int64_t sod) -> Time {  // the next time the clock shows sod
    return sod > since_midnight ? today + sod : today + kDay + sod;
  };
  if (s == "today") return today;
  if (s == "tomorrow") return today + kDay;
  if (s == "midnight") return today + kDay;
  if (s == "noon") return next_at(12 * kHour);
  if (s == "fika") return next_at(15 * kHour);
  if (s == "teatime") return next_at(16 * kHour);
  if (s.rfind("now", 0) == 0) return FromNow(std::string_view(s).substr(3), now, text);
  if (std::optional<Result<Time>> t = ClockOfDay(s, next_at, text)) return *t;
  if (s.size() >= 10 && s[4] == '-' && s[7] == '-') return IsoDate(s, utc_offset, text);
  return MonthDay(s, local_now, today, utc_offset, text);
}

}  // namespace hachi
