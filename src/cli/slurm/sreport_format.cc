#include "cli/slurm/sreport_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>

#include "cli/slurm/sacct_format.h"
#include "cli/slurm/slurm_text.h"
#include "core/strings.h"
#include "core/time_format.h"

namespace hachi::cli::slurm {
namespace {

// The columns (cluster_reports.c, user_reports.c); Used's width is set per report.
constexpr FieldDef kSreportFields[] = {
    {"Cluster", 9},
    {"Account", 15},
    {"Login", 9},
    {"Proper Name", 15, "Proper"},
    {"TRES Name", 14, "TresName"},
    {"Used", 8},
    {"Energy", 8},
};
enum SreportField : uint8_t {
  kCluster,
  kAccount,
  kLogin,
  kProper,
  kTresName,
  kUsed,
  kEnergy
};
constexpr std::string_view kAcctByUserDefault = "Cluster,Ac,Login,Proper,TresName,Used";
constexpr std::string_view kTopUsageDefault = "Cl,L,P,A,TresName,Used";

const std::vector<OptDef>& SreportOpts() {
  static const auto* opts = new std::vector<OptDef>{
      {'a', "all_clusters", false}, {'h', "help", false},     {'M', "cluster", true},
      {'n', "noheader", false},     {'p', "parsable", false}, {'P', "parsable2", false},
      {'Q', "quiet", false},        {'t', "time", true},      {'T', "tres", true},
      {'v', "verbose", false},      {0, "usage", false},      {0, "server", true}};
  return *opts;
}

// sreport's -t: the forms it reads, in the order it tests them.
Result<SreportUnit> ParseUnit(const std::string& text) {
  const std::string t = ToLower(text);
  auto is = [&](std::string_view word, size_t min) {
    return t.size() >= min && word.substr(0, std::min(word.size(), t.size())) == t &&
           t.size() <= word.size();
  };
  if (is("secper", 6) || is("minper", 6) || is("hourper", 6) || is("percent", 1)) {
    return Unsatisfiable(
        "-t " + text +
        ": a share of the cluster needs its size over the period, which Hachi keeps no "
        "history of; -t minutes|hours|seconds (hachi stats shows utilisation)");
  }
  if (is("seconds", 1)) return SreportUnit::kSeconds;
  if (is("minutes", 1)) return SreportUnit::kMinutes;
  if (is("hours", 1)) return SreportUnit::kHours;
  return InvalidArgument("unknown time format " + Clip(text));
}

std::string_view UnitName(SreportUnit u) {
  switch (u) {
    case SreportUnit::kSeconds:
      return "Seconds";
    case SreportUnit::kHours:
      return "Hours";
    case SreportUnit::kMinutes:
      break;
  }
  return "Minutes";
}

std::string UsedText(double seconds, SreportUnit u) {
  char buf[64];
  switch (u) {
    case SreportUnit::kSeconds:
      std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(seconds));
      break;
    case SreportUnit::kHours:
      std::snprintf(buf, sizeof buf, "%.0lf", seconds / 3600);
      break;
    case SreportUnit::kMinutes:
      std::snprintf(buf, sizeof buf, "%.0lf", seconds / 60);
      break;
  }
  return buf;
}

// sreport_set_usage_col_width: 8, and one more per digit past 10^8 seconds.
int UsedWidth(double max_seconds) {
  int len = 8;
  double order = 1e8;
  while (order < 1e25 && max_seconds >= order) {
    ++len;
    order *= 10;
  }
  return len;
}

Time HourFloor(Time t) { return t - ((t % 3600) + 3600) % 3600; }

Time LocalMidnight(Time now, int days_back) {
  const std::time_t t = static_cast<std::time_t>(now);
  std::tm tm{};
  localtime_r(&t, &tm);
  tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
  tm.tm_mday -= days_back;
  tm.tm_isdst = -1;
  return static_cast<Time>(std::mktime(&tm));
}

struct Line {
  std::string account, login, proper;
  double seconds = 0;
};

}  // namespace

