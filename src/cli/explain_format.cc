#include "cli/explain_format.h"

#include "cli/slurm_format.h"
#include "core/time_format.h"
#include "sched/gpu_share.h"

namespace hachi::cli {
namespace {

std::string Gpus(int n) { return std::to_string(n) + (n == 1 ? " GPU" : " GPUs"); }

std::string Needs(const report::JobExplain& e) {
  if (e.gpu_share_milli > 0)
    return "a " + sched::ShareText(e.gpu_share_milli) + " share of one GPU";
  return e.needed_nodes > 1 ? std::to_string(e.needed_gpus) + " on each of " +
                                  std::to_string(e.needed_nodes) + " nodes"
                            : std::to_string(e.needed_gpus) + " on one node";
}

}  // namespace

std::string FormatExplain(const report::JobExplain& e, std::string_view indent,
                          bool title) {
  const std::string in(indent);
  const std::string more = in + "  ";
  std::string o;
  if (title) {
    o += in + "Job " + std::to_string(e.job) + " (" + e.state +
         (e.reason.empty() ? "" : ", " + e.reason) + ")" +
         (e.diagnosis.empty() ? "" : ": " + e.diagnosis) + "\n";
  }
  if (e.state == "PENDING" && e.reason != "Held") {
    if (e.queue_position > 0) {
      o += in + "Queue: position " + std::to_string(e.partition_position) + " of " +
           std::to_string(e.partition_length) + " in partition " + e.partition + ", " +
           std::to_string(e.queue_position) + " of " + std::to_string(e.queue_length) +
           " overall (cycle at " + FormatSlurmLocal(e.diagnosed_at) + ")\n";
    } else {
      o += in + "Queue: not yet seen by a scheduling cycle\n";
    }
    o += in + "Largest free set now: ";
    o += e.largest_free_node.empty()
             ? std::string("no GPU free on a node it could use")
             : Gpus(e.largest_free) + " on " + e.largest_free_node + ", " +
                   Gpus(e.free_gpus) + " free in all on nodes it could use";
    o += "; it needs " + Needs(e) + "\n";
    if (!e.nodes.empty()) {
      o += in + "Nodes:\n";
      for (const report::ExplainNodes& n : e.nodes) o += more + n.text + "\n";
    }
    if (e.earliest_start > 0) {
      o += in + "Earliest start: " + FormatSlurmLocal(e.earliest_start) +
           (e.earliest_node.empty() ? "" : " on " + e.earliest_node) +
           (e.blocking_job != 0 ? ", when job " + std::to_string(e.blocking_job) + " ends"
                                : "") +
           " (backfill reservation, from time limits)\n";
    } else {
      o += in + "Earliest start: not estimated (no reservation this cycle)\n";
    }
  }
  if (!e.history.empty()) {
    o += in + "History:\n";
    for (const report::ExplainEvent& h : e.history) {
      o += more + (h.time > 0 ? FormatSlurmLocal(h.time) : std::string(19, ' ')) + "  " +
           h.text + "\n";
    }
  }
  return o;
}

}  // namespace hachi::cli
