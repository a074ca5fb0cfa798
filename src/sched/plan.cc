#include "sched/plan.h"

namespace hachi::sched {

std::string_view ReasonName(Reason r) {
  switch (r) {
    case Reason::kNone:
      return "None";
    case Reason::kPriority:
      return "Priority";
    case Reason::kResources:
      return "Resources";
    case Reason::kFragmented:
      return "Fragmented";
    case Reason::kReservedForOther:
      return "Reserved";
    case Reason::kUserQuota:
      return "UserQuota";
    case Reason::kAccountQuota:
      return "AccountQuota";
    case Reason::kDependency:
      return "Dependency";
    case Reason::kDependencyNeverMet:
      return "DependencyNeverSatisfied";
    case Reason::kHeld:
      return "Held";
    case Reason::kIsolation:
      return "Isolation";
    case Reason::kNodesUnavailable:
      return "NodesUnavailable";
    case Reason::kPreempting:
      return "Preempting";
    case Reason::kTimeWindow:
      return "TimeWindow";
    case Reason::kInternal:
      return "Internal";
    case Reason::kBadConstraints:
      return "BadConstraints";
    case Reason::kReqNodeNotAvail:
      return "ReqNodeNotAvail";
    case Reason::kBeginTime:
      return "BeginTime";
    case Reason::kDeadline:
      return "DeadLine";
    case Reason::kMpsOtherUser:
      return "MpsOtherUser";
    case Reason::kMigBusy:
      return "MigBusy";
  }
  return "?";
}

}  // namespace hachi::sched
