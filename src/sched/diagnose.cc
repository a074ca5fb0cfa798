#include "sched/diagnose.h"

#include <cstdio>
#include <string>

namespace hachi::sched {

void DiagnoseBlocked(CycleContext& ctx, const JobShape& job, const VerdictTally& tally,
                     Diagnosis* d) {
  const EligibleSet& e = ctx.eligible[job.eligible];
  const PartitionFree& f = ctx.FreeIn(e.partition);
  d->largest_free = f.largest;
  d->largest_free_node = f.largest_node;
  d->free_gpus = f.total;
  d->eligible_nodes = static_cast<int>(e.nodes.size());
  if (e.up == 0) {
    d->reason = Reason::kNodesUnavailable;
    return;
  }
  switch (tally.Main()) {
    case NodeVerdict::kIsolation:
      d->reason = Reason::kIsolation;
      return;
    case NodeVerdict::kReserved:
      d->reason = Reason::kReservedForOther;
      return;
    default:
      break;
  }
  d->reason = f.total >= job.total_gpus() ? Reason::kFragmented : Reason::kResources;
}

namespace {

std::string Clock(Time t, Time now) {
  char buf[48];
  const Time day = 86400;
  auto floor_div = [&](Time a) { return a >= 0 ? a / day : -((-a + day - 1) / day); };
  const Time sod = t - floor_div(t) * day;
  const Time days = floor_div(t) - floor_div(now);
  if (days == 0) {
    std::snprintf(buf, sizeof buf, "%02d:%02d", static_cast<int>(sod / 3600),
                  static_cast<int>(sod / 60 % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%02d:%02d (+%lldd)", static_cast<int>(sod / 3600),
                  static_cast<int>(sod / 60 % 60), static_cast<long long>(days));
  }
  return buf;
}

std::string NodeName(const ClusterState& s, int node) {
  if (node >= 0 && node < static_cast<int>(s.nodes.size())) return s.nodes[node].name;
  return "node " + std::to_string(node);
}

const Job* FindPending(const ClusterState& s, JobId id) {
  for (const Job& j : s.pending) {
    if (j.id == id) return &j;
  }
  return nullptr;
}

}  // namespace

std::string Diagnosis::Format(const ClusterState& state, Time now) const {
  const Job* pending = FindPending(state, job);
  std::string out;
  switch (reason) {
    case Reason::kNone:
      return "";
    case Reason::kHeld:
      return "held";
    case Reason::kDependency:
      return "waiting for a job it depends on";
    case Reason::kDependencyNeverMet:
      return "a job it depends on failed; it can never run";
    case Reason::kUserQuota:
      return "user " + (pending ? pending->req.user : std::string("?")) +
             " at quota: " + std::to_string(quota_used) + "/" +
             std::to_string(quota_limit) + " GPUs";
    case Reason::kAccountQuota:
      return "account " + (pending ? pending->req.account : std::string("?")) +
             " at quota: " + std::to_string(quota_used) + "/" +
             std::to_string(quota_limit) + " GPUs";
    case Reason::kPriority:
      out = "waiting behind higher-priority jobs (position " +
            std::to_string(queue_position) + ")";
      break;
    default:
      break;
  }
  if (out.empty()) {
    out = needed_nodes > 1 ? "needs " + std::to_string(needed_nodes) + " nodes with " +
                                 std::to_string(needed_gpus) + " GPUs each"
                           : "needs " + std::to_string(needed_gpus) + " GPUs on one node";
    switch (reason) {
      case Reason::kNodesUnavailable:
        out += "; every fitting node is down or drained";
        break;
      case Reason::kIsolation:
        out += "; the free GPUs are on nodes held by whole-node jobs";
        break;
      case Reason::kReservedForOther:
        out += "; the fitting GPUs are reserved for jobs ahead";
        break;
      default:
        if (largest_free_node >= 0) {
          out += "; largest free set is " + std::to_string(largest_free) + " (node " +
                 NodeName(state, largest_free_node) + ")";
        } else {
          out += "; no GPU is free";
        }
        if (reason == Reason::kFragmented) {
          out += ", " + std::to_string(free_gpus) + " free in all";
        }
        break;
    }
  }
  if (earliest_start != kNever) {
    out += "; earliest start " + Clock(earliest_start, now) + " on " +
           NodeName(state, earliest_node);
    if (blocking_job != 0) {
      out += " when job " + std::to_string(blocking_job) + " hits its time limit";
    }
  }
  return out;
}

}  // namespace hachi::sched
