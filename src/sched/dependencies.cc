#include "sched/dependencies.h"

#include <algorithm>
#include <string>

namespace hachi::sched {

DependencyVerdict EvaluateDependencies(
    const std::vector<Dependency>& deps,
    const std::function<JobOutcome(JobId)>& outcome_of) {
  DependencyVerdict waiting;
  for (const Dependency& d : deps) {
    if (d.kind == DependencyKind::kSingleton) continue;  // the caller's (SingletonWaits)
    JobOutcome o = outcome_of(d.job);
    // afternotok: met by a failure, never by a success.
    bool never = o == JobOutcome::kUnknown ||
                 (d.kind == DependencyKind::kAfterOk && o == JobOutcome::kFailed) ||
                 (d.kind == DependencyKind::kAfterNotOk && o == JobOutcome::kSucceeded);
    if (never) return {DependencyState::kNeverMet, d.job, d.kind};
    if (o == JobOutcome::kNotFinished && waiting.state == DependencyState::kNone) {
      waiting = {DependencyState::kWaiting, d.job, d.kind};
    }
  }
  return waiting;
}

Status CheckDependencies(JobId self, const std::vector<Dependency>& deps) {
  std::vector<JobId> seen;
  for (const Dependency& d : deps) {
    if (d.kind == DependencyKind::kSingleton) continue;  // names no job
    if (d.job <= 0) {
      return InvalidArgument("dependency on job " + std::to_string(d.job) +
                             ": job ids are positive");
    }
    if (d.job == self) {
      return InvalidArgument("job " + std::to_string(self) + " depends on itself");
    }
    if (std::find(seen.begin(), seen.end(), d.job) != seen.end()) {
      return InvalidArgument("job " + std::to_string(d.job) +
                             " is named twice in the "
                             "dependencies");
    }
    seen.push_back(d.job);
  }
  return Status::Ok();
}

std::string_view DependencyKindName(DependencyKind kind) {
  for (const DependencyKindWord& w : kDependencyKinds) {
    if (w.kind == kind) return w.name;
  }
  return kDependencyKinds[0].name;
}

std::optional<DependencyKind> ParseDependencyKind(std::string_view name) {
  for (const DependencyKindWord& w : kDependencyKinds) {
    if (w.name == name) return w.kind;
  }
  return std::nullopt;
}

std::string DependencyKindNames(std::string_view last_sep) {
  std::string out;
  for (size_t i = 0; i < kDependencyKinds.size(); ++i) {
    if (i > 0) out += i + 1 == kDependencyKinds.size() ? last_sep : ", ";
    out += kDependencyKinds[i].name;
  }
  return out;
}

}  // namespace hachi::sched
