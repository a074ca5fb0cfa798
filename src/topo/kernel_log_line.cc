#include "topo/kernel_log_line.h"

#include <array>
#include <cctype>

#include "core/strings.h"

namespace hachi::topo {
namespace {

// What one format's reader makes of a line. The formats' headers do not overlap, and the
// first reader that knows its header decides: a record it rejects is not read again as
// another format's.
enum class Verdict {
  kOtherFormat,  // not this format's header
  kRejected,     // this format, but not the kernel's own line
  kKernel,       // *out is set
};

bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool IsLower(char c) { return c >= 'a' && c <= 'z'; }

// A whole run of 1..18 decimal digits (no sign, no space).
std::optional<long long> Digits(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  for (char c : s) {
    if (!IsDigit(c)) return std::nullopt;
  }
  return ParseInt(s);
}

// A syslog priority is facility * 8 + level; the kernel's facility is 0. The kernel
// files what userspace writes to /dev/kmsg under LOG_USER (1) even when it asks for
// "<0>"-"<7>".
bool KernelFacility(long long pri) { return pri >= 0 && pri < 8; }

// Strips "[  12.345678] " (dmesg's seconds since boot) or "[Mon Mar  3 10:01:02 2026] "
// (dmesg -T) off the front; false when `s` does not start with one.
bool TakeDmesgStamp(std::string_view& s) {
  if (s.size() < 4 || s[0] != '[') return false;
  size_t i = 1;
  for (; i < s.size() && s[i] != ']'; ++i) {
    const char c = s[i];
    const bool stamp_char = IsDigit(c) || std::isalpha(static_cast<unsigned char>(c)) ||
                            c == ' ' || c == '.' || c == ':' || c == ',' || c == '+' ||
                            c == '-';
    if (!stamp_char || i > 40) return false;
  }
  if (i == 1 || i + 1 >= s.size() || s[i] != ']' || s[i + 1] != ' ') return false;
  bool digit = false;
  for (size_t k = 1; k < i; ++k) digit = digit || IsDigit(s[k]);
  if (!digit) return false;
  s.remove_prefix(i + 2);
  return true;
}

// /dev/kmsg: "PRI,SEQ,USEC,FLAGS[,more fields];MESSAGE" (the kernel's
// Documentation/ABI/testing/dev-kmsg). FLAGS '+' marks a fragment that continues the
// previous record (older kernels): not the start of a message.
Verdict KmsgRecord(std::string_view line, KernelLogLine* out) {
  if (line.empty() || !IsDigit(line[0])) return Verdict::kOtherFormat;
  const size_t semi = line.find(';');
  if (semi == std::string_view::npos) return Verdict::kOtherFormat;
  const std::vector<std::string_view> f = Split(line.substr(0, semi), ',');
  if (f.size() < 4) return Verdict::kOtherFormat;
  const std::optional<long long> pri = Digits(f[0]), seq = Digits(f[1]),
                                 usec = Digits(f[2]);
  if (!pri || !seq || !usec) return Verdict::kOtherFormat;
  if (!KernelFacility(*pri) || f[3].find('+') != std::string_view::npos) {
    return Verdict::kRejected;
  }
  out->message = line.substr(semi + 1);
  out->kmsg_usec = static_cast<uint64_t>(*usec);
  return Verdict::kKernel;
}

// `dmesg -x`: "kern  :err   : [  12.345678] MESSAGE" (the stamp left out under -t).
Verdict DmesgDecoded(std::string_view line, KernelLogLine* out) {
  constexpr std::array<std::string_view, 8> kLevels = {
      "emerg", "alert", "crit", "err", "warn", "notice", "info", "debug"};
  size_t i = 0;
  while (i < line.size() && IsLower(line[i])) ++i;
  const std::string_view facility = line.substr(0, i);
  while (i < line.size() && line[i] == ' ') ++i;
  if (facility.empty() || i >= line.size() || line[i] != ':')
    return Verdict::kOtherFormat;
  const size_t level_at = ++i;
  while (i < line.size() && IsLower(line[i])) ++i;
  const std::string_view level = line.substr(level_at, i - level_at);
  while (i < line.size() && line[i] == ' ') ++i;
  bool known_level = false;
  for (std::string_view l : kLevels) known_level = known_level || l == level;
  if (!known_level || line.substr(i, 2) != ": ") return Verdict::kOtherFormat;
  if (facility != "kern") return Verdict::kRejected;
  std::string_view message = line.substr(i + 2);
  TakeDmesgStamp(message);
  out->message = message;
  return Verdict::kKernel;
}

// `dmesg -r` and syslog(2): "<3>[  12.345678] MESSAGE". util-linux 2.38 prints a
// record's level there but not always its facility, so a priority below 8 does not prove
// the kernel wrote it; one above does prove it did not.
Verdict DmesgRaw(std::string_view line, KernelLogLine* out) {
  if (line.empty() || line[0] != '<') return Verdict::kOtherFormat;
  const size_t close = line.find('>');
  if (close == std::string_view::npos || close > 4) return Verdict::kOtherFormat;
  const std::optional<long long> pri = Digits(line.substr(1, close - 1));
  if (!pri) return Verdict::kOtherFormat;
  if (!KernelFacility(*pri)) return Verdict::kRejected;
  std::string_view message = line.substr(close + 1);
  TakeDmesgStamp(message);
  out->message = message;
  return Verdict::kKernel;
}

// `dmesg`: "[  12.345678] MESSAGE" or, under -T, "[Mon Mar  3 10:01:02 2026] MESSAGE".
Verdict Dmesg(std::string_view line, KernelLogLine* out) {
  std::string_view message = line;
  if (!TakeDmesgStamp(message)) return Verdict::kOtherFormat;
  out->message = message;
  return Verdict::kKernel;
}

// Strips a syslog date and the space after it: "Mar  3 10:01:02[.123456] " (RFC 3164,
// journalctl's default) or "2026-03-03T10:01:02[.123456][+00:00] " (RFC 3339,
// journalctl -o short-iso, rsyslog's high-precision stamps).
bool TakeSyslogDate(std::string_view& s) {
  constexpr std::array<std::string_view, 12> kMonths = {"Jan ", "Feb ", "Mar ", "Apr ",
                                                        "May ", "Jun ", "Jul ", "Aug ",
                                                        "Sep ", "Oct ", "Nov ", "Dec "};
  auto time_char = [](char c) {
    return IsDigit(c) || c == ':' || c == '.' || c == ',' || c == '+' || c == '-' ||
           c == 'T' || c == 'Z';
  };
  size_t i = 0;
  bool month = false;
  for (std::string_view m : kMonths) month = month || StartsWith(s, m);
  if (month) {
    i = 4;
    if (i < s.size() && s[i] == ' ') ++i;
    const size_t day = i;
    while (i < s.size() && IsDigit(s[i])) ++i;
    if (i == day || i - day > 2 || i >= s.size() || s[i] != ' ') return false;
    ++i;
  } else if (s.size() < 11 || !IsDigit(s[0]) || s[4] != '-' || s[10] != 'T') {
    return false;
  }
  const size_t time = i;
  while (i < s.size() && time_char(s[i])) ++i;
  if (i - time < 8 || i >= s.size() || s[i] != ' ') return false;
  s.remove_prefix(i + 1);
  return true;
}

// syslog (/var/log/kern.log) and `journalctl -k`: "DATE HOST kernel: MESSAGE", where an
// older rsyslog keeps the kernel's "[  12.345678] " stamp in front of the message.
// journalctl indents a message's further lines under its first.
Verdict Syslog(std::string_view line, KernelLogLine* out) {
  std::string_view rest = line;
  if (!TakeSyslogDate(rest)) return Verdict::kOtherFormat;
  const size_t space = rest.find(' ');
  if (space == 0 || space == std::string_view::npos) return Verdict::kOtherFormat;
  rest.remove_prefix(space + 1);
  constexpr std::string_view kKernelTag = "kernel: ";
  if (!StartsWith(rest, kKernelTag)) return Verdict::kRejected;  // a program's line
  rest.remove_prefix(kKernelTag.size());
  TakeDmesgStamp(rest);
  out->message = rest;
  return Verdict::kKernel;
}

using Reader = Verdict (*)(std::string_view, KernelLogLine*);

// /dev/kmsg itself has one format; a saved log may have any of these.
constexpr Reader kKmsgFormats[] = {KmsgRecord};
constexpr Reader kSavedFormats[] = {KmsgRecord, DmesgDecoded, DmesgRaw, Dmesg, Syslog};

template <size_t N>
std::optional<KernelLogLine> Read(const Reader (&formats)[N], std::string_view line) {
  for (Reader read : formats) {
    KernelLogLine out;
    switch (read(line, &out)) {
      case Verdict::kOtherFormat:
        continue;
      case Verdict::kRejected:
        return std::nullopt;
      case Verdict::kKernel:
        return out;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<KernelLogLine> SplitKernelLogLine(std::string_view line,
                                                KernelLogSource source) {
  switch (source) {
    case KernelLogSource::kKmsg:
      return Read(kKmsgFormats, line);
    case KernelLogSource::kSavedText:
      return Read(kSavedFormats, line);
  }
  return std::nullopt;
}

}  // namespace hachi::topo
