// A strict reader of the Prometheus text exposition format 0.0.4, for tests: it parses
// a scrape into its samples and refuses what Prometheus (or promtool check metrics)
// would — bad names, bad escapes, a TYPE after samples or twice, a family split in
// two, duplicate series, histogram buckets out of order or without +Inf, _count that
// is not the +Inf bucket, a negative counter.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "server/metrics.h"

namespace hachi::server::testing {

struct Scrape {
  std::string error;  // empty: the text is valid
  // "name{a=\"x\",b=\"y\"}" (labels sorted, values unescaped) -> value.
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;  // family -> counter/gauge/histogram
  std::map<std::string, std::string> help;

  // The value of one series; NaN when absent.
  double Value(const std::string& name,
               std::vector<std::pair<std::string, std::string>> labels = {}) const {
    auto it = samples.find(Key(name, std::move(labels)));
    return it == samples.end() ? std::nan("") : it->second;
  }
  static std::string Key(const std::string& name,
                         std::vector<std::pair<std::string, std::string>> labels) {
    std::sort(labels.begin(), labels.end());
    std::string k = name + "{";
    for (size_t i = 0; i < labels.size(); ++i) {
      k += (i ? "," : "") + labels[i].first + "=\"" + labels[i].second + "\"";
    }
    return k + "}";
  }
};

namespace internal {

inline bool ParseValue(const std::string& s, double* v) {
  if (s == "+Inf" || s == "Inf") {
    *v = INFINITY;
    return true;
  }
  if (s == "-Inf") {
    *v = -INFINITY;
    return true;
  }
  if (s == "NaN") {
    *v = NAN;
    return true;
  }
  if (s.empty()) return false;
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && !std::isnan(*v) && !std::isinf(*v);
}

// The family a sample name belongs to, given the TYPEs seen.
inline std::string FamilyOf(const std::string& name,
                            const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (name.size() > s.size() &&
        name.compare(name.size() - s.size(), s.size(), s) == 0) {
      const std::string base = name.substr(0, name.size() - s.size());
      auto t = types.find(base);
      if (t != types.end() && t->second == "histogram") return base;
    }
  }
  return name;
}

}  // namespace internal

