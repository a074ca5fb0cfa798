// A running job's progress on the server (not stored: rebuilt from the records and the
// agents' reports after a restart), and how its end is worded from the exits its parts
// reported. Pure values and functions; thread-compatible (the Controller keeps its
// RunInfos under its lock).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/launch_spec.h"
#include "core/time.h"
#include "state/edits.h"
#include "state/records.h"

namespace hachi::server {

struct RunInfo {
  int parts_left = 0;
  // Issue 20: the most GPU memory its processes held on one GPU (MiB), from its agents'
  // NVML process reports; stored with the job when the run ends.
  int64_t gpu_memory_peak_mib = 0;
  // Nodes whose part has ended: an agent may report one exit twice (its report was
  // answered but the answer lost), and a gang must not end while a part still runs.
  std::vector<std::string> ended_on;
  std::optional<api::JobExit> worst;  // first failing part, else the last
  bool cancel_requested = false;
  std::string cancel_reason;
  bool requeue_on_exit = false;  // preempted with requeue, or its GPU left service
  std::string requeue_reason;    // then: why ("" = "preempted")
  Time preempt_kill_at = kNever;
  // A part's node was lost and its fence passed (Controller::FenceLocked): the other
  // parts were told to stop; set once.
  bool fenced = false;
  // A job whose batch script runs on its first node only (JobSpec::batch_on_first_node):
  // that part has ended, so the job's end is decided and the other parts (holding their
  // nodes) are being stopped; their exits no longer count for it.
  bool batch_ended = false;
  // An interactive allocation its owner ended (Controller::CompleteAllocation): it ends
  // with this exit code once its holders have stopped.
  bool allocation_done = false;
  int allocation_exit = 0;
};

// Counts `exit` of the part on `node` into `info` (the first failing part's exit is the
// job's, unless !counts_for_end: a holder stopped after the batch ended). False when
// that part's exit was counted already (a repeated report).
bool CountExit(RunInfo* info, const std::string& node, const api::JobExit& exit,
               int parts, bool counts_for_end = true);

// The job's end from its worst exit: COMPLETED on exit 0, FAILED with the code or signal,
// TIMEOUT, OUT_OF_MEMORY, NODE_FAIL for a run no agent watched; CANCELLED (with the
// canceller's reason) whenever a cancel was asked for and the job did not complete.
state::JobEnded EndOf(const state::JobRecord& job, const RunInfo& info, Time now);

}  // namespace hachi::server
