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
constexpr std::array<JobStateNames, 9> kJobStates = {{
    {JobState::kPending, "PENDING", "PD"},
    {JobState::kRunning, "RUNNING", "R"},
    {JobState::kCompleted, "COMPLETED", "CD"},
    {JobState::kFailed, "FAILED", "F"},
    {JobState::kCancelled, "CANCELLED", "CA"},
    {JobState::kTimeout, "TIMEOUT", "TO"},
    {JobState::kNodeFail, "NODE_FAIL", "NF"},
    {JobState::kOutOfMemory, "OUT_OF_MEMORY", "OOM"},
    {JobState::kDeadline, "DEADLINE", "DL"},
}};

struct NodeStateNames {
  NodeState state;
  std::string_view name;
};
constexpr std::array<NodeStateNames, 4> kNodeStates = {{
    {NodeState::kUp, "up"},
    {NodeState::kDrained, "drained"},
    {NodeState::kDown, "down"},
    {NodeState::kBurnIn, "burn-in"},
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

std::string_view BurnInPhaseName(BurnInPhase p) {
  switch (p) {
    case BurnInPhase::kNone:
      return "";
    case BurnInPhase::kRunning:
      return "running";
    case BurnInPhase::kFailed:
      return "failed";
  }
  return "";
}

bool ParseBurnInPhase(std::string_view text, BurnInPhase* out) {
  for (BurnInPhase p :
       {BurnInPhase::kNone, BurnInPhase::kRunning, BurnInPhase::kFailed}) {
    if (text == BurnInPhaseName(p)) {
      *out = p;
      return true;
    }
  }
  return false;
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

}  // namespace hachi::state
