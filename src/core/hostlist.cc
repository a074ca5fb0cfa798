#include "core/hostlist.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

#include "core/strings.h"

namespace hachi {
namespace {

constexpr size_t kMaxHosts = 100000;

std::string Quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) return false;
  }
  return true;
}

// Splits at commas that are not inside brackets.
std::vector<std::string_view> SplitTopLevel(std::string_view s) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[') ++depth;
    if (s[i] == ']') --depth;
    if (s[i] == ',' && depth == 0) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  out.push_back(s.substr(start));
  return out;
}

// Appends prefix + each number of one bracket body ("0001-0016,20") + suffix.
Status ExpandGroup(std::string_view item, std::string_view prefix, std::string_view body,
                   std::string_view suffix, std::vector<std::string>* out) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument(Quoted(item) + " is not a node list: " + why +
                           " (use names and ranges like n[0001-0016])");
  };
  for (std::string_view part : Split(body, ',')) {
    part = Trim(part);
    const size_t dash = part.find('-');
    std::string_view lo = part.substr(0, dash);
    std::string_view hi = dash == std::string_view::npos ? lo : part.substr(dash + 1);
    if (!AllDigits(lo) || !AllDigits(hi) || lo.size() > 9 || hi.size() > 9) {
      return bad(Quoted(part) + " is not a number or a range");
    }
    const long long a = *ParseInt(lo), b = *ParseInt(hi);
    if (a > b) return bad("range " + Quoted(part) + " runs backwards");
    if (out->size() + static_cast<size_t>(b - a + 1) > kMaxHosts) {
      return bad("more than " + std::to_string(kMaxHosts) + " names");
    }
    const int width = lo.size() > 1 && lo[0] == '0' ? static_cast<int>(lo.size()) : 0;
    for (long long v = a; v <= b; ++v) {
      std::string digits = std::to_string(v);
      if (static_cast<int>(digits.size()) < width) {
        digits.insert(0, static_cast<size_t>(width) - digits.size(), '0');
      }
      out->push_back(std::string(prefix) + digits + std::string(suffix));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> ExpandHostList(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view item : SplitTopLevel(text)) {
    item = Trim(item);
    auto bad = [&](const std::string& why) {
      return InvalidArgument(Quoted(item) + " is not a node list: " + why +
                             " (use names and ranges like n[0001-0016])");
    };
    if (item.empty()) return bad("empty name");
    const size_t open = item.find('['), close = item.find(']');
    if (open == std::string_view::npos && close == std::string_view::npos) {
      for (char c : item) {
        if (std::isspace(static_cast<unsigned char>(c)) != 0) {
          return bad("a name has no spaces");
        }
      }
      if (out.size() >= kMaxHosts) return bad("too many names");
      out.emplace_back(item);
      continue;
    }
    if (open == std::string_view::npos || close == std::string_view::npos ||
        close < open || item.find('[', open + 1) != std::string_view::npos ||
        item.find(']', close + 1) != std::string_view::npos) {
      return bad("one [...] group per name");
    }
    HACHI_RETURN_IF_ERROR(ExpandGroup(item, item.substr(0, open),
                                      item.substr(open + 1, close - open - 1),
                                      item.substr(close + 1), &out));
  }
  return out;
}

}  // namespace hachi

// ---- Compressing (SLURM_JOB_NODELIST) ----

namespace hachi {
namespace {

struct Host {
  std::string digits;  // the trailing digits as written ("" when none)
  unsigned long long number = 0;
  // Zero-padded names only join names of their own width ("01"-"09"); unpadded ones
  // join any unpadded one ("9"-"10"), as Slurm's host ranges do.
  size_t width() const {
    return digits.size() > 1 && digits[0] == '0' ? digits.size() : 0;
  }
  bool operator<(const Host& o) const {
    return std::make_tuple(number, width(), digits) <
           std::make_tuple(o.number, o.width(), o.digits);
  }
  bool operator==(const Host& o) const { return digits == o.digits; }
};

}  // namespace

std::string CompressHostList(const std::vector<std::string>& hosts) {
  std::map<std::string, std::vector<Host>> groups;  // prefix -> hosts
  std::vector<std::string> plain;                   // names without trailing digits
  for (const std::string& h : hosts) {
    size_t cut = h.size();
    while (cut > 0 && h[cut - 1] >= '0' && h[cut - 1] <= '9') --cut;
    // Up to 18 digits fit the number; a longer run is a name of its own.
    if (cut == h.size() || h.size() - cut > 18) {
      plain.push_back(h);
      continue;
    }
    Host x;
    x.digits = h.substr(cut);
    x.number = std::stoull(x.digits);
    groups[h.substr(0, cut)].push_back(x);
  }
  std::map<std::string, std::string> parts;  // sorted by name: prefix or plain host
  for (std::string& p : plain) parts.emplace(p, p);
  for (auto& [prefix, list] : groups) {
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
    if (list.size() == 1) {
      parts.emplace(prefix + list[0].digits, prefix + list[0].digits);
      continue;
    }
    std::string ranges;
    for (size_t i = 0; i < list.size();) {
      size_t j = i;
      while (j + 1 < list.size() && list[j + 1].number == list[j].number + 1 &&
             list[j + 1].width() == list[i].width()) {
        ++j;
      }
      if (!ranges.empty()) ranges += ',';
      ranges += list[i].digits;
      if (j > i) ranges += "-" + list[j].digits;
      i = j + 1;
    }
    parts.emplace(prefix, prefix + "[" + ranges + "]");
  }
  std::string out;
  for (const auto& [key, text] : parts) {
    if (!out.empty()) out += ',';
    out += text;
  }
  return out;
}

}  // namespace hachi
