#include "sim/trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_map>

#include "core/strings.h"

namespace hachi::sim {
namespace {

// "file:line: field: problem" — every reader error names all three.
Status RowError(std::string_view file, int64_t line, std::string_view field,
                std::string_view problem) {
  std::string msg(file);
  msg += ":" + std::to_string(line) + ": ";
  if (!field.empty()) msg += std::string(field) + ": ";
  msg += problem;
  return InvalidArgument(std::move(msg));
}

std::string Quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

// A finite, non-negative decimal ("66.0", "1e3", "12"); nullopt otherwise.
std::optional<double> ParseSeconds(std::string_view s) {
  s = Trim(s);
  if (s.empty()) return std::nullopt;
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v) || v < 0) {
    return std::nullopt;
  }
  return v;
}

// Run times are whole seconds in Hachi; a fraction still occupies the GPUs for that
// second, so round up (and a job runs at least 1 s).
Result<Duration> ParseDuration(std::string_view s, std::string_view file, int64_t line,
                               std::string_view field) {
  std::optional<double> v = ParseSeconds(s);
  if (!v || *v > 1e12) {
    return RowError(file, line, field, Quoted(s) + " is not a number of seconds");
  }
  return std::max<Duration>(1, static_cast<Duration>(std::ceil(*v)));
}

Result<int> ParseGpus(std::string_view s, std::string_view file, int64_t line,
                      std::string_view field) {
  std::string_view t = Trim(s);
  // Some exports write counts as floats ("8.0").
  std::optional<double> v = ParseSeconds(t);
  if (!v || *v != std::floor(*v) || *v < 1 || *v > 1e6) {
    return RowError(file, line, field, Quoted(s) + " is not a positive whole GPU count");
  }
  int gpus = static_cast<int>(*v);
  Result<GangShape> shape = ShapeOf(gpus);
  if (!shape.ok()) return RowError(file, line, field, shape.status().message());
  return gpus;
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// Sorts by submit time (stable: equal times keep file order), shifts time zero to the
// earliest submit and numbers the jobs 1, 2, ... in that order.
void Normalise(std::vector<TraceJob>* jobs) {
  std::stable_sort(jobs->begin(), jobs->end(), [](const TraceJob& a, const TraceJob& b) {
    return a.submit < b.submit;
  });
  const Time zero = jobs->empty() ? 0 : jobs->front().submit;
  for (size_t i = 0; i < jobs->size(); ++i) {
    (*jobs)[i].submit -= zero;
    (*jobs)[i].id = static_cast<int64_t>(i) + 1;
  }
}

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> f = Split(line, ',');
  for (auto& x : f) x = Trim(x);
  return f;
}

}  // namespace

std::string_view TraceFormatName(TraceFormat f) {
  return f == TraceFormat::kPhilly ? "philly" : "csv";
}

Result<TraceFormat> ParseTraceFormat(std::string_view name) {
  if (name == "philly") return TraceFormat::kPhilly;
  if (name == "csv") return TraceFormat::kCsv;
  return InvalidArgument("unknown trace format '" + std::string(name) +
                         "' (known: philly, csv)");
}

Result<TraceFormat> DetectTraceFormat(std::string_view text, std::string_view file) {
  std::string_view header = Trim(text.substr(0, text.find('\n')));
  std::vector<std::string_view> cols = Fields(header);
  if (cols.size() >= 3 && cols[0] == "timestamp" && cols[1] == "duration" &&
      cols[2] == "num_gpus") {
    return TraceFormat::kPhilly;
  }
  if (std::find(cols.begin(), cols.end(), "duration_s") != cols.end()) {
    return TraceFormat::kCsv;
  }
  return InvalidArgument(std::string(file) +
                         ":1: cannot tell the trace format from the header '" +
                         std::string(header) +
                         "' (Philly: timestamp,duration,num_gpus,...; generic CSV: "
                         "submit_s,duration_s,gpus,...; or pass --format)");
}

