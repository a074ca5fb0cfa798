// Job dependencies (after-ok / after-any): whether a pending job may run yet, from what
// the caller knows of the jobs it depends on. The scheduler itself only reads the
// result (Job::deps, Job::deps_job); the server and the simulator evaluate it when a job
// is submitted and whenever a job it depends on ends. Pure; thread-safe.
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sched/cluster.h"

namespace hachi::sched {

// How a job the dependent waits on stands, as its owner knows it.
enum class JobOutcome : uint8_t {
  kNotFinished,  // pending or running
  kSucceeded,    // exited 0
  kFailed,       // failed, cancelled, timed out, node lost
  kUnknown,      // no such job (never submitted, or purged)
};

struct DependencyVerdict {
  DependencyState state = DependencyState::kNone;
  JobId job = 0;  // the dependency that decided it (waiting on / never met by); 0 if none
  DependencyKind kind = DependencyKind::kAfterOk;
};

// after-ok: met when the job succeeded; never met when it failed or is unknown.
// after-any: met when the job finished in any way; never met when it is unknown.
// after-not-ok: met when the job failed; never met when it succeeded or is
// unknown. singleton: skipped here (the caller knows names; the server waits while an
// earlier job of the same name and user is pending or running, reason Dependency).
// All must be met (Slurm's ','): any never-met one decides, else the first waiting one.
DependencyVerdict EvaluateDependencies(
    const std::vector<Dependency>& deps,
    const std::function<JobOutcome(JobId)>& outcome_of);

// Submit-time checks that need no other job: a job may not depend on itself and may
// name a job at most once. kInvalidArgument naming the job id.
Status CheckDependencies(JobId self, const std::vector<Dependency>& deps);

// Each dependency kind's one name: the API's, the stored rows' (state/row_codec.cc) and
// Slurm's --dependency word. Rows store these names, so a name never changes.
struct DependencyKindWord {
  DependencyKind kind;
  std::string_view name;
};
inline constexpr std::array<DependencyKindWord, 4> kDependencyKinds = {{
    {DependencyKind::kAfterOk, "afterok"},
    {DependencyKind::kAfterAny, "afterany"},
    {DependencyKind::kAfterNotOk, "afternotok"},
    {DependencyKind::kSingleton, "singleton"},
}};

std::string_view DependencyKindName(DependencyKind kind);
// The kind named exactly (lower case, as the table spells it); nullopt for any other
// word.
std::optional<DependencyKind> ParseDependencyKind(std::string_view name);
// The names for a message: "afterok, afterany, afternotok, singleton" (last_sep ", "),
// or "... afternotok or singleton" (last_sep " or ").
std::string DependencyKindNames(std::string_view last_sep = ", ");

}  // namespace hachi::sched