Result<SreportOptions> ParseSreportArgs(const std::vector<std::string>& args, Time now) {
  // Options come before the command; the command's words are positional.
  Result<ParsedArgs> p = ParseArgs(args, SreportOpts(), /*stop_at_positional=*/true);
  if (!p.ok()) return p.status();
  const std::vector<std::string>& words = p->positional;
  SreportOptions o;
  o.help = p->Has("help") || p->Has("usage");
  o.server = p->Get("server");
  o.out = FieldOutputOf(*p);
  if (p->Has("time")) {
    Result<SreportUnit> u = ParseUnit(p->Get("time"));
    if (!u.ok()) return u.status();
    o.unit = *u;
  }
  for (const std::string& t : p->List("tres")) {
    const std::string l = ToLower(t);
    if (l != "gres/gpu" && l != "all") {
      return Unsatisfiable("-T " + t + ": Hachi accounts GPU time: -T gres/gpu");
    }
  }
  if (o.help) return o;
  if (words.size() < 2) {
    return InvalidArgument(
        "give a report: cluster AccountUtilizationByUser | user TopUsage (sreport "
        "--help)");
  }
  const std::string group = ToLower(words[0]), name = ToLower(words[1]);
  if (group == "cluster" && name.rfind("accountutilizationbyuser", 0) == 0) {
    o.report = SreportReport::kAccountUtilizationByUser;
  } else if (group == "user" && !name.empty() && name[0] == 't') {
    o.report = SreportReport::kUserTopUsage;
  } else if (group == "cluster" && name.rfind("utilization", 0) == 0) {
    return Unsatisfiable(
        "cluster Utilization needs the cluster's size over the period (down and idle "
        "time), which Hachi keeps no history of: hachi stats and hachi report show "
        "utilisation");
  } else {
    return InvalidArgument("Not valid report " + Clip(words[0]) + " " + Clip(words[1]) +
                           " (Hachi has cluster AccountUtilizationByUser and user "
                           "TopUsage)");
  }
  o.start = LocalMidnight(now, 1);
  o.end = LocalMidnight(now, 0);
  for (size_t i = 2; i < words.size(); ++i) {
    const std::string& w = words[i];
    const size_t eq = w.find('=');
    const std::string key = ToLower(w.substr(0, eq));
    const std::string value = eq == std::string::npos ? "" : w.substr(eq + 1);
    std::vector<std::string> list;
    for (std::string_view v : Split(value, ',')) {
      if (!v.empty()) list.emplace_back(v);
    }
    if (key == "start" || key == "end") {
      Result<Time> t = ParseSacctTime(value, now);
      if (!t.ok()) return t.status();
      (key == "start" ? o.start : o.end) = *t;
    } else if (key == "accounts" || key == "account") {
      o.accounts = list;
    } else if (key == "users" || key == "user") {
      o.users = list;
    } else if (key == "topcount") {
      std::optional<long long> n = ParseInt(value);
      if (!n || *n < 1 || *n > 100000)
        return InvalidArgument("Invalid TopCount: " + Clip(w));
      o.top = static_cast<int>(*n);
    } else if (key == "format") {
      o.format = value;
    } else if (key == "group") {
      o.group = true;
    } else if (key == "clusters" || key == "cluster" || key == "tree" ||
               key == "all_clusters") {
      continue;  // one cluster
    } else {
      return InvalidArgument(" Unknown condition: " + Clip(w));
    }
  }
  o.start = HourFloor(o.start);
  o.end = HourFloor(o.end);
  if (o.end <= o.start) o.end = o.start + 3600;
  if (!o.format.empty()) {
    Result<std::vector<FieldColumn>> cols =
        ParseFieldList(o.format, kSreportFields, FieldMatch::kPrefix);
    if (!cols.ok()) return cols.status();
  }
  return o;
}

