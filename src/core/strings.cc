#include "core/strings.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/printable.h"

namespace hachi {

std::string_view Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

std::vector<std::string_view> SplitLines(std::string_view s) {
  std::vector<std::string_view> out = Split(s, '\n');
  for (auto& line : out) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  }
  if (!out.empty() && out.back().empty()) out.pop_back();
  return out;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::optional<long long> ParseInt(std::string_view s) {
  long long v = 0;
  if (s.empty()) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<std::string> ReadFile(const std::string& path, std::string* error) {
  // open(2) rather than std::ifstream, for O_NOCTTY: the daemons read files with this,
  // and a session leader without a controlling terminal (hachi dev under setsid or a
  // service manager) that opens a terminal without it acquires one.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    if (error) *error = "cannot open '" + path + "': " + std::strerror(errno);
    return std::nullopt;
  }
  std::string why;
  std::optional<std::string> out = ReadFd(fd, SIZE_MAX, &why);
  ::close(fd);
  if (!out && error) *error = "cannot read '" + path + "': " + why;
  return out;
}

std::optional<std::string> ReadFd(int fd, size_t max_bytes, std::string* error) {
  std::string out;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (error) *error = std::strerror(errno);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      if (error) *error = "more than " + std::to_string(max_bytes) + " bytes";
      return std::nullopt;
    }
  }
  return out;
}

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string StripAnsiEscapes(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\x1b') {
      out += s[i];
      continue;
    }
    if (i + 1 < s.size() && s[i + 1] == '[') {
      // CSI: parameter and intermediate bytes (0x20-0x3F), then one final byte 0x40-0x7E.
      size_t j = i + 2;
      while (j < s.size() && s[j] >= 0x20 && s[j] <= 0x3F) ++j;
      i = j < s.size() && s[j] >= 0x40 && s[j] <= 0x7E ? j : j - 1;
    } else if (i + 1 < s.size()) {
      ++i;  // a two-byte escape
    }
  }
  return out;
}

std::string PrintableText(std::string_view s) {
  auto control = [&](size_t i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return 1;
    if (c == 0xc2 && i + 1 < s.size()) {
      const auto d = static_cast<unsigned char>(s[i + 1]);
      if (d >= 0x80 && d <= 0x9f) return 2;
    }
    return 0;
  };
  size_t i = 0;
  while (i < s.size() && control(i) == 0) ++i;
  if (i == s.size()) return std::string(s);  // the common case: nothing to escape
  std::string out(s.substr(0, i));
  static constexpr char kHex[] = "0123456789abcdef";
  for (; i < s.size(); ++i) {
    const int n = control(i);
    if (n == 0) {
      out += s[i];
      continue;
    }
    for (int k = 0; k < n; ++k, ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
    --i;
  }
  return out;
}

std::string BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string Clip(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return std::string(s);
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return std::string(s.substr(0, cut)) + "...";
}

}  // namespace hachi
