#include "cli/directives.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "api/request_limits.h"
#include "cli/submit_options.h"
#include "core/slurm_time.h"
#include "core/strings.h"

namespace hachi::cli {
namespace {

std::string Quote(std::string_view v) { return "'" + std::string(v) + "'"; }

// Parses option tokens (argv, or the words of one directive line) into occurrences.
// `where_prefix` is "" for flags and "job.sh:4: #SBATCH " for a directive; flags are
// located as "--time '9x'", directives as the words written.
Status ParseTokens(const std::vector<std::string>& tokens, std::string_view where_prefix,
                   int source, bool allow_positional, ParsedOptions* out) {
  const bool directive = !where_prefix.empty();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& tok = tokens[i];
    if (tok == "--" && allow_positional) {
      out->positional.assign(tokens.begin() + static_cast<long>(i) + 1, tokens.end());
      return Status::Ok();
    }
    if (tok.size() < 2 || tok[0] != '-') {
      if (allow_positional) {
        out->positional.assign(tokens.begin() + static_cast<long>(i), tokens.end());
        return Status::Ok();
      }
      return InvalidArgument(std::string(where_prefix) + tok + ": not an option");
    }
    const OptionRow* def = nullptr;
    std::string written;  // the option as the user spelled it, without its value
    std::string value;
    bool has_value = false;
    if (tok[1] == '-') {
      std::string_view body = std::string_view(tok).substr(2);
      size_t eq = body.find('=');
      std::string_view name = body.substr(0, eq);
      written = "--" + std::string(name);
      def = FindOption(name);
      if (eq != std::string_view::npos) {
        value = std::string(body.substr(eq + 1));
        has_value = true;
      }
    } else {
      written = tok.substr(0, 2);
      def = FindShortOption(tok[1]);
      if (tok.size() > 2) {
        value = tok.substr(2);
        has_value = true;
      }
    }
    // A front-end's own option (sbatch --wait) is taken out before this parser runs.
    if (def == nullptr || def->kind == OptionKind::kFrontEnd) {
      return InvalidArgument(std::string(where_prefix) + written + ": unknown option");
    }
    std::string shown = tok;  // for directives: the words as written
    if (TakesValue(*def) && !has_value) {
      if (i + 1 >= tokens.size()) {
        return InvalidArgument(std::string(where_prefix) + written + ": needs a value");
      }
      value = tokens[++i];
      shown += " " + value;
    } else if (!TakesValue(*def) && has_value && def->kind != OptionKind::kIgnoredFlag &&
               def->kind != OptionKind::kOptionalValue) {
      // Also "-Hx": clusters of short flags are not supported.
      return InvalidArgument(std::string(where_prefix) + tok + ": " + written +
                             " takes no value");
    }
    const bool shows_value =
        TakesValue(*def) || (has_value && def->kind == OptionKind::kOptionalValue);
    std::string where = directive     ? std::string(where_prefix) + shown
                        : shows_value ? written + " " + Quote(value)
                                      : written;
    switch (def->kind) {
      case OptionKind::kRefused:
        return InvalidArgument(where + ": not supported by Hachi (" +
                               std::string(def->note) + ")");
      case OptionKind::kIgnoredValue:
      case OptionKind::kIgnoredFlag:
        out->warnings.push_back(where + ": ignored (" + std::string(def->note) + ")");
        break;
      case OptionKind::kValue:
      case OptionKind::kFlag:
      case OptionKind::kOptionalValue:
      case OptionKind::kFrontEnd:  // refused above
        out->options.push_back({std::string(def->name), value, where, source});
        break;
    }
  }
  return Status::Ok();
}

// Splits a directive's text into words: whitespace separated, "..." and '...' quoted,
// a word starting with '#' begins a comment.
Result<std::vector<std::string>> SplitWords(std::string_view s) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    if (i >= s.size() || s[i] == '#') break;
    std::string w;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') {
      if (s[i] == '"' || s[i] == '\'') {
        char q = s[i++];
        size_t end = s.find(q, i);
        if (end == std::string_view::npos) return InvalidArgument("unterminated quote");
        w.append(s.substr(i, end - i));
        i = end + 1;
      } else {
        w.push_back(s[i++]);
      }
    }
    words.push_back(std::move(w));
  }
  return words;
}

}  // namespace

std::optional<long long> ParseCount(std::string_view s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  return ParseInt(s);
}

