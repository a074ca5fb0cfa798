#include "config/values.h"

#include <cctype>

#include "core/strings.h"

namespace hachi::config {
namespace {

std::string Quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) return false;
  }
  return true;
}

}  // namespace

Result<Duration> ParseDuration(std::string_view text) {
  const std::string_view s = Trim(text);
  auto bad = [&] {
    return InvalidArgument(Quoted(text) + " is not a duration (use 30m, 4h, 7d)");
  };
  if (s.empty()) return bad();
  constexpr Duration kMax = 3650 * kDay;
  Duration total = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])) != 0) ++j;
    if (j == i || j == s.size() || j - i > 9) return bad();
    const long long n = *ParseInt(s.substr(i, j - i));
    Duration unit = 0;
    switch (s[j]) {
      case 's':
        unit = 1;
        break;
      case 'm':
        unit = kMinute;
        break;
      case 'h':
        unit = kHour;
        break;
      case 'd':
        unit = kDay;
        break;
      case 'w':
        unit = 7 * kDay;
        break;
      default:
        return bad();
    }
    total += n * unit;
    if (total > kMax) {
      return InvalidArgument(Quoted(text) + " is longer than 3650d");
    }
    i = j + 1;
  }
  return total;
}

Result<int> ParseTimeOfDay(std::string_view text, bool allow_24) {
  const std::string_view s = Trim(text);
  auto bad = [&] {
    return InvalidArgument(Quoted(text) + " is not a time of day (use HH:MM, e.g. 08:00" +
                           (allow_24 ? std::string(" or 24:00)") : std::string(")")));
  };
  if (s.size() != 5 || s[2] != ':' || !AllDigits(s.substr(0, 2)) ||
      !AllDigits(s.substr(3, 2))) {
    return bad();
  }
  const int h = static_cast<int>(*ParseInt(s.substr(0, 2)));
  const int m = static_cast<int>(*ParseInt(s.substr(3, 2)));
  if (m > 59 || h > 24 || (h == 24 && (m != 0 || !allow_24))) return bad();
  return h * 60 + m;
}

Result<int64_t> ParseSizeMib(std::string_view text) {
  const Status bad =
      InvalidArgument(Quoted(std::string(text)) + " is not a size (use 512M, 64G, 1T)");
  if (text.size() < 2) return bad;
  const char unit =
      static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
  std::optional<long long> n = ParseInt(text.substr(0, text.size() - 1));
  if (!n || *n < 1 || *n > (int64_t{1} << 40)) return bad;
  int64_t mib = 0;
  switch (unit) {
    case 'K':
      mib = (*n + 1023) / 1024;
      break;
    case 'M':
      mib = *n;
      break;
    case 'G':
      mib = *n * 1024;
      break;
    case 'T':
      mib = *n * 1024 * 1024;
      break;
    default:
      return bad;
  }
  if (mib > (int64_t{64} << 20))
    return InvalidArgument(Quoted(std::string(text)) + " is more than 64T");
  return mib;
}

Result<int> ParseWeekday(std::string_view text) {
  static constexpr std::string_view kDays[] = {
      "sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"};
  const std::string s = ToLower(Trim(text));
  for (int d = 0; d < 7; ++d) {
    if (s == kDays[d] || (s.size() == 3 && kDays[d].substr(0, 3) == s)) return d;
  }
  return InvalidArgument(Quoted(text) +
                         " is not a day of the week (use mon, tue, wed, "
                         "thu, fri, sat, sun)");
}