Result<GangShape> ShapeOf(int gpus) {
  if (gpus < 1) return InvalidArgument("a job needs at least 1 GPU");
  if (gpus <= kGpusPerServer) return GangShape{1, gpus};
  const int nodes = (gpus + kGpusPerServer - 1) / kGpusPerServer;
  if (gpus % nodes != 0) {
    return InvalidArgument(std::to_string(gpus) + " GPUs do not split evenly over " +
                           std::to_string(nodes) + " nodes of at most " +
                           std::to_string(kGpusPerServer));
  }
  return GangShape{nodes, gpus / nodes};
}

Result<int64_t> ParseDateTime(std::string_view s) {
  s = Trim(s);
  // Exactly "YYYY-MM-DD HH:MM:SS" (the Philly export; 'T' accepted as ISO 8601 does).
  auto num = [&](size_t pos, size_t len) -> std::optional<long long> {
    if (pos + len > s.size()) return std::nullopt;
    return ParseInt(s.substr(pos, len));
  };
  if (s.size() != 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') ||
      s[13] != ':' || s[16] != ':') {
    return InvalidArgument(Quoted(s) + " is not a time 'YYYY-MM-DD HH:MM:SS'");
  }
  auto y = num(0, 4), mo = num(5, 2), d = num(8, 2), h = num(11, 2), mi = num(14, 2),
       se = num(17, 2);
  if (!y || !mo || !d || !h || !mi || !se || *mo < 1 || *mo > 12 || *d < 1 || *d > 31 ||
      *h > 23 || *mi > 59 || *se > 60) {
    return InvalidArgument(Quoted(s) + " is not a time 'YYYY-MM-DD HH:MM:SS'");
  }
  return DaysFromCivil(*y, *mo, *d) * kDay + *h * kHour + *mi * kMinute + *se;
}

Result<std::vector<TraceJob>> ParsePhillyTrace(std::string_view text,
                                               std::string_view file) {
  std::vector<std::string_view> lines = SplitLines(text);
  if (lines.empty()) return InvalidArgument(std::string(file) + ": empty trace");
  std::vector<std::string_view> header = Fields(lines[0]);
  static constexpr std::string_view kColumns[] = {"timestamp", "duration", "num_gpus",
                                                  "gpu_time", "cluster"};
  for (size_t c = 0; c < std::size(kColumns); ++c) {
    if (c >= header.size() || header[c] != kColumns[c]) {
      return RowError(file, 1, "header",
                      "expected 'timestamp,duration,num_gpus,gpu_time,cluster', got " +
                          Quoted(lines[0]));
    }
  }
  std::vector<TraceJob> jobs;
  jobs.reserve(lines.size());
  for (size_t i = 1; i < lines.size(); ++i) {
    const int64_t line = static_cast<int64_t>(i) + 1;
    if (Trim(lines[i]).empty()) continue;
    std::vector<std::string_view> f = Fields(lines[i]);
    if (f.size() != std::size(kColumns)) {
      return RowError(file, line, "",
                      "expected 5 fields, got " + std::to_string(f.size()));
    }
    TraceJob j;
    j.row = line;
    Result<int64_t> t = ParseDateTime(f[0]);
    if (!t.ok()) return RowError(file, line, "timestamp", t.status().message());
    j.submit = *t;
    Result<Duration> d = ParseDuration(f[1], file, line, "duration");
    if (!d.ok()) return d.status();
    j.duration = *d;
    Result<int> g = ParseGpus(f[2], file, line, "num_gpus");
    if (!g.ok()) return g.status();
    j.gpus = *g;
    // The virtual cluster is the tenant: it pays (account) and, lacking a user
    // column, stands in for the user too (per-user quotas then act per tenant).
    if (f[4].empty()) return RowError(file, line, "cluster", "empty tenant id");
    j.account = std::string(f[4]);
    j.user = j.account;
    jobs.push_back(std::move(j));
  }
  Normalise(&jobs);
  return jobs;
}

