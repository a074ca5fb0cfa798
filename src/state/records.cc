#include "state/records.h"

#include <array>

#include "core/strings.h"

namespace hachi::state {
namespace {

struct JobStateNames {
  JobState state;
  std::string_view name;
  std::string_view code;
};
constexpr std::array<JobStateNames, 8> kJobStates = {{
    {JobState::kPending, "PENDING", "PD"},
    {JobState::kRunning, "RUNNING", "R"},
    {JobState::kCompleted, "COMPLETED", "CD"},
    {JobState::kFailed, "FAILED", "F"},
    {JobState::kCancelled, "CANCELLED", "CA"},
    {JobState::kTimeout, "TIMEOUT", "TO"},
    {JobState::kNodeFail, "NODE_FAIL", "NF"},
    {JobState::kOutOfMemory, "OUT_OF_MEMORY", "OOM"},
}};

struct NodeStateNames {
  NodeState state;
  std::string_view name;
};
constexpr std::array<NodeStateNames, 3> kNodeStates = {{
    {NodeState::kUp, "up"},
    {NodeState::kDrained, "drained"},
    {NodeState::kDown, "down"},
}};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ToLower(a) == ToLower(b);
}

}  // namespace

std::string_view JobStateName(JobState s) {
  for (const auto& e : kJobStates) {
    if (e.state == s) return e.name;
  }
  return "UNKNOWN";
}

std::string_view JobStateCode(JobState s) {
  for (const auto& e : kJobStates) {
    if (e.state == s) return e.code;
  }
  return "?";
}

bool ParseJobState(std::string_view text, JobState* out) {
  for (const auto& e : kJobStates) {
    if (EqualsIgnoreCase(text, e.name) || EqualsIgnoreCase(text, e.code)) {
      *out = e.state;
      return true;
    }
  }
  return false;
}

std::string_view NodeStateName(NodeState s) {
  for (const auto& e : kNodeStates) {
    if (e.state == s) return e.name;
  }
  return "unknown";
}

bool ParseNodeState(std::string_view text, NodeState* out) {
  for (const auto& e : kNodeStates) {
    if (EqualsIgnoreCase(text, e.name)) {
      *out = e.state;
      return true;
    }
  }
  return false;
}

int64_t JobPayload::bytes() const {
  int64_t n = static_cast<int64_t>(script.size());
  for (const auto& [name, value] : env)
    n += static_cast<int64_t>(name.size() + value.size());
  return n;
}

const std::string& JobSpec::script() const {
  static const std::string* const kEmpty = new std::string();
  return payload ? payload->script : *kEmpty;
}

const EnvList& JobSpec::env() const {
  static const EnvList* const kEmpty = new EnvList();
  return payload ? payload->env : *kEmpty;
}

void JobSpec::SetPayload(std::string script, EnvList env) {
  if (script.empty() && env.empty()) {
    payload = nullptr;
    return;
  }
  payload =
      std::make_shared<const JobPayload>(JobPayload{std::move(script), std::move(env)});
}

void JobSpec::set_script(std::string s) { SetPayload(std::move(s), env()); }

void JobSpec::set_env(EnvList e) { SetPayload(script(), std::move(e)); }

}  // namespace hachi::state
