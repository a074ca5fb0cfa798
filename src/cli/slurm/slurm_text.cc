#include "cli/slurm/slurm_text.h"

#include <algorithm>

#include "api/request_limits.h"
#include "core/strings.h"

namespace hachi::cli::slurm {
namespace {

bool AllDigits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string KeyOf(const OptDef& d) {
  return d.long_name.empty() ? std::string(1, d.short_name) : std::string(d.long_name);
}

// Ranges "1-5,7" -> numbers, at most `max_count` of them; nullopt when malformed.
std::optional<std::vector<long long>> ExpandRanges(std::string_view list,
                                                   size_t max_count) {
  std::vector<long long> out;
  for (std::string_view part : Split(list, ',')) {
    const size_t dash = part.find('-');
    const std::string_view lo = part.substr(0, dash);
    const std::string_view hi =
        dash == std::string_view::npos ? lo : part.substr(dash + 1);
    if (!AllDigits(lo) || !AllDigits(hi) || lo.size() > 12 || hi.size() > 12) {
      return std::nullopt;
    }
    const long long a = std::stoll(std::string(lo)), b = std::stoll(std::string(hi));
    if (a > b || static_cast<size_t>(b - a) >= max_count - out.size())
      return std::nullopt;
    for (long long v = a; v <= b; ++v) out.push_back(v);
  }
  return out;
}

}  // namespace

bool ParsedArgs::Has(std::string_view name) const {
  return std::any_of(opts.begin(), opts.end(),
                     [&](const auto& o) { return o.first == name; });
}

std::string ParsedArgs::Get(std::string_view name) const {
  std::string v;
  for (const auto& [n, value] : opts) {
    if (n == name) v = value;
  }
  return v;
}

std::vector<std::string> ParsedArgs::List(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [n, value] : opts) {
    if (n != name) continue;
    for (std::string_view item : Split(value, ',')) {
      if (!item.empty()) out.emplace_back(item);
    }
  }
  return out;
}

Result<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                             const std::vector<OptDef>& defs, bool stop_at_positional) {
  ParsedArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      out.positional.insert(out.positional.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (a.size() < 2 || a[0] != '-') {
      if (stop_at_positional) {
        out.positional.insert(out.positional.end(), args.begin() + i, args.end());
        break;
      }
      out.positional.push_back(a);
      continue;
    }
    if (a[1] == '-') {
      const size_t eq = a.find('=');
      const std::string name = a.substr(2, eq == std::string::npos ? eq : eq - 2);
      const auto d = std::find_if(defs.begin(), defs.end(),
                                  [&](const OptDef& o) { return o.long_name == name; });
      if (d == defs.end()) {
        return InvalidArgument("unrecognized option '" + Clip(a.substr(0, eq)) + "'");
      }
      if (!d->has_arg) {
        if (eq != std::string::npos) {
          return InvalidArgument("option '--" + name + "' doesn't allow an argument");
        }
        out.opts.emplace_back(KeyOf(*d), "");
      } else if (eq != std::string::npos) {
        out.opts.emplace_back(KeyOf(*d), a.substr(eq + 1));
      } else if (i + 1 < args.size()) {
        out.opts.emplace_back(KeyOf(*d), args[++i]);
      } else {
        return InvalidArgument("option '--" + name + "' requires an argument");
      }
      continue;
    }
    for (size_t k = 1; k < a.size(); ++k) {
      const char c = a[k];
      const auto d = std::find_if(defs.begin(), defs.end(),
                                  [&](const OptDef& o) { return o.short_name == c; });
      if (d == defs.end()) {
        return InvalidArgument(std::string("invalid option -- '") + c + "'");
      }
      if (!d->has_arg) {
        out.opts.emplace_back(KeyOf(*d), "");
        continue;
      }
      if (k + 1 < a.size()) {
        out.opts.emplace_back(KeyOf(*d), a.substr(k + 1));
      } else if (i + 1 < args.size()) {
        out.opts.emplace_back(KeyOf(*d), args[++i]);
      } else {
        return InvalidArgument(std::string("option requires an argument -- '") + c + "'");
      }
      break;
    }
  }
  return out;
}