Result<ArraySpec> ParseArraySpec(std::string_view text) {
  ArraySpec spec;
  std::string_view body = text;
  size_t pct = text.find('%');
  if (pct != std::string_view::npos) {
    body = text.substr(0, pct);
    std::optional<long long> m = ParseCount(text.substr(pct + 1));
    if (!m || *m <= 0) {
      return InvalidArgument(Quote(text.substr(pct + 1)) +
                             " is not a task limit (use %N, N >= 1)");
    }
    spec.max_running = static_cast<int>(*m);
  }
  if (body.empty()) return InvalidArgument("no task ids (use 1-100, 1,3,5 or 0-15:4)");
  for (std::string_view item : Split(body, ',')) {
    const std::string bad = Quote(item) + " is not a task range (use N, N-M or N-M:STEP)";
    ArraySpec::Range r;
    std::string_view range = item;
    size_t colon = item.find(':');
    if (colon != std::string_view::npos) {
      std::optional<long long> step = ParseCount(item.substr(colon + 1));
      if (!step || *step <= 0) return InvalidArgument(bad);
      r.step = static_cast<int>(*step);
      range = item.substr(0, colon);
    }
    size_t dash = range.find('-');
    std::optional<long long> a = ParseCount(range.substr(0, dash));
    std::optional<long long> b =
        dash == std::string_view::npos ? a : ParseCount(range.substr(dash + 1));
    if (!a || !b) return InvalidArgument(bad);
    if (*a > *b)
      return InvalidArgument(Quote(item) + ": the range ends before it starts");
    if (*b > api::kMaxArrayTaskId) {
      return InvalidArgument(Quote(item) + ": task ids go up to " +
                             std::to_string(api::kMaxArrayTaskId));
    }
    r.first = static_cast<int>(*a);
    r.last = static_cast<int>(*b);
    spec.ranges.push_back(r);
  }
  size_t n = ExpandArray(spec).size();
  if (n > static_cast<size_t>(api::kMaxArrayTasks)) {
    return InvalidArgument(std::to_string(n) + " tasks; an array has at most " +
                           std::to_string(api::kMaxArrayTasks));
  }
  return spec;
}