Result<std::string> RenderSreport(const SreportOptions& o, const report::GpuReport& r,
                                  const ProperName& proper_name) {
  auto in = [](const std::vector<std::string>& list, const std::string& v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  // (account, user) -> GPU-seconds, from the "ACCOUNT/USER" groups.
  std::map<std::string, std::map<std::string, double>> by_account;
  for (const report::ReportGroup& g : r.groups) {
    const size_t slash = g.name.rfind('/');
    const std::string account =
        slash == std::string::npos ? g.name : g.name.substr(0, slash);
    const std::string user = slash == std::string::npos ? "" : g.name.substr(slash + 1);
    if (!in(o.accounts, account) || !in(o.users, user)) continue;
    by_account[account][user] += g.gpu_hours * 3600;
  }
  std::vector<Line> lines;
  double total = 0;
  for (const auto& [account, users] : by_account) {
    for (const auto& [user, secs] : users) total += secs;
  }
  if (o.report == SreportReport::kAccountUtilizationByUser) {
    lines.push_back({"root", "", "", total});
    for (const auto& [account, users] : by_account) {
      double sum = 0;
      for (const auto& [user, secs] : users) sum += secs;
      lines.push_back({account, "", "", sum});
      for (const auto& [user, secs] : users) {
        lines.push_back({account, user, proper_name ? proper_name(user) : "", secs});
      }
    }
  } else {
    std::map<std::string, Line> per_user;  // Group: one line per user
    for (const auto& [account, users] : by_account) {
      for (const auto& [user, secs] : users) {
        if (o.group) {
          Line& l = per_user[user];
          l.account += (l.account.empty() ? "" : ", ") + account;
          l.login = user;
          l.seconds += secs;
        } else {
          lines.push_back({account, user, "", secs});
        }
      }
    }
    for (auto& [user, l] : per_user) lines.push_back(std::move(l));
    std::stable_sort(lines.begin(), lines.end(),
                     [](const Line& a, const Line& b) { return a.seconds > b.seconds; });
    if (lines.size() > static_cast<size_t>(o.top))
      lines.resize(static_cast<size_t>(o.top));
    for (Line& l : lines) l.proper = proper_name ? proper_name(l.login) : "";
  }
  Result<std::vector<FieldColumn>> cols = ParseFieldList(
      !o.format.empty()                                      ? std::string_view(o.format)
      : o.report == SreportReport::kAccountUtilizationByUser ? kAcctByUserDefault
                                                             : kTopUsageDefault,
      kSreportFields, FieldMatch::kPrefix);
  if (!cols.ok()) return cols.status();
  double max_seconds = 0;
  for (const Line& l : lines) max_seconds = std::max(max_seconds, l.seconds);
  for (FieldColumn& c : *cols) {
    if (c.def == kUsed && c.width == kSreportFields[kUsed].width)
      c.width = UsedWidth(max_seconds);
  }
  std::vector<std::vector<FieldValue>> rows;
  for (const Line& l : lines) {
    std::vector<FieldValue> row;
    for (const FieldColumn& c : *cols) {
      switch (c.def) {
        case kAccount:
          row.push_back(FieldValue::Str(l.account));
          break;
        case kLogin:
          row.push_back(l.login.empty() ? FieldValue::Unset() : FieldValue::Str(l.login));
          break;
        case kProper:
          row.push_back(l.proper.empty() ? FieldValue::Unset()
                                         : FieldValue::Str(l.proper));
          break;
        case kTresName:
          row.push_back(FieldValue::Str("gres/gpu"));
          break;
        case kUsed: {
          // A number: never cut.
          FieldValue v = FieldValue::Num(0);
          v.text = UsedText(l.seconds, o.unit);
          row.push_back(std::move(v));
          break;
        }
        case kCluster:  // no cluster name
        case kEnergy:   // not measured
        default:
          row.push_back(FieldValue::Unset());
      }
    }
    rows.push_back(std::move(row));
  }
  std::string out;
  if (o.out.header) {
    const std::string dashes(80, '-');
    const std::string start = FormatSlurmLocal(o.start),
                      end = FormatSlurmLocal(o.end - 1);
    out += dashes + "\n";
    if (o.report == SreportReport::kAccountUtilizationByUser) {
      out += "Cluster/Account/User Utilization " + start + " - " + end + " (" +
             std::to_string(o.end - o.start) + " secs)\n";
    } else {
      out += "Top " + std::to_string(o.top) + " Users " + start + " - " + end + " (" +
             std::to_string(o.end - o.start) + " secs)\n";
    }
    out +=
        "Usage reported in TRES " + std::string(UnitName(o.unit)) + "\n" + dashes + "\n";
  }
  return out + PrintFields(*cols, kSreportFields, rows, o.out);
}

}  // namespace hachi::cli::slurm
