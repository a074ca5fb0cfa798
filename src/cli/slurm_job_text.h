// A job's fields in the words Slurm's views print them (squeue in slurm_format.cc,
// scontrol show job in slurm_show_job.cc): ids, reasons, counts as requested or
// allocated, times and paths. Internal to the CLI's formatters.
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"
#include "state/records.h"

namespace hachi::cli::slurm_job {

std::string Or(std::string_view v, std::string_view fallback);  // v, or fallback if ""
std::string JobIdText(const state::JobRecord& j);  // "12", an array task's "8_3"
std::vector<std::string> NodeNames(const state::JobRecord& j);
// The pending reason word: the server's, in Slurm's words, or Slurm's defaults.
std::string PendingReason(const state::JobRecord& j);
// Slurm's Reason word for a job that ended.
std::string EndReasonWord(const state::JobRecord& j);
// A running job warned by its partition's idle-GPU policy: the server sets its reason
// to "idle GPUs: ...".
bool IdleWarned(const state::JobRecord& j);
Duration RunTime(const state::JobRecord& j, Time now);
int NodeCount(const state::JobRecord& j);  // allocated, else requested
// CPUs and memory (MiB) on one node as requested, and in all (allocated, else asked).
int ReqCpusPerNode(const state::JobRecord& j);
int64_t ReqMemPerNode(const state::JobRecord& j);
int TotalCpus(const state::JobRecord& j);
int64_t TotalMem(const state::JobRecord& j);
// GPUs of the whole job: "8", "16", a share as "0.25".
std::string GpusText(const state::JobRecord& j);
std::string DependencyText(const state::JobRecord& j);  // "afterok:3,singleton"
std::string TimeOrNa(Time t);
std::string LimitText(Duration d, bool hms);  // "N/A" for none
// Slurm's output-path patterns: %j %x %A %a %u %N %%; relative paths under workdir.
std::string ExpandPath(std::string_view pattern, const state::JobRecord& j);
std::string JoinArgs(const std::vector<std::string>& argv);

}  // namespace hachi::cli::slurm_job