std::vector<int> ExpandArray(const ArraySpec& spec) {
  std::vector<int> ids;
  for (const ArraySpec::Range& r : spec.ranges) {
    for (long long i = r.first; i <= r.last; i += r.step) {
      ids.push_back(static_cast<int>(i));
      // Bounded work: ParseArraySpec refuses the count anyway.
      if (ids.size() > static_cast<size_t>(api::kMaxArrayTasks) * 4) break;
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

Result<Duration> ParseTimeLimit(std::string_view text, bool* unlimited) {
  *unlimited = false;
  const Status bad = InvalidArgument("not a time (use MM, HH:MM:SS or D-HH:MM:SS)");
  std::string lower = ToLower(text);
  if (lower == "unlimited" || lower == "infinite") {
    *unlimited = true;
    return Duration{0};
  }
  long long days = 0;
  std::string_view rest = text;
  size_t dash = text.find('-');
  if (dash != std::string_view::npos) {
    std::optional<long long> d = ParseCount(text.substr(0, dash));
    if (!d) return bad;
    days = *d;
    rest = text.substr(dash + 1);
  }
  std::vector<std::string_view> parts = Split(rest, ':');
  if (parts.size() > 3) return bad;
  std::vector<long long> v;
  for (std::string_view p : parts) {
    std::optional<long long> n = ParseCount(p);
    if (!n) return bad;
    v.push_back(*n);
  }
  long long secs = 0;
  if (dash != std::string_view::npos) {
    // D-HH, D-HH:MM, D-HH:MM:SS
    secs = v[0] * kHour + (v.size() > 1 ? v[1] * kMinute : 0) + (v.size() > 2 ? v[2] : 0);
    if ((v.size() > 1 && v[1] >= 60) || (v.size() > 2 && v[2] >= 60)) return bad;
  } else if (v.size() == 1) {
    secs = v[0] * kMinute;  // minutes
  } else if (v.size() == 2) {
    if (v[1] >= 60) return bad;
    secs = v[0] * kMinute + v[1];  // MM:SS
  } else {
    if (v[1] >= 60 || v[2] >= 60) return bad;
    secs = v[0] * kHour + v[1] * kMinute + v[2];
  }
  return Duration{days * kDay + secs};
}

Result<int64_t> ParseSizeMib(std::string_view text, char default_unit) {
  const Status bad =
      InvalidArgument(Quote(text) + " is not a size (use e.g. 512M, 20G, 1T)");
  if (text.empty()) return bad;
  char unit = default_unit;
  std::string_view num = text;
  char last = text.back();
  if (last < '0' || last > '9') {
    unit = static_cast<char>(last >= 'a' ? last - 'a' + 'A' : last);
    num = text.substr(0, text.size() - 1);
    if (!num.empty() && (num.back() == 'B' || num.back() == 'b') && unit != 'B') {
      return bad;
    }
    // Slurm takes an optional B after the unit, any case ("4GB", "4096mb").
    if (unit == 'B' && !num.empty() && (num.back() < '0' || num.back() > '9')) {
      const char u = num.back();
      unit = static_cast<char>(u >= 'a' ? u - 'a' + 'A' : u);
      num.remove_suffix(1);
    }
  }
  std::optional<long long> n = ParseCount(num);
  if (!n) return bad;
  switch (unit) {
    case 'K':
      return int64_t{(*n + 1023) / 1024};
    case 'M':
      return int64_t{*n};
    case 'G':
      return int64_t{*n} * 1024;
    case 'T':
      return int64_t{*n} * 1024 * 1024;
    default:
      return bad;
  }
}

state::EnvList ExportEnvironment(const ExportSpec& spec, state::EnvList submitter) {
  state::EnvList out;
  if (spec.all) out = std::move(submitter);
  for (const ExportSpec::Var& var : spec.vars) {
    std::optional<std::string> value = var.value;
    if (!value && !spec.all) {  // a name alone: its value from the submitter, if set
      for (const auto& [k, v] : submitter) {
        if (k == var.name) value = v;  // the last one, as getenv's environment has one
      }
    }
    if (!value) continue;
    auto same = std::find_if(out.begin(), out.end(),
                             [&](const auto& kv) { return kv.first == var.name; });
    if (same != out.end()) {
      same->second = *value;
    } else {
      out.emplace_back(var.name, *value);
    }
  }
  return out;
}

Status ResolveSubmitTimes(Time now, int64_t utc_offset, SubmitOptions* o) {
  // --begin / --deadline against the submitting clock.
  if (!o->begin_text.empty()) {
    Result<Time> t = ParseSlurmTime(o->begin_text, now, utc_offset);
    if (!t.ok()) return InvalidArgument("--begin: " + t.status().message());
    o->req.begin_time = *t > now ? *t : 0;
  }
  if (!o->deadline_text.empty()) {
    Result<Time> t = ParseSlurmTime(o->deadline_text, now, utc_offset);
    if (!t.ok()) return InvalidArgument("--deadline: " + t.status().message());
    if (*t <= now) {
      return InvalidArgument("--deadline " + o->deadline_text + ": the time has passed");
    }
    o->req.deadline = *t;
  }
  return Status::Ok();
}

Result<ParsedOptions> ParseFlags(const std::vector<std::string>& args) {
  ParsedOptions out;
  HACHI_RETURN_IF_ERROR(ParseTokens(args, "", 2, true, &out));
  return out;
}

Result<ParsedOptions> ParseDirectives(std::string_view script,
                                      std::string_view file_name) {
  ParsedOptions out;
  std::vector<std::string_view> lines = SplitLines(script);
  bool in_header = true;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (i == 0 && StartsWith(line, "#!")) continue;
    const std::string loc = std::string(file_name) + ":" + std::to_string(i + 1) + ": ";
    int source = -1;
    std::string_view prefix;
    if (StartsWith(line, "#SBATCH")) {
      source = 0;
      prefix = "#SBATCH";
    } else if (StartsWith(line, "#HACHI")) {
      source = 1;
      prefix = "#HACHI";
    }
    // "#SBATCHX" is a comment, not a directive.
    if (source >= 0 && line.size() > prefix.size() && line[prefix.size()] != ' ' &&
        line[prefix.size()] != '\t') {
      source = -1;
    }
    if (source >= 0) {
      if (!in_header) {
        out.warnings.push_back(loc + std::string(prefix) +
                               ": after the first command, ignored (as Slurm does)");
        continue;
      }
      Result<std::vector<std::string>> words = SplitWords(line.substr(prefix.size()));
      if (!words.ok()) {
        return InvalidArgument(loc + std::string(Trim(line)) + ": " +
                               words.status().message());
      }
      HACHI_RETURN_IF_ERROR(
          ParseTokens(*words, loc + std::string(prefix) + " ", source, false, &out));
      continue;
    }
    std::string_view t = Trim(line);
    if (t.empty() || t[0] == '#') continue;
    in_header = false;
  }
  return out;
}

}  // namespace hachi::cli
