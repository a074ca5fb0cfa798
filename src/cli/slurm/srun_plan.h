// srun's pure parts (docs/steps.md): its options as a step request, the
// labelled output of the tasks, and its exit status and error lines from the tasks'
// exits, in Slurm's words. srun.cc does the I/O.
//
// Pure functions and a value type; thread-compatible.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "api/protocol.h"
#include "core/status.h"
#include "state/records.h"

namespace hachi::cli::slurm {

struct SrunOptions {
  state::JobId job = 0;  // the allocation: --jobid, else SLURM_JOB_ID / HACHI_JOB_ID
  api::StepRequest step;
  bool label = false;       // -l: "RANK: " before each line
  bool unbuffered = false;  // -u: accepted (output is relayed as it comes)
  bool quiet = false;       // -Q: no informational lines
  bool pty = false;         // --pty
  std::string server;       // --server URL (Hachi's)
  bool help = false;
  bool usage = false;
  // Options srun outside an allocation passes on to the allocation it makes.
  std::vector<std::string> alloc_args;
};

// srun's command line, with the environment it runs in (`env`: its variables, as
// environ lists them; `cwd`: its working directory). Defaults as Slurm's srun reads them
// from an allocation's environment: -n from SLURM_NTASKS, --ntasks-per-node from
// SLURM_NTASKS_PER_NODE, --jobid from SLURM_JOB_ID (or HACHI_JOB_ID). `job` stays 0
// outside an allocation. Errors in Slurm's words ("srun: error: ...": without the
// prefix).
Result<SrunOptions> ParseSrunArgs(const std::vector<std::string>& args,
                                  const state::EnvList& env, const std::string& cwd);

// Turns the relayed chunks into what srun writes: with `label`, each line of task T's
// output prefixed "T: " (a line split across chunks is prefixed once; what is left
// without a newline at the end is written by Flush). Without, the bytes as they came.
class OutputLabeler {
 public:
  explicit OutputLabeler(bool label) : label_(label) {}
  // What to write to fd 1 and fd 2 for `c` (a chunk with `lost` gives a note on fd 2).
  std::pair<std::string, std::string> Feed(const api::OutputChunk& c);
  // The partial last lines, each ended with a newline.
  std::pair<std::string, std::string> Flush();

 private:
  bool label_;
  std::map<std::pair<int, int>, std::string> partial_;  // (task, fd) -> unfinished line
};

// Output the relay lost before srun read it (a restarted server's buffers, a step ended
// with its output still on the way, output the server refused from the agent), counted so
// that srun and hachi run never end as if all of it had come: each loss is a warning as
// it is seen (OutputLabeler), and at the end one line and a failing exit status.
class LostOutput {
 public:
  void Count(const api::StepOutput& out);
  int64_t bytes() const { return bytes_; }
  // "PROG: N bytes of output lost (...)", or "" when nothing was.
  std::string Line(const std::string& prog) const;
  // The exit status given the tasks' `status`: a clean one becomes 1 when output was
  // lost.
  int ExitStatus(int status) const { return bytes_ > 0 && status == 0 ? 1 : status; }

 private:
  int64_t bytes_ = 0;
};

// srun's exit status from its tasks' exits: the highest exit code; 128 + the signal for
// a task killed by one (the highest such); 2 when a task could not start (Slurm's
// "execve(): ... No such file or directory"); 0 when every task exited 0.
int SrunExitStatus(const std::vector<api::TaskExit>& exits);

// Slurm's error lines for the tasks that failed, grouped by node and outcome as
// srun prints them: "srun: error: node1: task 3: Exited with exit code 2",
// "srun: error: node1: tasks 0-1: Killed", "srun: error: node2: task 4: Terminated".
std::vector<std::string> TaskErrorLines(const std::vector<api::TaskExit>& exits);

}  // namespace hachi::cli::slurm