Result<std::vector<JobSelector>> ParseJobSelectors(
    const std::vector<std::string>& words) {
  std::vector<JobSelector> out;
  for (const std::string& w : words) {
    const Status bad = InvalidArgument("Invalid job id " + Clip(w));
    const size_t us = w.find('_');
    const std::string_view head = std::string_view(w).substr(0, us);
    if (!AllDigits(head) || head.size() > 18 || std::stoll(std::string(head)) <= 0) {
      return bad;
    }
    const state::JobId id = std::stoll(std::string(head));
    if (us == std::string::npos) {
      out.push_back({id, -1});
      continue;
    }
    std::string_view tasks = std::string_view(w).substr(us + 1);
    if (tasks.size() > 2 && tasks.front() == '[' && tasks.back() == ']') {
      tasks = tasks.substr(1, tasks.size() - 2);
    } else if (!AllDigits(tasks)) {
      return bad;
    }
    std::optional<std::vector<long long>> nums =
        ExpandRanges(tasks, api::kMaxArrayTasks + 1);
    if (!nums) return bad;
    for (long long t : *nums) {
      if (t > api::kMaxArrayTaskId) return bad;
      out.push_back({id, static_cast<int>(t)});
    }
  }
  return out;
}

bool Matches(const JobSelector& s, const state::JobRecord& j) {
  const bool task = j.spec.array_task_id >= 0;
  if (s.task < 0) return j.id == s.id || (task && j.spec.array_job_id == s.id);
  return task && j.spec.array_job_id == s.id && j.spec.array_task_id == s.task;
}

std::string SelectorText(const JobSelector& s) {
  return s.task < 0 ? std::to_string(s.id)
                    : std::to_string(s.id) + "_" + std::to_string(s.task);
}

std::string JobIdText(const state::JobRecord& j) {
  if (j.spec.array_task_id >= 0) {
    return std::to_string(j.spec.array_job_id) + "_" +
           std::to_string(j.spec.array_task_id);
  }
  return std::to_string(j.id);
}

std::string SacctState(
    const state::JobRecord& j,
    const std::function<std::optional<uint32_t>(const std::string&)>& uid_of) {
  using state::JobState;
  const std::string reason = ToLower(j.reason);
  switch (j.state) {
    case JobState::kPending:
      return j.requeues > 0 ? "REQUEUED" : "PENDING";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kCompleted:
      return "COMPLETED";
    case JobState::kFailed:
      return "FAILED";
    case JobState::kTimeout:
      return "TIMEOUT";
    case JobState::kNodeFail:
      return "NODE_FAIL";
    case JobState::kOutOfMemory:
      return "OUT_OF_MEMORY";
    case JobState::kDeadline:
      return "DEADLINE";
    case JobState::kCancelled: {
      if (reason.find("preempt") != std::string::npos) return "PREEMPTED";
      constexpr std::string_view kBy = "cancelled by ";
      if (StartsWith(reason, kBy)) {
        const std::string who = j.reason.substr(kBy.size());
        // The canceller's uid as a string: no optional<uint32_t> read back here, which
        // GCC 12 at -Os (MinSizeRel) takes for maybe-uninitialized.
        std::string by = who;
        if (std::optional<uint32_t> uid = uid_of ? uid_of(who) : std::nullopt) {
          by = std::to_string(*uid);
        } else if (who == j.req.user) {
          by = std::to_string(j.spec.uid);
        }
        return "CANCELLED by " + by;
      }
      return "CANCELLED";
    }
  }
  return "UNKNOWN";
}

std::string ExitCodeText(const state::JobRecord& j) {
  return std::to_string(j.exit_code) + ":" + std::to_string(j.signal);
}

std::string UsageHint(std::string_view prog) {
  return "Try \"" + std::string(prog) + " --help\" for more information\n";
}

Result<LongFormatItem> ParseFormatItem(std::string_view item) {
  const size_t colon = item.find(':');
  LongFormatItem out{ToLower(item.substr(0, colon))};
  if (colon == std::string_view::npos) return out;
  std::string_view w = item.substr(colon + 1);
  if (!w.empty() && w[0] == '.') w.remove_prefix(1);
  std::optional<long long> n = ParseInt(w);
  if (!n || *n < 1 || *n > 1000) {
    return InvalidArgument("Invalid --Format width: " + Clip(item));
  }
  out.width = static_cast<int>(*n);
  return out;
}

}  // namespace hachi::cli::slurm
