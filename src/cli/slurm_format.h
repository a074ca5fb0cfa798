// What `hachi queue`, `hachi show`, `hachi nodes` and `hachi stats` print, in Slurm's
// shapes (squeue, scontrol show job, sinfo -N): pure renderers from the server's records
// to text, so the commands are thin and the output is golden-tested
// (src/cli/testdata/). Format codes and widths: docs/cli.md.
//
// Times print in the local time zone, as Slurm's do (tests set TZ=UTC). Pure functions
// of their arguments and TZ; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "report/job_stats.h"
#include "state/records.h"

namespace hachi::cli {

// squeue's default columns, with GPUS added before NODELIST(REASON).
inline constexpr std::string_view kDefaultQueueFormat =
    "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %.5b %R";
// One line per node (sinfo -N), with GPUs and CPUs as allocated/idle/other/total; STATE
// one wider than sinfo's, for "burn-in".
inline constexpr std::string_view kDefaultNodesFormat =
    "%-10N %-16P %-7t %-14G %.13j %.14C %.8m %E";

// ---- hachi queue ----

struct QueueFilter {
  std::vector<std::string> users;       // -u: any of these; empty = everyone
  std::vector<std::string> partitions;  // -p
  std::vector<state::JobState>
      states;                     // -t; empty = pending and running (squeue's default)
  std::vector<state::JobId> ids;  // -j
};
// Parses "-t" lists as squeue does: "PD,R", "pending,running", "all" (every state).
Result<std::vector<state::JobState>> ParseStateList(std::string_view csv);
std::vector<state::JobRecord> FilterJobs(const std::vector<state::JobRecord>& jobs,
                                         const QueueFilter& filter);
// squeue's default order: partition, then state code (PD before R), then job id.
void SortForQueue(std::vector<state::JobRecord>* jobs);

// squeue -o: codes %i %F %K %P %j %u %a %q %t %T %M %l %L %D %R %r %N %C %m %V %S %e %b
// %k %Z %E; empty `format` = kDefaultQueueFormat. Rows in the order given.
Result<std::string> FormatQueue(const std::vector<state::JobRecord>& jobs, Time now,
                                std::string_view format = {});

// One squeue code's column title and value (the Slurm front-ends, cli/slurm/, render
// their own lines from them).
std::string QueueFieldTitle(char code);
std::string QueueFieldValue(const state::JobRecord& j, Time now, char code);
// One `hachi nodes` (sinfo -N -o) code's column title ("?" for none), and its value for
// a node.
std::string NodeFieldTitle(char code);
std::string NodeFieldValue(const state::NodeStatus& n, char code);

// ---- hachi show ----

// What scontrol show job knows besides the record: the job's group's name (getgrgid;
// "" when unknown: "nobody", as Slurm's) and, for a pending job, its priority as the
// queue order computes it (GET /priority; 0 otherwise: Hachi keeps no priority once a
// job starts).
struct ShowJobContext {
  std::string group;
  long long priority = 0;
};

// scontrol show job -d: key=value lines, Slurm 22.05's keys in its order where Hachi has
// the value (AllocNode:Sid is left out: the submit host is not recorded), the GPUs of
// each node ("     Nodes=n1 CPUs=8 Mem=65536 GRES=gpu:4(IDX:0-3)"), Hachi's own keys
// after, and for a pending job `diagnosis` (the scheduler's text, may be multi-line)
// under "   Diagnosis:".
std::string FormatShowJob(const state::JobRecord& job, std::string_view diagnosis,
                          Time now, const ShowJobContext& context = {});

// ---- hachi nodes ----

// sinfo -N -o: codes %N %n %P %t %T %G %j (GPUs A/I/O/T, Hachi's) %C %c %m %e %O %E %D
// %o; empty `format` = kDefaultNodesFormat. One line per node, partitions joined by ','.
Result<std::string> FormatNodes(const std::vector<state::NodeStatus>& nodes,
                                std::string_view format = {});
// Which job holds each GPU of a node, four GPUs a line, within 80 columns:
//   n1  8x NVIDIA H100 80GB HBM3  nvswitch  mixed
//     gpu0 1234          gpu1 1234          gpu2 1240 sh=750   gpu3 free
// "sh=N": thousandths of the GPU given to shares; "UNHEALTHY" / "!bad": drained by
// health checks.
std::string FormatGpuPicture(const state::NodeStatus& node);
// `show node`'s line on its agent's clock against the server's (api/clock_offset.h):
// "  clock: +0.01s off the server's", and what to do when it is past the bound.
std::string FormatClockLine(const state::NodeStatus& node);

// ---- hachi stats ----

std::string FormatStats(const report::JobStats& stats);

// ---- pieces, exposed for the commands and tests ----

// squeue's TIME: "0:03", "12:30", "3:05:00", "2-04:00:00".
std::string FormatElapsed(Duration d);
// scontrol's RunTime/TimeLimit: "00:00:03", "2-04:00:00".
std::string FormatHms(Duration d);
// The short node-state names of sinfo: "idle", "mix", "alloc", "drain", "drng", "down"
// (long: "idle", "mixed", "allocated", "drained", "draining", "down").
// A burst node not on shows as Slurm shows a powered-down or powering node: "idle~"
// (off), "idle#" (resuming), "idle%" (suspending), "down~" (its resume failed).
std::string NodeStateText(const state::NodeStatus& node, bool long_form);
// Whether hachi nodes shows the node as "burn-in": its checks run (a burst node whose
// burn-in failed after its resume shows its power instead: "down~").
bool InBurnIn(const state::NodeStatus& node);
// scontrol show node's State=: "IDLE", "MIXED", "IDLE+CLOUD+POWERED_DOWN", ...
std::string NodeStateFlags(const state::NodeStatus& node);

}  // namespace hachi::cli
