// sstat under Slurm's name (docs/slurm.md "sstat"): what running jobs use so far, in
// Slurm 22.05's fields (`-o JobID,MaxRSS,AveCPU`, `-a`, `-n`, `-p`, `-P`).
//
// Hachi measures a job's whole allocation (its cgroup, which holds its batch script and
// every step's tasks), not each step, so sstat prints one line per running job, its
// JobID the job's own id; the figures are the ones sacct prints for it when it ends
// (AveCPU, MaxRSS, TRESUsageIn*: CPU time, peak memory, GPU utilisation and memory).
// Fields Hachi does not measure (disk, pages, VM size, energy, frequencies) are blank.
//
// Pure functions of their arguments; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "cli/slurm/print_fields.h"
#include "cli/slurm/slurm_text.h"
#include "core/status.h"
#include "state/records.h"

namespace hachi::cli::slurm {

struct SstatOptions {
  bool help = false, usage = false;
  std::vector<JobSelector> jobs;  // -j or words
  bool all_steps = false;         // -a (every line is the job's own anyway)
  bool pids = false;              // -i: JobID, Nodelist, Pids
  std::string format;             // -o (empty: Slurm's default fields)
  FieldOutput out;
  std::string server;
};
// kInvalidArgument "You didn't give me any jobs to stat." without a job; sstat's
// `Invalid field requested: "X"`.
Result<SstatOptions> ParseSstatArgs(const std::vector<std::string>& args);

struct SstatOutput {
  std::string text;                 // stdout: the header, then a line per running job
  std::vector<std::string> errors;  // "couldn't get steps for job 9", "No steps running
                                    // for job 8" (sstat still exits 0)
};
// `jobs`: the records the selectors may name (running ones carry their usage so far).
SstatOutput RenderSstat(const SstatOptions& o, const std::vector<state::JobRecord>& jobs);

}  // namespace hachi::cli::slurm