inline Scrape ParseScrape(const std::string& text) {
  Scrape out;
  auto fail = [&](int line, const std::string& why) {
    out.error = "line " + std::to_string(line) + ": " + why;
    return out;
  };
  if (!text.empty() && text.back() != '\n') return fail(0, "does not end with a newline");
  std::set<std::string> done_families;  // families whose samples ended
  std::string current;                  // family of the last sample
  std::set<std::string> sampled;        // families with samples
  // Histogram series: family + labels without le -> (le, count) in order, sum, count.
  struct Hist {
    std::vector<std::pair<double, double>> buckets;
    bool has_sum = false, has_count = false;
    double count = 0;
  };
  std::map<std::string, Hist> hists;
  size_t pos = 0;
  int n = 0;
  while (pos < text.size()) {
    const size_t eol = text.find('\n', pos);
    const std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++n;
    if (line.empty()) continue;
    if (line[0] == '#') {
      if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
        const bool is_type = line[2] == 'T';
        const std::string rest = line.substr(7);
        const size_t sp = rest.find(' ');
        const std::string name = rest.substr(0, sp);
        const std::string arg = sp == std::string::npos ? "" : rest.substr(sp + 1);
        if (!metrics::ValidMetricName(name))
          return fail(n, "bad metric name '" + name + "'");
        if (is_type) {
          if (arg != "counter" && arg != "gauge" && arg != "histogram" &&
              arg != "summary" && arg != "untyped") {
            return fail(n, "bad type '" + arg + "'");
          }
          if (out.types.count(name)) return fail(n, "second TYPE for " + name);
          if (sampled.count(name))
            return fail(n, "TYPE for " + name + " after its samples");
          out.types[name] = arg;
        } else {
          if (out.help.count(name)) return fail(n, "second HELP for " + name);
          for (size_t i = 0; i < arg.size(); ++i) {
            if (arg[i] == '\\' &&
                (i + 1 >= arg.size() || (arg[i + 1] != '\\' && arg[i + 1] != 'n'))) {
              return fail(n, "bad escape in HELP");
            }
            if (arg[i] == '\\') ++i;
          }
          out.help[name] = arg;
        }
      }
      continue;
    }
    // name{labels} value [timestamp]
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    const std::string name = line.substr(0, i);
    if (!metrics::ValidMetricName(name)) return fail(n, "bad metric name '" + name + "'");
    std::vector<std::pair<std::string, std::string>> labels;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos) return fail(n, "label without '='");
        const std::string lname = line.substr(i, eq - i);
        if (!metrics::ValidLabelName(lname))
          return fail(n, "bad label name '" + lname + "'");
        if (eq + 1 >= line.size() || line[eq + 1] != '"')
          return fail(n, "unquoted label value");
        std::string value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\') {
            if (j + 1 >= line.size()) return fail(n, "dangling escape");
            const char c = line[++j];
            if (c == '\\')
              value += '\\';
            else if (c == '"')
              value += '"';
            else if (c == 'n')
              value += '\n';
            else
              return fail(n, std::string("bad escape \\") + c);
          } else {
            value += line[j];
          }
        }
        if (j >= line.size()) return fail(n, "unterminated label value");
        for (const auto& l : labels) {
          if (l.first == lname) return fail(n, "label " + lname + " twice");
        }
        labels.emplace_back(lname, value);
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) return fail(n, "unterminated label set");
      ++i;  // '}'
    }
    if (i >= line.size() || line[i] != ' ') return fail(n, "no value");
    std::string rest = line.substr(i + 1);
    const size_t sp = rest.find(' ');
    const std::string vtext = rest.substr(0, sp);
    double v = 0;
    if (!internal::ParseValue(vtext, &v)) return fail(n, "bad value '" + vtext + "'");
    if (sp != std::string::npos) {
      const std::string ts = rest.substr(sp + 1);
      if (ts.empty() || ts.find_first_not_of("-0123456789") != std::string::npos) {
        return fail(n, "bad timestamp '" + ts + "'");
      }
    }
    const std::string family = internal::FamilyOf(name, out.types);
    if (family != current) {
      if (done_families.count(family))
        return fail(n, "family " + family + " split in two");
      if (!current.empty()) done_families.insert(current);
      current = family;
    }
    sampled.insert(family);
    const std::string key = Scrape::Key(name, labels);
    if (out.samples.count(key)) return fail(n, "duplicate series " + key);
    out.samples[key] = v;
    auto t = out.types.find(family);
    const std::string type = t == out.types.end() ? "untyped" : t->second;
    if (type == "counter" && !(v >= 0)) return fail(n, "negative counter " + key);
    if (type == "histogram") {
      std::vector<std::pair<std::string, std::string>> rest_labels;
      std::string le;
      for (const auto& l : labels) {
        if (l.first == "le")
          le = l.second;
        else
          rest_labels.push_back(l);
      }
      Hist& h = hists[Scrape::Key(family, rest_labels)];
      if (name == family + "_bucket") {
        double bound = 0;
        if (le.empty() || !internal::ParseValue(le, &bound))
          return fail(n, "bucket without le");
        if (!h.buckets.empty() && !(bound > h.buckets.back().first)) {
          return fail(n, "buckets out of order");
        }
        if (!h.buckets.empty() && v < h.buckets.back().second) {
          return fail(n, "bucket counts decrease");
        }
        h.buckets.emplace_back(bound, v);
      } else if (!le.empty()) {
        return fail(n, "le on a non-bucket sample");
      } else if (name == family + "_sum") {
        h.has_sum = true;
      } else if (name == family + "_count") {
        h.has_count = true;
        h.count = v;
      } else {
        return fail(n, "histogram sample " + name + " is not _bucket/_sum/_count");
      }
    }
  }
  for (const auto& [key, h] : hists) {
    if (h.buckets.empty() || !std::isinf(h.buckets.back().first)) {
      return fail(0, key + ": no +Inf bucket");
    }
    if (!h.has_sum || !h.has_count) return fail(0, key + ": no _sum or _count");
    if (h.count != h.buckets.back().second)
      return fail(0, key + ": _count != +Inf bucket");
  }
  return out;
}

}  // namespace hachi::server::testing
