#include "core/hostlist.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <utility>

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

// One name split as Slurm's hostlist splits it: a prefix and its trailing digits.
// `width` is the digit count as written: Slurm prints a range's numbers zero-padded to
// its width, so "01" (width 2) and "1" (width 1) are different names.
struct Host {
  unsigned long long number = 0;
  int width = 0;
  bool padded() const { return Digits(number) < width; }
  static int Digits(unsigned long long n) {
    int d = 1;
    while (n >= 10) n /= 10, ++d;
    return d;
  }
  // Slurm's sort (hostrange_cmp): names whose widths are equivalent (WidthsJoin) sort
  // by number, others by width. An unpadded number of L digits joins padded widths up
  // to L, so it sorts after those and before wider ones: this key orders every pair
  // as that comparison does, and is a total order.
  std::pair<int, unsigned long long> SortKey() const {
    return {padded() ? 2 * width - 1 : 2 * Digits(number), number};
  }
};

// Zeros needed to print n at `width` digits.
int PadOf(unsigned long long n, int width) {
  return std::max(0, width - Host::Digits(n));
}

// Whether numbers n (printed at *wn digits) and m (at *wm) can share one width without
// changing how either prints; if so, sets both to that width (Slurm's _width_equiv).
// So "9"+"10" join ("n[9-10]"), "08"+"10" join ("gpu[08-10]"), "01"+"2" do not.
bool WidthsJoin(unsigned long long n, int* wn, unsigned long long m, int* wm) {
  if (*wn == *wm) return true;
  const bool n_same = PadOf(n, *wn) == PadOf(n, *wm);
  const bool m_same = PadOf(m, *wm) == PadOf(m, *wn);
  if (!n_same && !m_same) return false;
  if (n_same) {
    *wn = *wm;
  } else {
    *wm = *wn;
  }
  return true;
}

std::string Padded(unsigned long long n, int width) {
  std::string s = std::to_string(n);
  if (static_cast<int>(s.size()) < width) s.insert(0, width - s.size(), '0');
  return s;
}

// The bracket body of one prefix's hosts, sorted by SortKey: runs of consecutive
// numbers whose widths join become "lo-hi".
std::string RangesOf(std::vector<Host> hosts) {
  std::string out;
  for (size_t i = 0; i < hosts.size();) {
    int width = hosts[i].width;
    size_t j = i;
    while (
        j + 1 < hosts.size() && hosts[j + 1].number == hosts[j].number + 1 &&
        WidthsJoin(hosts[i].number, &width, hosts[j + 1].number, &hosts[j + 1].width)) {
      ++j;
    }
    if (!out.empty()) out += ',';
    out += Padded(hosts[i].number, width);
    if (j > i) out += "-" + Padded(hosts[j].number, width);
    i = j + 1;
  }
  return out;
}

}  // namespace

std::string CompressHostList(const std::vector<std::string>& hosts) {
  // Keyed by prefix; a name without trailing digits is its own prefix and sorts before
  // the numbered names of that prefix (Slurm: "n,n[1-2]").
  std::map<std::pair<std::string, bool>, std::vector<Host>> groups;
  for (const std::string& h : hosts) {
    size_t cut = h.size();
    while (cut > 0 && h[cut - 1] >= '0' && h[cut - 1] <= '9') --cut;
    // Up to 18 digits fit the number; a longer run is a name of its own.
    if (cut == h.size() || h.size() - cut > 18) {
      groups[{h, false}];
      continue;
    }
    Host x;
    x.number = std::stoull(h.substr(cut));
    x.width = static_cast<int>(h.size() - cut);
    groups[{h.substr(0, cut), true}].push_back(x);
  }
  std::string out;
  for (auto& [key, list] : groups) {
    if (!out.empty()) out += ',';
    out += key.first;
    if (!key.second) continue;
    std::sort(list.begin(), list.end(),
              [](const Host& a, const Host& b) { return a.SortKey() < b.SortKey(); });
    list.erase(std::unique(list.begin(), list.end(),
                           [](const Host& a, const Host& b) {
                             return a.number == b.number && a.width == b.width;
                           }),
               list.end());
    if (list.size() == 1) {
      out += Padded(list[0].number, list[0].width);
    } else {
      out += "[" + RangesOf(std::move(list)) + "]";
    }
  }
  return out;
}

}  // namespace hachi
