// Internal to src/config/: reads typed values out of a toml++ tree, naming the file,
// line and key path in every error ("cluster.toml:12: partition[1].max_time: ...").
// Includes toml++: include it only from src/config/*.cc, never from a header others
// include (compile time, STYLE.md). Thread-compatible.
#pragma once

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/cluster_config.h"
#include "config/values.h"
#include "core/strings.h"

namespace hachi::config::internal {

using Keys = std::initializer_list<std::string_view>;

inline std::string Quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

// A key as it appears in a path: bare when TOML allows it, else quoted.
inline std::string PathKey(std::string_view k) {
  const bool bare = !k.empty() && std::all_of(k.begin(), k.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
  });
  return bare ? std::string(k) : "\"" + std::string(k) + "\"";
}

inline std::string Join(std::string_view path, std::string_view key) {
  return path.empty() ? PathKey(key) : std::string(path) + "." + PathKey(key);
}

inline std::string TypeName(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a number";
    case toml::node_type::boolean:
      return "a boolean";
    default:
      return "a date or time";
  }
}

class Reader {
 public:
  explicit Reader(std::string_view origin) : origin_(origin) {}

  std::string Where(const toml::source_region& src, std::string_view path) const {
    return origin_ + ":" + std::to_string(src.begin.line) + ": " + std::string(path);
  }
  Status Error(const toml::node& n, std::string_view path, const std::string& msg) const {
    return InvalidArgument(Where(n.source(), path) + ": " + msg);
  }

  // Unknown keys are errors that list the known ones.
  Status CheckKeys(const toml::table& t, std::string_view path, Keys known) const {
    for (auto&& [key, value] : t) {
      if (std::find(known.begin(), known.end(), key.str()) != known.end()) continue;
      std::string list;
      for (std::string_view k : known)
        list += (list.empty() ? "" : ", ") + std::string(k);
      return InvalidArgument(Where(key.source(), Join(path, key.str())) +
                             ": unknown key (known: " + list + ")");
    }
    return Status::Ok();
  }