Result<std::vector<TraceJob>> ParseCsvTrace(std::string_view text,
                                            std::string_view file) {
  std::vector<std::string_view> lines = SplitLines(text);
  if (lines.empty()) return InvalidArgument(std::string(file) + ": empty trace");
  std::vector<std::string_view> header = Fields(lines[0]);
  std::unordered_map<std::string, int> col;
  for (size_t c = 0; c < header.size(); ++c) {
    std::string name = ToLower(header[c]);
    if (!col.emplace(name, static_cast<int>(c)).second) {
      return RowError(file, 1, "header", "column " + Quoted(name) + " appears twice");
    }
  }
  auto find = [&](std::string_view name) {
    auto it = col.find(std::string(name));
    return it == col.end() ? -1 : it->second;
  };
  int submit_col = find("submit_s");
  if (submit_col < 0) submit_col = find("submit_time");
  const int duration_col = find("duration_s"), gpus_col = find("gpus");
  for (auto [c, name] :
       {std::pair{submit_col, "submit_s (or submit_time)"},
        std::pair{duration_col, "duration_s"}, std::pair{gpus_col, "gpus"}}) {
    if (c < 0) return RowError(file, 1, "header", std::string("missing column ") + name);
  }
  const int user_col = find("user"), account_col = find("account"),
            partition_col = find("partition"), limit_col = find("time_limit_s");
  const std::string_view submit_name = header[submit_col];

  std::vector<TraceJob> jobs;
  jobs.reserve(lines.size());
  for (size_t i = 1; i < lines.size(); ++i) {
    const int64_t line = static_cast<int64_t>(i) + 1;
    if (Trim(lines[i]).empty()) continue;
    std::vector<std::string_view> f = Fields(lines[i]);
    if (f.size() != header.size()) {
      return RowError(file, line, "",
                      "expected " + std::to_string(header.size()) + " fields, got " +
                          std::to_string(f.size()));
    }
    TraceJob j;
    j.row = line;
    // submit: seconds (any origin), or a date-time.
    if (std::optional<double> s = ParseSeconds(f[submit_col]); s && *s < 1e15) {
      j.submit = static_cast<Time>(std::floor(*s));
    } else if (Result<int64_t> t = ParseDateTime(f[submit_col]); t.ok()) {
      j.submit = *t;
    } else {
      return RowError(
          file, line, submit_name,
          Quoted(f[submit_col]) + " is neither seconds nor a time 'YYYY-MM-DD HH:MM:SS'");
    }
    Result<Duration> d = ParseDuration(f[duration_col], file, line, "duration_s");
    if (!d.ok()) return d.status();
    j.duration = *d;
    Result<int> g = ParseGpus(f[gpus_col], file, line, "gpus");
    if (!g.ok()) return g.status();
    j.gpus = *g;
    if (user_col >= 0) j.user = std::string(f[user_col]);
    if (account_col >= 0) j.account = std::string(f[account_col]);
    if (partition_col >= 0) j.partition = std::string(f[partition_col]);
    if (limit_col >= 0 && !f[limit_col].empty()) {
      Result<Duration> l = ParseDuration(f[limit_col], file, line, "time_limit_s");
      if (!l.ok()) return l.status();
      if (*l < j.duration) {
        return RowError(file, line, "time_limit_s",
                        "limit " + std::string(f[limit_col]) +
                            " s is below the run time " + std::to_string(j.duration) +
                            " s (the simulator never kills jobs)");
      }
      j.time_limit = *l;
    }
    // Without an account the user pays; without either, everyone shares one.
    if (j.account.empty()) j.account = j.user.empty() ? "default" : j.user;
    if (j.user.empty()) j.user = j.account;
    jobs.push_back(std::move(j));
  }
  Normalise(&jobs);
  return jobs;
}

Result<std::vector<TraceJob>> ParseTrace(std::string_view text, std::string_view file,
                                         TraceFormat format) {
  return format == TraceFormat::kPhilly ? ParsePhillyTrace(text, file)
                                        : ParseCsvTrace(text, file);
}

Result<std::vector<TraceJob>> ReadTrace(const std::string& path,
                                        const TraceFormat* format) {
  std::string error;
  std::optional<std::string> text = ReadFile(path, &error);
  if (!text) return NotFound(error);
  TraceFormat f;
  if (format != nullptr) {
    f = *format;
  } else {
    Result<TraceFormat> detected = DetectTraceFormat(*text, path);
    if (!detected.ok()) return detected.status();
    f = *detected;
  }
  return ParseTrace(*text, path, f);
}

}  // namespace hachi::sim
