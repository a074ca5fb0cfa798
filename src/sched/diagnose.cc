#include "sched/diagnose.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>

#include "sched/eligibility.h"
#include "sched/features.h"
#include "sched/gpu_share.h"
#include "sched/window.h"

namespace hachi::sched {

void DiagnoseBlocked(CycleContext& ctx, const JobShape& job, const VerdictTally& tally,
                     Diagnosis* d) {
  const EligibleSet& e = ctx.eligible[job.eligible];
  PartitionFree f = ctx.FreeIn(e.partition);
  if (!e.select_key.empty()) {  // -C/-w/-x: only the nodes they allow
    f = {};
    for (int node : e.nodes) {
      if (!ctx.nodes[node].up) continue;
      const int k = ctx.nodes[node].free.size();
      f.total += k;
      if (k > f.largest) {
        f.largest = k;
        f.largest_node = node;
      }
    }
  }
  d->largest_free = f.largest;
  d->largest_free_node = f.largest_node;
  d->free_gpus = f.total;
  d->eligible_nodes = static_cast<int>(e.nodes.size());
  if (e.up == 0) {
    // With -C/-w/-x, Slurm's words: never (no node) or not now (all down).
    d->reason = e.select_key.empty() ? Reason::kNodesUnavailable
                : e.nodes.empty()    ? Reason::kBadConstraints
                                     : Reason::kReqNodeNotAvail;
    return;
  }
  // MIG devices (mig.h): too few free of its profile on any one node.
  if (job.mig && tally.mig_most_free < job.gpn) {
    d->reason = Reason::kMigBusy;
    d->free_gpus = tally.mig_free;
    d->largest_free = tally.mig_most_free;
    d->largest_free_node = -1;
    d->mig_total = tally.mig_total;
    return;
  }
  // A share that a node would take but for the user of the shares on its GPUs with
  // room: the most useful thing to say, whatever blocked the other nodes.
  if (job.share_milli > 0 && tally.other_user_gpus > 0) {
    d->reason = Reason::kMpsOtherUser;
    d->other_user_gpus = tally.other_user_gpus;
    return;
  }
  switch (tally.Main()) {
    case NodeVerdict::kIsolation:
      d->reason = Reason::kIsolation;
      return;
    case NodeVerdict::kReserved:
      d->reason = Reason::kReservedForOther;
      return;
    case NodeVerdict::kWindow:
      d->reason = Reason::kTimeWindow;
      for (int node : e.nodes) {  // the first window node it could otherwise use
        const int owner = ctx.nodes[node].window_owner;
        if (owner >= 0 && owner != e.partition) {
          d->partition = static_cast<int16_t>(owner);
          break;
        }
      }
      return;
    default:
      break;
  }
  // A job without GPUs waits for CPUs or memory: never "fragmented".
  d->reason = job.total_gpus() > 0 && f.total >= job.total_gpus() ? Reason::kFragmented
                                                                  : Reason::kResources;
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

const Job* FindRunning(const ClusterState& s, JobId id) {
  for (const Job& j : s.running) {
    if (j.id == id) return &j;
  }
  return nullptr;
}

// "5m", "1h", "90s", else FormatDuration's "1h30m": graces are mostly round.
std::string Short(Duration d) {
  if (d > 0 && d % kHour == 0) return std::to_string(d / kHour) + "h";
  if (d > 0 && d < kHour && d % kMinute == 0) return std::to_string(d / kMinute) + "m";
  if (d < kMinute) return std::to_string(d) + "s";
  return FormatDuration(d);
}

// "n1-n8", "n1-n3,n7", "gpu-a,gpu-b": runs of names with one prefix and consecutive
// numbers are folded.
std::string NodeList(const ClusterState& s, std::vector<int> nodes) {
  std::sort(nodes.begin(), nodes.end());
  auto split = [&](int node, std::string* prefix, long* num) {
    const std::string& name = NodeName(s, node);
    size_t i = name.size();
    while (i > 0 && std::isdigit(static_cast<unsigned char>(name[i - 1]))) --i;
    *prefix = name.substr(0, i);
    *num = i < name.size() && name.size() - i < 10 &&
                   (name[i] != '0' || i + 1 == name.size())
               ? std::stol(name.substr(i))
               : -1;
  };
  std::string out;
  for (size_t i = 0; i < nodes.size();) {
    std::string prefix, p2;
    long first, n;
    split(nodes[i], &prefix, &first);
    size_t j = i + 1;
    long last = first;
    while (first >= 0 && j < nodes.size()) {
      split(nodes[j], &p2, &n);
      if (p2 != prefix || n != last + 1) break;
      last = n;
      ++j;
    }
    if (!out.empty()) out += ",";
    out += NodeName(s, nodes[i]);
    if (j - i > 1) out += "-" + NodeName(s, nodes[j - 1]);
    i = j;
  }
  return out;
}

// What -C/-w/-x leave of the job's partition ("constraint 'ib&h100' matches
// 2 of 8 nodes of partition gpu8, 3 excluded"); "" without a selection.
std::string SelectionNote(const ClusterState& s, const Job& job) {
  const JobRequest& r = job.req;
  if (r.constraint.empty() && r.nodelist.empty() && r.exclude.empty()) return "";
  if (job.partition < 0 || job.partition >= static_cast<int>(s.partitions.size())) {
    return "";
  }
  const Partition& p = s.partitions[job.partition];
  Result<NodeSelection> sel = ResolveSelection(s, r);
  if (!sel.ok()) return sel.status().message();
  int match = 0, excluded = 0;
  for (int n : p.nodes) {
    if (std::binary_search(sel->excluded.begin(), sel->excluded.end(), n)) {
      ++excluded;
    } else if (SelectionAllows(s, *sel, std::max(r.nodes, 1), n) &&
               NodeMatchesStatic(s.nodes[n], r)) {
      ++match;
    }
  }
  std::string out;
  if (!r.constraint.empty()) out = "constraint '" + r.constraint + "'";
  if (!r.nodelist.empty()) out += (out.empty() ? "" : ", ") + ("nodelist " + r.nodelist);
  if (out.empty()) out = "the job";
  out += match == 0
             ? " matches no node of partition " + p.name
             : " matches " + std::to_string(match) + " of " +
                   std::to_string(p.nodes.size()) + " nodes of partition " + p.name;
  if (excluded > 0) out += ", excluded " + std::to_string(excluded) + " nodes";
  return out;
}

// The reasons whose words need nothing more: the whole text, else nullopt.
std::optional<std::string> WholeText(const Diagnosis& d, const ClusterState& state,
                                     const Job* pending, Time now) {
  switch (d.reason) {
    case Reason::kNone:
      return "";
    case Reason::kHeld:
      return "held";
    case Reason::kInternal:
      return "internal: allocator error choosing its GPUs; not started (the scheduler's "
             "errors name it)";
    case Reason::kDependency:
      if (pending && pending->deps_job > 0) {
        return "waiting for job " + std::to_string(pending->deps_job) + " to end";
      }
      return "waiting for a job it depends on";
    case Reason::kDependencyNeverMet:
      if (pending && pending->deps_job > 0) {
        return "job " + std::to_string(pending->deps_job) +
               " it depends on failed or does not exist; it can never run";
      }
      return "a job it depends on failed; it can never run";
    case Reason::kUserQuota:
      return "user " + (pending ? pending->req.user : std::string("?")) +
             " at quota: " + std::to_string(d.quota_used) + "/" +
             std::to_string(d.quota_limit) + " GPUs";
    case Reason::kAccountQuota:
      return "account " + (pending ? pending->req.account : std::string("?")) +
             " at quota: " + std::to_string(d.quota_used) + "/" +
             std::to_string(d.quota_limit) + " GPUs";
    case Reason::kBadConstraints:
      return (pending ? SelectionNote(state, *pending)
                      : std::string("its node selection")) +
             "; it can never run (BadConstraints)";
    case Reason::kReqNodeNotAvail:
      return (pending ? SelectionNote(state, *pending)
                      : std::string("its node selection")) +
             "; those nodes are down or drained (ReqNodeNotAvail)";
    case Reason::kBeginTime:
      return pending ? "not before " + Clock(pending->req.begin_time, now) + " (--begin)"
                     : std::string("not before its begin time (--begin)");
    case Reason::kDeadline:
      return pending ? "cannot end by its deadline " + Clock(pending->req.deadline, now) +
                           " (--deadline); it will not run"
                     : std::string("cannot end by its deadline (--deadline)");
    default:
      return std::nullopt;
  }
}

// kPreempting: how many jobs leave, of which partition, and when it may start.
std::string PreemptingText(const Diagnosis& d, const ClusterState& state, Time now) {
  const std::string of =
      d.partition >= 0 && d.partition < static_cast<int>(state.partitions.size())
          ? " of partition " + state.partitions[d.partition].name
          : " of lower tiers";
  std::string out = "waiting for " + std::to_string(d.preempt_jobs) +
                    (d.preempt_jobs == 1 ? " job" : " jobs") + of + " to leave (grace " +
                    Short(d.preempt_grace) + ")";
  if (d.earliest_start != kNever) {
    out += ", from " + Clock(d.earliest_start, now) + " on " +
           NodeName(state, d.earliest_node);
  }
  return out;
}

// What the job needs, and why that is not there now.
std::string NeedsText(const Diagnosis& d, const ClusterState& state, const Job* pending) {
  std::string out;
  // A job without GPUs: its CPUs and memory.
  const bool cpu_only = pending != nullptr && pending->req.TotalGpus() == 0;
  if (out.empty() && cpu_only) {
    out = "needs " + std::to_string(NodeCpus(pending->req)) + " CPUs and " +
          std::to_string(NodeMemory(pending->req)) + " MiB of memory, no GPU, on " +
          (d.needed_nodes > 1 ? "each of " + std::to_string(d.needed_nodes) + " nodes"
                              : std::string("one node"));
    switch (d.reason) {
      case Reason::kNodesUnavailable:
        out += "; every fitting node is down or drained";
        break;
      case Reason::kIsolation:
        out += "; the nodes with room are held by whole-node jobs";
        break;
      case Reason::kReservedForOther:
        out += "; the room is reserved for jobs ahead";
        break;
      default:
        out += "; no node has that much free";
        break;
    }
  }
  if (out.empty()) {
    out = d.needed_nodes > 1
              ? "needs " + std::to_string(d.needed_nodes) + " nodes with " +
                    std::to_string(d.needed_gpus) + " GPUs each"
              : "needs " + std::to_string(d.needed_gpus) + " GPUs on one node";
    switch (d.reason) {
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
        if (d.largest_free_node >= 0) {
          out += "; largest free set is " + std::to_string(d.largest_free) + " (node " +
                 NodeName(state, d.largest_free_node) + ")";
        } else {
          out += "; no GPU is free";
        }
        if (d.reason == Reason::kFragmented) {
          out += ", " + std::to_string(d.free_gpus) + " free in all";
        }
        break;
    }
  }
  return out;
}

// Why the job waits, before the selection note and the earliest start.
std::string WaitText(const Diagnosis& d, const ClusterState& state, const Job* pending) {
  if (d.reason == Reason::kPriority) {
    return "waiting behind higher-priority jobs (position " +
           std::to_string(d.queue_position) + ")";
  }
  std::string out;
  if (d.reason == Reason::kTimeWindow && d.partition >= 0 &&
      d.partition < static_cast<int>(state.partitions.size())) {
    const Partition& p = state.partitions[d.partition];
    out = "nodes " + NodeList(state, p.window_nodes) + " belong to partition " + p.name +
          " " + FormatWindows(p.windows);
  }
  if (d.reason == Reason::kMpsOtherUser) {
    const int milli = pending != nullptr ? pending->req.gpu_share_milli : 0;
    out = (milli > 0 ? "needs a " + ShareText(milli) + " share of one GPU"
                     : std::string("needs a share of one GPU")) +
          "; " + std::to_string(d.other_user_gpus) +
          (d.other_user_gpus == 1 ? " shared GPU with room holds another user's shares"
                                  : " shared GPUs with room hold other users' shares") +
          " (MPS serves one user per GPU)";
  }
  if (d.reason == Reason::kMigBusy) {
    const std::string profile = pending != nullptr ? pending->req.mig_profile : "MIG";
    const std::string nodes =
        pending != nullptr && pending->partition >= 0 &&
                pending->partition < static_cast<int>(state.partitions.size())
            ? "the nodes of " + state.partitions[pending->partition].name
            : std::string("its nodes");
    const std::string counts = std::to_string(d.free_gpus) + " of " +
                               std::to_string(d.mig_total) + " free on " + nodes;
    out = d.needed_gpus <= 1
              ? "no free " + profile + " MIG device: " + counts
              : "needs " + std::to_string(d.needed_gpus) + " " + profile +
                    " MIG devices on one node: at most " +
                    std::to_string(d.largest_free) + " free on one node, " + counts;
  }
  return out.empty() ? NeedsText(d, state, pending) : out;
}

}  // namespace

std::string Diagnosis::Format(const ClusterState& state, Time now) const {
  const Job* pending = FindPending(state, job);
  if (std::optional<std::string> whole = WholeText(*this, state, pending, now)) {
    return *whole;
  }
  if (reason == Reason::kPreempting) return PreemptingText(*this, state, now);
  std::string out = WaitText(*this, state, pending);
  if (pending != nullptr && reason != Reason::kPriority) {
    const std::string note = SelectionNote(state, *pending);
    if (!note.empty()) out += "; " + note;
  }
  if (earliest_start != kNever) {
    out += "; earliest start " + Clock(earliest_start, now) + " on " +
           NodeName(state, earliest_node);
    if (blocking_job != 0) {
      const Job* b = FindRunning(state, blocking_job);
      out +=
          " when job " + std::to_string(blocking_job) +
          (b != nullptr && b->preempt_kill_at == earliest_start ? " is preempted"
                                                                : " hits its time limit");
    }
  }
  return out;
}

}  // namespace hachi::sched
