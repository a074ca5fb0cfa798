#include "core/hostlist.h"

#include <algorithm>
#include <map>
#include <tuple>

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
