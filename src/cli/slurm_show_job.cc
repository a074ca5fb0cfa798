// scontrol show job: Slurm 22.05's keys in its order (slurm_format.h FormatShowJob).
#include <cstdio>

#include "cli/slurm_format.h"
#include "cli/slurm_job_text.h"
#include "core/hostlist.h"
#include "core/printable.h"
#include "core/strings.h"
#include "core/time_format.h"
#include "sched/gpu_share.h"

namespace hachi::cli {

using sched::ShareText;
using slurm_job::DependencyText;
using slurm_job::EndReasonWord;
using slurm_job::ExpandPath;
using slurm_job::JoinArgs;
using slurm_job::LimitText;
using slurm_job::NodeCount;
using slurm_job::NodeNames;
using slurm_job::Or;
using slurm_job::PendingReason;
using slurm_job::ReqCpusPerNode;
using slurm_job::ReqMemPerNode;
using slurm_job::RunTime;
using slurm_job::TimeOrNa;
using slurm_job::TotalCpus;
using slurm_job::TotalMem;
using state::JobRecord;
using state::JobState;

namespace {

// "11.2G": GiB with one decimal, as `show job` gives GPU memory.
std::string GibText(int64_t mib) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fG", static_cast<double>(mib) / 1024.0);
  return buf;
}

// GPU indices as Slurm's GRES IDX: ranges ("0-3,6").
std::string IndexRanges(const GpuSet& gpus) {
  std::string out;
  const std::vector<int> idx = gpus.Indices();
  for (size_t i = 0; i < idx.size();) {
    size_t k = i;
    while (k + 1 < idx.size() && idx[k + 1] == idx[k] + 1) ++k;
    out += (out.empty() ? "" : ",") + std::to_string(idx[i]);
    if (k > i) out += "-" + std::to_string(idx[k]);
    i = k + 1;
  }
  return out;
}

}  // namespace

