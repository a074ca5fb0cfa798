// Interactive work (docs/steps.md): an allocation made and held by a command
// that waits for it (salloc; srun and hachi run outside an allocation), a job step run
// in an allocation with its output relayed through the server, and the allocation's
// end. Shared by hachi run, srun and salloc; each prints in its own name (`prog`).
// Installs signal handlers (SIGINT, SIGTERM, SIGHUP) while it waits; not thread-safe.
#pragma once

#include <string>

#include "api/protocol.h"
#include "cli/client.h"
#include "core/status.h"
#include "state/records.h"

namespace hachi::cli {

// Submits `request` as an interactive allocation (JobSpec::interactive: every node
// holds it, no command runs) and waits until it runs, saying what it waits for as
// Slurm's salloc/srun do ("srun: job 12 queued and waiting for resources (...)", then
// "srun: job 12 has been allocated resources"; with `announce`, salloc's "Pending job
// allocation 12" and "Granted job allocation 12" too). Ctrl-C while it waits cancels
// it. Returns the running job's record.
Result<state::JobRecord> Allocate(ApiClient& c, api::SubmitRequest request,
                                  const std::string& prog, bool announce);

// Runs `step` in running job `job` (POST /jobs/ID/steps), writes its tasks' output to
// this process's stdout and stderr as it comes (labelled "RANK: " with `label`), and
// returns srun's exit status for it (cli/slurm/srun_plan.h). Ctrl-C once forwards SIGINT
// to the tasks, twice within a second (or SIGTERM/SIGHUP) stops the step. With
// `step.pty`: this terminal in raw mode until the end (every key, Ctrl-C and Ctrl-Z
// too, goes to the remote terminal), its window size sent at the start and on each
// SIGWINCH, the keys sent on a second connection to `server`. Errors are printed
// "PROG: error: ..." and give 1.
int RunStep(ApiClient& c, const std::string& server, state::JobId job,
            api::StepRequest step, bool label, bool quiet, const std::string& prog);

// Follows step `step` of running job `job` as RunStep does once the step exists: its
// output to this process's stdout and stderr until it ends, and its exit status. An
// `observe`r (sattach) reads beside the step's srun (?observe=1: from the output the
// server still keeps, taking nothing from srun) and leaves on Ctrl-C or SIGTERM (exit
// 0) while the step runs on.
struct FollowOptions {
  bool label = false;
  bool quiet = false;
  bool pty = false;  // the step has a terminal: raw mode here, keys forwarded
  bool observe = false;
  // The start of the run the step belongs to: read that run's step even after the job
  // was requeued (its srun reads until done while the next run starts); 0: the current.
  Time run = 0;
};
int FollowStep(ApiClient& c, const std::string& server, state::JobId job, int step,
               const FollowOptions& options, const std::string& prog);

// Ends interactive allocation `job` with `exit_code` (POST /jobs/ID/complete).
Status Relinquish(ApiClient& c, state::JobId job, int exit_code);

// The calling process's environment and working directory, as a step inherits them
// (with SLURM_UMASK: AddUmask).
state::EnvList ProcessEnvironment();
// Sets SLURM_UMASK in `env` to this process's umask, as sbatch and srun send it: the
// job's files are created under it (api::JobUmask).
void AddUmask(state::EnvList* env);
std::string WorkingDirectory();

}  // namespace hachi::cli
