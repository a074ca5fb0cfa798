#include "cli/slurm/share_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

#include "core/strings.h"

namespace hachi::cli::slurm {
namespace {

// ---- sshare ----

// process.c's table, in its order (a prefix picks the first match).
enum SshareField : uint8_t {
  kAccount,
  kCluster,
  kEffectvUsage,
  kFairShare,
  kGrpTRESMins,
  kGrpTRESRaw,
  kId,
  kLevelFS,
  kNormShares,
  kNormUsage,
  kPartition,
  kRawShares,
  kRawUsage,
  kTRESRunMins,
  kUser,
};
constexpr FieldDef kSshareFields[] = {
    {"Account", -20},  {"Cluster", 10},     {"EffectvUsage", 13},
    {"FairShare", 10}, {"GrpTRESMins", 30}, {"GrpTRESRaw", 30},
    {"ID", 6},         {"LevelFS", 10},     {"NormShares", 11},
    {"NormUsage", 11}, {"Partition", 12},   {"RawShares", 10},
    {"RawUsage", 11},  {"TRESRunMins", 30}, {"User", 10},
};
constexpr std::string_view kSshareShort =
    "A,User,RawShares,NormShares,RawUsage,Eff,Fairshare";
constexpr std::string_view kSshareLong =
    "A,User,RawShares,NormShares,RawUsage,NormUsage,Eff,Fairshare,GrpTRESMins,"
    "TRESRunMins";

const std::vector<OptDef>& SshareOpts() {
  static const auto* opts = new std::vector<OptDef>{
      {'a', "all", false},       {'A', "accounts", true},  {'e', "helpformat", false},
      {'h', "noheader", false},  {'n', "noheader", false}, {'l', "long", false},
      {'M', "clusters", true},   {'o', "format", true},    {'p', "parsable", false},
      {'P', "parsable2", false}, {'q', "quiet", false},    {'U', "Users", false},
      {'u', "users", true},      {'v', "verbose", false},  {'m', "partition", false},
      {0, "help", false},        {0, "usage", false},      {0, "server", true}};
  return *opts;
}

// Shares are any positive number in Hachi; Slurm's are integers.
FieldValue SharesValue(double shares) {
  if (shares == std::floor(shares) && shares < 1e15) {
    return FieldValue::Num(static_cast<long long>(shares));
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", shares);
  return FieldValue::Str(buf);
}

struct ShareRow {
  std::string account;  // as printed: indented
  const std::string* user = nullptr;
  FieldValue raw_shares;
  double norm_shares = 0;
  double usage = 0, norm_usage = 0;
  std::optional<double> factor;
};

FieldValue SshareValue(SshareField f, const ShareRow& r) {
  switch (f) {
    case kAccount:
      return FieldValue::Str(r.account);
    case kUser:
      return r.user != nullptr ? FieldValue::Str(*r.user) : FieldValue::Unset();
    case kRawShares:
      return r.raw_shares;
    case kNormShares:
      return FieldValue::Dbl(r.norm_shares);
    case kRawUsage:
      return FieldValue::Num(std::llround(r.usage));
    case kNormUsage:
    case kEffectvUsage:
      return FieldValue::Dbl(r.norm_usage);
    case kFairShare:
      return r.factor ? FieldValue::Dbl(*r.factor) : FieldValue::Unset();
    default:  // no cluster name, ids, partitions or TRES-minute limits in Hachi
      return FieldValue::Unset();
  }
}

// ---- sprio ----

// One column of a sprio format: "%[.][width]LETTER" and the text after it.
struct SprioColumn {
  char letter = 0;
  int width = 0;
  bool right = false;
  std::string suffix;
};

struct SprioLetter {
  char letter;
  std::string_view header;
};
constexpr SprioLetter kSprioLetters[] = {
    {'i', "JOBID"},     {'r', "PARTITION"}, {'u', "USER"},    {'c', "CLUSTER"},
    {'Y', "PRIORITY"},  {'y', "PRIORITY"},  {'S', "SITE"},    {'A', "AGE"},
    {'a', "AGE"},       {'B', "ASSOC"},     {'b', "ASSOC"},   {'F', "FAIRSHARE"},
    {'f', "FAIRSHARE"}, {'J', "JOBSIZE"},   {'j', "JOBSIZE"}, {'P', "PARTITION"},
    {'p', "PARTITION"}, {'Q', "QOS"},       {'q', "QOS"},     {'N', "NICE"},
    {'T', "TRES"},      {'t', "TRES"},
};

const SprioLetter* FindLetter(char c) {
  for (const SprioLetter& l : kSprioLetters) {
    if (l.letter == c) return &l;
  }
  return nullptr;
}

Result<std::pair<std::string, std::vector<SprioColumn>>> ParseSprioFormat(
    std::string_view format) {
  std::string prefix;
  std::vector<SprioColumn> cols;
  size_t i = 0;
  while (i < format.size() && format[i] != '%') prefix += format[i++];
  while (i < format.size()) {
    ++i;  // '%'
    SprioColumn c;
    if (i < format.size() && format[i] == '.') {
      c.right = true;
      ++i;
    }
    while (i < format.size() && format[i] >= '0' && format[i] <= '9' && c.width < 1000) {
      c.width = c.width * 10 + (format[i++] - '0');
    }
    if (i >= format.size()) break;
    c.letter = format[i++];
    if (FindLetter(c.letter) == nullptr) {
      return InvalidArgument(std::string("Invalid job format specification: ") +
                             c.letter);
    }
    while (i < format.size() && format[i] != '%') c.suffix += format[i++];
    cols.push_back(std::move(c));
  }
  return std::make_pair(prefix, cols);
}

// print.c's _print_str: right-justified "%Ns" cut to N, or left "%.Ns" padded.
std::string SprioCell(const std::string& v, const SprioColumn& c) {
  if (c.width == 0) return v;
  const size_t w = static_cast<size_t>(c.width);
  std::string s = v;
  if (c.right && s.size() < w) s = std::string(w - s.size(), ' ') + s;
  if (s.size() > w) s.resize(w);
  if (s.size() < w) s += std::string(w - s.size(), ' ');
  return s;
}

std::string Int(double d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", d);
  return buf;
}
std::string Norm(double term, double weight) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.7lf", weight != 0 ? term / weight : 0.0);
  return buf;
}

// The weighted term a letter shows.
double TermOf(char letter, const report::JobPriorityRow& j) {
  switch (letter) {
    case 'A':
    case 'a':
      return j.terms.age;
    case 'F':
    case 'f':
      return j.terms.fairshare;
    case 'J':
    case 'j':
      return j.terms.size;
    case 'P':
    case 'p':
      return j.terms.tier;
    case 'Q':
    case 'q':
      return j.terms.qos;
    default:
      return 0;  // ASSOC, TRES: no such term in Hachi
  }
}
double WeightOf(char letter, const sched::PriorityWeights& w) {
  switch (letter) {
    case 'A':
    case 'a':
      return w.age;
    case 'F':
    case 'f':
      return w.fairshare;
    case 'J':
    case 'j':
      return w.size;
    case 'P':
    case 'p':
      return w.tier;
    case 'Q':
    case 'q':
      return w.qos;
    default:
      return 0;
  }
}

std::string SprioValue(char letter, const report::JobPriorityRow& j,
                       const sched::PriorityWeights& w) {
  switch (letter) {
    case 'i':
      return std::to_string(j.id);
    case 'r':
      return j.partition;
    case 'u':
      return j.user;
    case 'c':
      return "";
    case 'Y':
      return std::to_string(std::llround(j.priority));
    case 'y': {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%16.14f", j.priority / 4294967295.0);
      return buf;
    }
    case 'S':
      return "0";
    case 'N':
      return Int(j.terms.nice);
    case 'T':
    case 't':
      return "";
    default:
      break;
  }
  const bool normalized = letter >= 'a' && letter <= 'z';
  return normalized ? Norm(TermOf(letter, j), WeightOf(letter, w))
                    : Int(TermOf(letter, j));
}

// The "Weights" row of -w.
std::string SprioWeight(char letter, const sched::PriorityWeights& w) {
  switch (letter) {
    case 'i':
      return "Weights";
    case 'S':
      return "1";
    case 'A':
    case 'a':
    case 'B':
    case 'b':
    case 'F':
    case 'f':
    case 'J':
    case 'j':
    case 'P':
    case 'p':
    case 'Q':
    case 'q':
      return Int(WeightOf(letter, w));
    default:
      return "";
  }
}

// sprio's default formats (sprio.c): a factor whose weight is 0 is left out of the short
// ones.
std::string DefaultSprioFormat(const SprioOptions& o, const sched::PriorityWeights& w) {
  if (o.normalized) {
    if (o.long_list) return "%.15i %9r %.8u %10y %10a %10b %10f %10j %10p %10q %20t";
    std::string f = "%.15i %9r";
    if (!o.users.empty()) f += " %.8u";
    f += " %10y";
    if (w.age != 0) f += " %10a";
    if (w.fairshare != 0) f += " %10f";
    if (w.size != 0) f += " %10j";
    if (w.tier != 0) f += " %10p";
    if (w.qos != 0) f += " %10q";
    return f;
  }
  if (o.long_list) {
    return "%.15i %9r %.8u %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %.11N %.20T";
  }
  std::string f = "%.15i %9r";
  if (!o.users.empty()) f += " %.8u";
  f += " %.10Y %.10S";
  if (w.age != 0) f += " %.10A";
  if (w.fairshare != 0) f += " %.10F";
  if (w.size != 0) f += " %.10J";
  if (w.tier != 0) f += " %.10P";
  if (w.qos != 0) f += " %.10Q";
  return f;
}

const std::vector<OptDef>& SprioOpts() {
  static const auto* opts = new std::vector<OptDef>{
      {'h', "noheader", false}, {'j', "jobs", true},      {'l', "long", false},
      {'M', "clusters", true},  {'n', "norm", false},     {'o', "format", true},
      {'S', "sort", true},      {'p', "partition", true}, {'u', "user", true},
      {'v', "verbose", false},  {'w', "weights", false},  {0, "help", false},
      {0, "usage", false},      {0, "server", true}};
  return *opts;
}

}  // namespace

Result<SshareOptions> ParseSshareArgs(const std::vector<std::string>& args,
                                      const std::string& me) {
  Result<ParsedArgs> p = ParseArgs(args, SshareOpts());
  if (!p.ok()) return p.status();
  if (!p->positional.empty()) {
    return InvalidArgument("Unrecognized argument: " + Clip(p->positional[0]));
  }
  SshareOptions o;
  o.help = p->Has("help");
  o.usage = p->Has("usage");
  o.all_users = p->Has("all");
  o.accounts = p->List("accounts");
  o.users = p->List("users");
  o.users_only = p->Has("Users");
  o.long_list = p->Has("long");
  o.out = FieldOutputOf(*p);
  for (const auto& [name, value] : p->opts) {
    if (name == "format") o.format += (o.format.empty() ? "" : ",") + value;
  }
  if (!o.format.empty()) {
    Result<std::vector<FieldColumn>> cols =
        ParseFieldList(o.format, kSshareFields, FieldMatch::kPrefix);
    if (!cols.ok()) return cols.status();
  }
  o.server = p->Get("server");
  // `-u -1` and -a: everyone; no -u: the caller.
  if (std::find(o.users.begin(), o.users.end(), "-1") != o.users.end())
    o.all_users = true;
  if (o.all_users) o.users.clear();
  if (!o.all_users && o.users.empty()) o.users.push_back(me);
  return o;
}

Result<std::string> RenderSshare(const SshareOptions& o,
                                 const report::PriorityReport& r) {
  const std::string_view spec = !o.format.empty() ? std::string_view(o.format)
                                : o.long_list     ? kSshareLong
                                                  : kSshareShort;
  Result<std::vector<FieldColumn>> cols =
      ParseFieldList(spec, kSshareFields, FieldMatch::kPrefix);
  if (!cols.ok()) return cols.status();
  auto listed = [](const std::vector<std::string>& list, const std::string& v) {
    return std::find(list.begin(), list.end(), v) != list.end();
  };
  std::vector<ShareRow> rows;
  if (o.accounts.empty() && !o.users_only) {
    ShareRow root;  // the whole cluster: root has no shares and no factor of its own
    root.account = "root";
    root.raw_shares = FieldValue::Unset();
    root.norm_shares = 1;
    root.usage = r.usage_total;
    root.norm_usage = 1;
    rows.push_back(std::move(root));
  }
  for (const sched::FairShareAccount& a : r.accounts) {
    if (!o.accounts.empty() && !listed(o.accounts, a.account)) continue;
    if (!o.users_only) {
      ShareRow row;
      row.account = " " + a.account;
      row.raw_shares = SharesValue(a.shares);
      row.norm_shares = a.norm_shares;
      row.usage = a.usage;
      row.norm_usage = a.norm_usage;
      row.factor = a.factor;
      rows.push_back(std::move(row));
    }
    for (const report::UserUsage& u : r.users) {
      if (u.account != a.account || (!o.all_users && !listed(o.users, u.user))) continue;
      ShareRow row;
      row.account = "  " + a.account;
      row.user = &u.user;
      row.raw_shares = FieldValue::Str("parent");
      row.norm_shares = a.norm_shares;
      row.usage = u.usage;
      row.norm_usage = r.usage_total > 0 ? u.usage / r.usage_total : 0;
      row.factor = a.factor;  // what its jobs get: the account's
      rows.push_back(std::move(row));
    }
  }
  std::vector<std::vector<FieldValue>> values;
  values.reserve(rows.size());
  for (const ShareRow& row : rows) {
    std::vector<FieldValue> v;
    for (const FieldColumn& c : *cols) {
      v.push_back(SshareValue(static_cast<SshareField>(c.def), row));
    }
    values.push_back(std::move(v));
  }
  return PrintFields(*cols, kSshareFields, values, o.out);
}

Result<SprioOptions> ParseSprioArgs(const std::vector<std::string>& args) {
  Result<ParsedArgs> p = ParseArgs(args, SprioOpts());
  if (!p.ok()) return p.status();
  SprioOptions o;
  o.help = p->Has("help");
  o.usage = p->Has("usage");
  o.jobs_given = p->Has("jobs");
  std::vector<std::string> ids = p->List("jobs");
  // After -j a job list may also come as words of its own.
  for (const std::string& w : p->positional) {
    if (!o.jobs_given) return InvalidArgument("Unrecognized argument: " + Clip(w));
    for (std::string_view part : Split(w, ',')) ids.emplace_back(part);
  }
  for (const std::string& id : ids) {
    std::optional<long long> n = ParseInt(id);
    if (!n || *n <= 0) return InvalidArgument("Invalid job id: " + Clip(id));
    o.jobs.push_back(static_cast<state::JobId>(*n));
  }
  o.users = p->List("user");
  o.partitions = p->List("partition");
  o.long_list = p->Has("long");
  o.normalized = p->Has("norm");
  o.weights = p->Has("weights");
  o.noheader = p->Has("noheader");
  o.format = p->Get("format");
  o.sort = p->Get("sort");
  o.server = p->Get("server");
  if (!o.format.empty() && o.long_list) {
    return InvalidArgument(
        "Options -o(--format) and -l(--long) are mutually exclusive. Please remove one "
        "and retry.");
  }
  if (!o.format.empty()) {
    Result<std::pair<std::string, std::vector<SprioColumn>>> f =
        ParseSprioFormat(o.format);
    if (!f.ok()) return f.status();
  }
  for (char c : o.sort) {
    if (c != '-' && c != '+' && c != ',' &&
        std::string_view("ciNruAaFfJjPpQqTtYy").find(c) == std::string_view::npos) {
      return InvalidArgument(std::string("Invalid sort specification: ") + c);
    }
  }
  return o;
}

Result<std::string> RenderSprio(const SprioOptions& o, const report::PriorityReport& r) {
  if (!r.multifactor) {
    return Unsatisfiable(
        "You are not running a supported priority plugin\n(priority/basic).\n"
        "Only 'priority/multifactor' is supported.");
  }
  Result<std::pair<std::string, std::vector<SprioColumn>>> f =
      ParseSprioFormat(o.format.empty() ? DefaultSprioFormat(o, r.weights) : o.format);
  if (!f.ok()) return f.status();
  const std::string& prefix = f->first;
  const std::vector<SprioColumn>& cols = f->second;
  auto line = [&](const std::function<std::string(const SprioColumn&)>& value) {
    std::string s = prefix;
    for (const SprioColumn& c : cols) s += SprioCell(value(c), c) + c.suffix;
    return s + "\n";
  };
  std::vector<const report::JobPriorityRow*> jobs;
  auto in = [](const auto& list, const auto& v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  for (const report::JobPriorityRow& j : r.jobs) {
    if (in(o.jobs, j.id) && in(o.users, j.user) && in(o.partitions, j.partition)) {
      jobs.push_back(&j);
    }
  }
  if ((o.jobs_given || !o.users.empty()) && jobs.empty() && !o.weights) {
    return std::string("Unable to find jobs matching user/id(s) specified\n");
  }
  std::string out;
  if (!o.noheader) {
    out += line(
        [](const SprioColumn& c) { return std::string(FindLetter(c.letter)->header); });
  }
  if (o.weights) {
    return out +
           line([&](const SprioColumn& c) { return SprioWeight(c.letter, r.weights); });
  }
  // -S: letters, each ascending or '-' descending; by default the job id.
  const std::string sort = o.sort.empty() ? "i" : o.sort;
  std::stable_sort(jobs.begin(), jobs.end(),
                   [&](const report::JobPriorityRow* a, const report::JobPriorityRow* b) {
                     bool desc = false;
                     for (char c : sort) {
                       if (c == '-' || c == '+') {
                         desc = c == '-';
                         continue;
                       }
                       if (c == ',') continue;
                       int cmp = 0;
                       if (c == 'i') {
                         cmp = a->id < b->id ? -1 : a->id > b->id;
                       } else if (c == 'r' || c == 'u' || c == 'c') {
                         const std::string& x = c == 'u' ? a->user : a->partition;
                         const std::string& y = c == 'u' ? b->user : b->partition;
                         cmp = x.compare(y);
                       } else {
                         const double x = c == 'Y' || c == 'y' ? a->priority
                                          : c == 'N'           ? a->terms.nice
                                                               : TermOf(c, *a);
                         const double y = c == 'Y' || c == 'y' ? b->priority
                                          : c == 'N'           ? b->terms.nice
                                                               : TermOf(c, *b);
                         cmp = x < y ? -1 : x > y;
                       }
                       if (cmp != 0) return desc ? cmp > 0 : cmp < 0;
                       desc = false;
                     }
                     return false;
                   });
  for (const report::JobPriorityRow* j : jobs) {
    out +=
        line([&](const SprioColumn& c) { return SprioValue(c.letter, *j, r.weights); });
  }
  return out;
}

}  // namespace hachi::cli::slurm