  Result<const toml::table*> Table(const toml::node& n, std::string_view path) const {
    if (!n.is_table()) return Error(n, path, "expected a table, got " + TypeName(n));
    return n.as_table();
  }
  Result<std::string> String(const toml::node& n, std::string_view path) const {
    if (!n.is_string()) return Error(n, path, "expected a string, got " + TypeName(n));
    return std::string(n.as_string()->get());
  }
  Result<std::string> Name(const toml::node& n, std::string_view path) const {
    Result<std::string> s = String(n, path);
    if (!s.ok()) return s;
    const bool ok = !s->empty() && std::all_of(s->begin(), s->end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' ||
             c == '.';
    });
    if (!ok) return Error(n, path, Quoted(*s) + " is not a name (letters, digits, _-.)");
    return s;
  }
  Result<int64_t> Int(const toml::node& n, std::string_view path, int64_t lo,
                      int64_t hi) const {
    if (!n.is_integer()) return Error(n, path, "expected an integer, got " + TypeName(n));
    const int64_t v = n.as_integer()->get();
    if (v < lo || v > hi) {
      return Error(n, path,
                   std::to_string(v) + " is out of range " + std::to_string(lo) + ".." +
                       std::to_string(hi));
    }
    return v;
  }
  Result<double> Number(const toml::node& n, std::string_view path, double hi) const {
    if (!n.is_number()) return Error(n, path, "expected a number, got " + TypeName(n));
    const double v = n.value<double>().value_or(-1);
    if (!(v >= 0 && v <= hi)) {
      return Error(n, path, "must be a number from 0 to " + std::to_string(hi));
    }
    return v;
  }
  Result<bool> Bool(const toml::node& n, std::string_view path) const {
    if (!n.is_boolean())
      return Error(n, path, "expected true or false, got " + TypeName(n));
    return n.as_boolean()->get();
  }
  Result<Duration> DurationOf(const toml::node& n, std::string_view path) const {
    if (!n.is_string()) {
      return Error(n, path,
                   "expected a duration string (30m, 4h, 7d), got " + TypeName(n));
    }
    Result<Duration> d = ParseDuration(n.as_string()->get());
    if (!d.ok()) return Error(n, path, d.status().message());
    return d;
  }
  // A memory size: "64G", "512M" (ParseSizeMib), or an integer of MiB. In MiB.
  Result<int64_t> SizeMib(const toml::node& n, std::string_view path) const {
    if (n.is_integer()) return Int(n, path, 1, int64_t{64} << 20);
    if (!n.is_string()) {
      return Error(n, path,
                   "expected a size (\"64G\", \"512M\") or MiB, got " + TypeName(n));
    }
    Result<int64_t> m = ParseSizeMib(n.as_string()->get());
    if (!m.ok()) return Error(n, path, m.status().message());
    return m;
  }
  // "08:00" or a TOML local time (08:00:00).
  Result<int> TimeOfDay(const toml::node& n, std::string_view path, bool allow_24) const {
    if (n.is_time()) {
      const toml::time t = n.as_time()->get();
      if (t.second != 0 || t.nanosecond != 0) {
        return Error(n, path, "times of day are whole minutes (HH:MM)");
      }
      return t.hour * 60 + t.minute;
    }
    if (!n.is_string()) return Error(n, path, "expected HH:MM, got " + TypeName(n));
    Result<int> m = ParseTimeOfDay(n.as_string()->get(), allow_24);
    if (!m.ok()) return Error(n, path, m.status().message());
    return m;
  }
  // A string or an array of strings.
  Result<std::vector<std::string>> Strings(const toml::node& n,
                                           std::string_view path) const {
    if (n.is_string()) return std::vector<std::string>{std::string(n.as_string()->get())};
    if (!n.is_array()) {
      return Error(n, path, "expected a list of strings, got " + TypeName(n));
    }
    std::vector<std::string> out;
    const toml::array& a = *n.as_array();
    for (size_t i = 0; i < a.size(); ++i) {
      Result<std::string> s =
          String(a[i], std::string(path) + "[" + std::to_string(i) + "]");
      if (!s.ok()) return s.status();
      out.push_back(std::move(*s));
    }
    return out;
  }
  // "all", or names and ranges; no name twice.
  Result<NodeSelector> Nodes(const toml::node& n, std::string_view path) const {
    Result<std::vector<std::string>> items = Strings(n, path);
    if (!items.ok()) return items.status();
    NodeSelector sel;
    sel.where = Where(n.source(), path);
    if (items->size() == 1 && Trim((*items)[0]) == "all") {
      sel.all = true;
      return sel;
    }
    if (items->empty()) return Error(n, path, "no nodes (give names, ranges or \"all\")");
    for (const std::string& item : *items) {
      if (Trim(item) == "all") return Error(n, path, "\"all\" stands alone");
      Result<std::vector<std::string>> names = ExpandHostList(item);
      if (!names.ok()) return Error(n, path, names.status().message());
      sel.names.insert(sel.names.end(), names->begin(), names->end());
    }
    std::set<std::string_view> seen;
    for (const std::string& name : sel.names) {
      if (!seen.insert(name).second) {
        return Error(n, path, "node " + Quoted(name) + " is listed twice");
      }
    }
    return sel;
  }
  // A table whose keys are names and values are read by `read`.
  template <typename T, typename F>
  Status NameMap(const toml::node& n, std::string_view path, F read,
                 std::unordered_map<std::string, T>* out) const {
    Result<const toml::table*> t = Table(n, path);
    if (!t.ok()) return t.status();
    for (auto&& [key, value] : **t) {
      Result<T> v = read(value, Join(path, key.str()));
      if (!v.ok()) return v.status();
      (*out)[std::string(key.str())] = std::move(*v);
    }
    return Status::Ok();
  }

  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
};

// Reads the optional key `key` of `t` with `read`; leaves *out unchanged when absent.
template <typename T, typename F>
Status Optional(const toml::table& t, std::string_view path, std::string_view key, F read,
                T* out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::Ok();
  auto v = read(*n, Join(path, key));
  if (!v.ok()) return v.status();
  *out = std::move(*v);
  return Status::Ok();
}

#define CONFIG_ASSIGN_OR_RETURN(lhs, expr)        \
  do {                                            \
    auto hachi_r_ = (expr);                       \
    if (!hachi_r_.ok()) return hachi_r_.status(); \
    (lhs) = std::move(*hachi_r_);                 \
  } while (0)

// [[partition]] tables (partition_reader.cc).
Result<PartitionConfig> ReadPartition(const Reader& r, const toml::node& n,
                                      const std::string& path);

// [auth] and [[account]] (auth_reader.cc).
Status ReadAuth(const Reader& r, const toml::node& n, AuthConfig* out);
// [burn_in], and a [node."..."] burn_in list (burn_in_reader.cc).
Status ReadBurnIn(const Reader& r, const toml::node& n, BurnInConfig* out);
Result<std::vector<std::string>> ReadBurnInChecks(const Reader& r, const toml::node& n,
                                                  const std::string& path);
Result<AccountConfig> ReadAccount(const Reader& r, const toml::node& n,
                                  const std::string& path);
// [[pool]] tables, and that no node is in two (pool_reader.cc).
Result<PoolConfig> ReadPool(const Reader& r, const toml::node& n,
                            const std::string& path);
Status CheckPools(const std::vector<PoolConfig>& pools);

}  // namespace hachi::config::internal