std::string FormatShowJob(const JobRecord& j, std::string_view diagnosis, Time now,
                          const ShowJobContext& context) {
  const bool pending = j.state == JobState::kPending;
  const bool running = j.state == JobState::kRunning;
  std::string o;
  auto line = [&](const std::string& s) { o += "   " + s + "\n"; };
  auto time_or_unknown = [](Time t) { return t > 0 ? FormatSlurmLocal(t) : "Unknown"; };
  o += "JobId=" + std::to_string(j.id) + " JobName=" + PrintableText(j.spec.name) + "\n";
  line("UserId=" + j.req.user + "(" + std::to_string(j.spec.uid) +
       ") GroupId=" + Or(context.group, "nobody") + "(" + std::to_string(j.spec.gid) +
       ") MCS_label=N/A");
  line("Priority=" + std::to_string(pending && !j.held ? context.priority : 0) +
       " Nice=" + std::to_string(j.req.nice) + " Account=" + Or(j.req.account, "(null)") +
       " QOS=" + Or(j.req.qos, "(null)"));
  line("JobState=" + std::string(state::JobStateName(j.state)) +
       " Reason=" + (pending ? PendingReason(j) : EndReasonWord(j)) +
       " Dependency=" + DependencyText(j));
  line("Requeue=" + std::string(j.spec.requeue ? "1" : "0") +
       " Restarts=" + std::to_string(j.requeues) +
       " BatchFlag=" + (j.spec.script().empty() ? "0" : "1") + " Reboot=0 ExitCode=" +
       std::to_string(j.exit_code) + ":" + std::to_string(j.signal));
  line("RunTime=" + FormatHms(RunTime(j, now)) +
       " TimeLimit=" + LimitText(j.req.time_limit, true) + " TimeMin=N/A");
  // Eligible (and accruing age) from its submit or --begin, unless held.
  const Time eligible = j.held ? 0 : std::max(j.submit_time, j.req.begin_time);
  line("SubmitTime=" + TimeOrNa(j.submit_time) +
       " EligibleTime=" + time_or_unknown(eligible));
  line("AccrueTime=" + time_or_unknown(eligible));
  std::string start = "Unknown", end = "Unknown";
  if (!pending && j.start_time > 0) start = FormatSlurmLocal(j.start_time);
  if (running && j.req.time_limit > 0)
    end = FormatSlurmLocal(j.start_time + j.req.time_limit);
  if (state::IsFinal(j.state) && j.end_time > 0) end = FormatSlurmLocal(j.end_time);
  line("StartTime=" + start + " EndTime=" + end +
       " Deadline=" + TimeOrNa(j.req.deadline));
  line("SuspendTime=None SecsPreSuspend=0 LastSchedEval=" +
       time_or_unknown(pending ? 0 : j.start_time) + " Scheduler=Main");
  line("Partition=" + j.req.partition);
  line("ReqNodeList=" + Or(j.req.nodelist, "(null)") +
       " ExcNodeList=" + Or(j.req.exclude, "(null)"));
  const std::string nodelist = CompressHostList(NodeNames(j));
  line("NodeList=" + Or(nodelist, "(null)"));
  if (!j.allocations.empty()) line("BatchHost=" + j.allocations[0].node);
  const int cpus = TotalCpus(j);
  // Tasks as asked (-n, or --ntasks-per-node on each node), else one a node.
  const int tasks = j.spec.ntasks > 0            ? j.spec.ntasks
                    : j.spec.ntasks_per_node > 0 ? j.spec.ntasks_per_node * NodeCount(j)
                                                 : NodeCount(j);
  line("NumNodes=" + std::to_string(NodeCount(j)) + " NumCPUs=" + std::to_string(cpus) +
       " NumTasks=" + std::to_string(tasks) + " CPUs/Task=" +
       std::to_string(std::max(1, j.spec.cpus_per_task)) + " ReqB:S:C:T=0:0:*:*");
  std::string tres =
      "cpu=" + std::to_string(cpus) + ",mem=" + std::to_string(TotalMem(j)) +
      "M,node=" + std::to_string(NodeCount(j)) + ",billing=" + std::to_string(cpus);
  if (j.req.TotalGpus() > 0) tres += ",gres/gpu=" + std::to_string(j.req.TotalGpus());
  line("TRES=" + tres);
  line("Socks/Node=* NtasksPerN:B:S:C=" + std::to_string(j.spec.ntasks_per_node) +
       ":0:*:* CoreSpec=*");
  if (!j.allocations.empty() && j.req.TotalGpus() > 0) {
    line("JOB_GRES=gpu:" + std::to_string(j.req.TotalGpus()));
    for (const state::NodeAllocation& a : j.allocations) {
      std::string s = "  Nodes=" + a.node + " CPUs=" + std::to_string(a.cpus) +
                      " Mem=" + std::to_string(a.memory_mib) +
                      " GRES=gpu:" + std::to_string(a.gpus.size()) +
                      "(IDX:" + IndexRanges(a.gpus) + ")";
      if (a.share_milli > 0) s += " GpuShare=" + ShareText(a.share_milli);
      if (a.gpu_memory_mib > 0) s += " GpuMem=" + std::to_string(a.gpu_memory_mib) + "M";
      // The MIG devices it holds, by UUID (its CUDA_VISIBLE_DEVICES).
      if (!a.mig.empty()) {
        std::string uuids;
        for (const std::string& u : a.mig) uuids += (uuids.empty() ? "" : ",") + u;
        s += " Mig=" + j.req.mig_profile + "(" + uuids + ")";
      }
      line(s);
    }
  }
  line("MinCPUsNode=" + std::to_string(ReqCpusPerNode(j)) +
       " MinMemoryNode=" + std::to_string(ReqMemPerNode(j)) + "M MinTmpDiskNode=0");
  line("Features=" + Or(j.req.constraint, "(null)") + " DelayBoot=00:00:00");
  line("OverSubscribe=" + std::string(j.req.exclusive ? "NO" : "OK") +
       " Contiguous=0 Licenses=(null) Network=(null)");
  line("Command=" + Or(JoinArgs(j.spec.argv()), "(null)"));
  line("WorkDir=" + j.spec.workdir);
  const std::string out_path = ExpandPath(Or(j.spec.stdout_path, "hachi-%j.out"), j);
  line("StdErr=" +
       (j.spec.stderr_path.empty() ? out_path : ExpandPath(j.spec.stderr_path, j)));
  line("StdIn=/dev/null");
  line("StdOut=" + out_path);
  line("Power=");
  if (j.req.TotalGpus() > 0) {
    const std::string& type = j.req.Mig() ? j.req.mig_profile : j.req.gpu_model;
    line("TresPerNode=gres:gpu:" + (type.empty() ? "" : type + ":") +
         std::to_string(j.req.GpusPerNode()));
  }
  // Hachi's own keys.
  // The most GPU memory it held on one GPU (NVML, from its agents), against
  // what a share was promised: what --gpu-mem should be.
  if (j.gpu_memory_peak_mib > 0) {
    std::string s = "GpuMemPeak=" + GibText(j.gpu_memory_peak_mib);
    if (j.req.gpu_memory_mib > 0) s += " GpuMemPromised=" + GibText(j.req.gpu_memory_mib);
    line(s);
  }
  // What the run did with its GPUs and CPUs (`hachi eff` says more).
  if (j.usage.samples > 0 || j.usage.cpu_seconds >= 0) {
    std::string s;
    if (j.usage.samples > 0) {
      s += "GpuUtil=" + std::to_string(static_cast<int>(j.usage.gpu_util + 0.5)) + "%";
      if (j.usage.idle_gpus > 0) s += " IdleGpus=" + std::to_string(j.usage.idle_gpus);
    }
    if (j.usage.cpu_seconds >= 0) {
      if (!s.empty()) s += " ";
      s += "CpuTime=" + FormatDuration(static_cast<Duration>(j.usage.cpu_seconds));
    }
    if (j.usage.mem_peak_mib >= 0) s += " MemPeak=" + GibText(j.usage.mem_peak_mib);
    line(s);
  }
  if (running && j.master_port > 0) {  // on the first node (BatchHost): MASTER_ADDR's
    line("MasterPort=" + std::to_string(j.master_port));
  }
  if (j.req.Shared()) {
    std::string s = "GpuShare=" + ShareText(j.req.gpu_share_milli);
    if (j.req.gpu_memory_mib > 0)
      s += " GpuMem=" + std::to_string(j.req.gpu_memory_mib) + "M";
    line(s);
  }
  if (j.req.exclusive) line("Exclusive=1");
  if (j.spec.array_task_id >= 0) {
    line("ArrayJobId=" + std::to_string(j.spec.array_job_id) +
         " ArrayTaskId=" + std::to_string(j.spec.array_task_id));
  }
  if (!j.spec.container_image.empty()) {
    line("ContainerImage=" + j.spec.container_image +
         (j.spec.shm_mib > 0 ? " ShmSize=" + std::to_string(j.spec.shm_mib) + "M" : ""));
  }
  if (!j.spec.comment.empty()) line("Comment=" + PrintableText(j.spec.comment));
  if (!pending && !j.reason.empty()) {  // a running job's: its fence (docs/fencing.md)
    line((j.state == JobState::kRunning ? "Note=" : "EndReason=") + j.reason);
  }
  if (j.held) line("Held=1");
  if (pending && !Trim(diagnosis).empty()) {
    line("Diagnosis:");
    for (std::string_view l : SplitLines(Trim(diagnosis))) line("  " + std::string(l));
  }
  return o;
}

}  // namespace hachi::cli