namespace {

bool IsBlank(char k) { return k == ' ' || k == '\t' || k == '\r'; }

Status NonAscii(int line, const char* where) {
  return InvalidArgument(std::to_string(line) + ": a non-ASCII character " + where);
}

// A multi-line string from text[*pos] (its opening quotes) to past its closing ones;
// counts the lines it spans.
Status SkipMultiLineString(std::string_view text, size_t* pos, int* line) {
  auto at = [&](size_t i, std::string_view s) { return text.substr(i, s.size()) == s; };
  size_t i = *pos;
  const char c = text[i];
  const std::string_view quotes = text.substr(i, 3);
  const bool basic = c == '"';
  i += 3;
  while (i < text.size() && !at(i, quotes)) {
    if (text[i] == '\n') ++*line;
    if (basic && text[i] == '\\') {
      // toml++ classifies the character after a backslash; after a line-ending
      // backslash, also every character it trims and the first one it keeps, which
      // may start another escape.
      ++i;
      const bool line_ending = i < text.size() && (IsBlank(text[i]) || text[i] == '\n');
      while (i < text.size() && (IsBlank(text[i]) || text[i] == '\n')) {
        if (text[i] == '\n') ++*line;
        ++i;
      }
      if (i < text.size() && static_cast<unsigned char>(text[i]) >= 0x80) {
        return NonAscii(*line, "after a backslash in a multi-line string");
      }
      if (!line_ending && i < text.size() && !at(i, quotes)) ++i;  // the escaped one
      continue;
    }
    ++i;
  }
  i += 3;
  while (i < text.size() && text[i] == c) ++i;  // """a"""" ends in a quote
  *pos = i;
  return Status::Ok();
}

// Where toml++ is, as far as this matters: inside which arrays ('a'), inline tables
// ('t') and table headers ('h'); whether a key or a value comes next; and whether it
// is inside a bare key or value (`gpu8`, `7d`, `-d"x"`).
struct TomlPlace {
  std::string open;
  bool in_key = true;
  bool bare = false;
};

// The character at text[*pos], which is none of: blank, newline, quote, comment,
// non-ASCII; `first`: only blanks before it on its line. Moves *pos past it.
Status Structure(std::string_view text, size_t* pos, bool first, int line, TomlPlace* p) {
  auto key_start = [](char k) {
    return std::isalnum(static_cast<unsigned char>(k)) != 0 || k == '_' || k == '-' ||
           k == '"' || k == '\'';
  };
  size_t& i = *pos;
  switch (text[i]) {
    case '=':
      p->in_key = false;
      break;
    case '.':
      break;
    case '[':
      if (p->open.empty() && first && p->in_key) {
        // A table header: toml++ 3.3 assumes a name follows (`[` then a newline
        // breaks its precondition, a __builtin_assume under clang: upstream #301).
        if (text.substr(i, 2) == "[[") ++i;
        size_t k = i + 1;
        while (k < text.size() && IsBlank(text[k])) ++k;
        if (k >= text.size() || !key_start(text[k])) {
          return InvalidArgument(std::to_string(line) +
                                 ": a table header without a name");
        }
        p->open.push_back('h');
      } else {
        p->open.push_back('a');
        p->in_key = false;
      }
      break;
    case '{':
      p->open.push_back('t');
      p->in_key = true;
      break;
    case ',':
      p->in_key = !p->open.empty() && p->open.back() == 't';
      break;
    case ']':
    case '}':
      if (!p->open.empty()) p->open.pop_back();
      p->in_key = !p->open.empty() && p->open.back() == 'h';
      break;
    default:
      p->bare = true;  // a bare key or value starts
  }
  ++i;
  return Status::Ok();
}

}  // namespace

// toml++ reads a bare key up to a blank, `.`, `=` or `]`, a bare value up to a blank,
// `,`, `]`, `}` or `#`, and classifies every character on the way, quotes included: a
// quote there opens no string.
Status CheckTomlText(std::string_view text) {
  int line = 1;
  auto at = [&](size_t i, std::string_view s) { return text.substr(i, s.size()) == s; };
  TomlPlace place;
  bool line_start = true;                               // only blanks so far on this line
  size_t i = StartsWith(text, "\xEF\xBB\xBF") ? 3 : 0;  // UTF-8 byte-order mark
  while (i < text.size()) {
    const char c = text[i];
    const bool first = line_start;
    if (!IsBlank(c)) line_start = c == '\n';
    if (c == '\n') {
      ++line;
      ++i;
      place.bare = false;
      if (place.open.empty() || place.open.back() != 'a') {  // only arrays span lines
        place.open.clear();
        place.in_key = true;
      }
      continue;
    }
    if (place.bare) {
      const bool ends =
          IsBlank(c) || (place.in_key ? c == '.' || c == '=' || c == ']'
                                      : c == ',' || c == ']' || c == '}' || c == '#');
      if (!ends) {
        if (static_cast<unsigned char>(c) >= 0x80)
          return NonAscii(line, "outside a string or comment");
        ++i;
        continue;
      }
      place.bare = false;  // and `c` is read below
    }
    if (IsBlank(c)) {
      ++i;
    } else if (c == '#') {  // a comment: to the end of the line, anything goes
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (at(i, "\"\"\"") || at(i, "'''")) {
      HACHI_RETURN_IF_ERROR(SkipMultiLineString(text, &i, &line));
    } else if (c == '"' || c == '\'') {
      ++i;  // a one-line string; toml++ ends it at a newline
      while (i < text.size() && text[i] != c && text[i] != '\n') {
        if (c == '"' && text[i] == '\\' && i + 1 < text.size() && text[i + 1] != '\n')
          ++i;
        ++i;
      }
      if (i < text.size() && text[i] == c) ++i;
    } else if (static_cast<unsigned char>(c) >= 0x80) {
      return NonAscii(line, "outside a string or comment");
    } else {
      HACHI_RETURN_IF_ERROR(Structure(text, &i, first, line, &place));
    }
  }
  return Status::Ok();
}

}  // namespace hachi::config
