// State changes as small typed records (DESIGN.md §2 state/, STYLE.md "state changes as
// small typed records that are both applied and logged", after LevelDB's VersionEdit):
// the server builds edits, the Store makes them durable, ApplyEdit applies them to the
// in-memory image. Loading replays nothing: the store keeps the current records, and an
// edit is one small UPDATE/INSERT there.
//
// Plain values; ApplyEdit is a pure function of its inputs.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "core/status.h"
#include "state/records.h"

namespace hachi::state {

struct JobSubmitted {  // a new job, pending (or held), with an id never used before
                       // (concurrent submits may commit out of id order)
  JobRecord record;
};
struct JobStarted {
  JobId id = 0;
  Time start_time = 0;
  std::vector<NodeAllocation> allocations;
  int master_port = 0;  // JobRecord::master_port
};
struct JobEnded {  // running or pending -> a final state
  JobId id = 0;
  JobState state = JobState::kCompleted;  // must be final
  Time end_time = 0;
  int exit_code = 0;
  int signal = 0;
  std::string reason;
  int64_t gpu_memory_peak_mib = 0;  // the run's (JobRecord::gpu_memory_peak_mib); 0: none
  UsageSummary usage = {};          // the run's (JobRecord::usage)
};
struct JobRequeued {  // running -> pending, same id and submit time; requeues + 1
  JobId id = 0;
  std::string reason;
};
struct JobHeld {  // pending only
  JobId id = 0;
  bool held = true;
  bool by_admin = false;  // a hold: an administrator's (JobRecord::held_by_admin)
};
// scontrol update: a job's request, name and comment replaced, as the
// server validated them. A pending job may change any of its request; a running one
// only its time limit (which the server tells its agents), name and comment.
struct JobUpdated {
  JobId id = 0;
  sched::JobRequest req;
  std::string name;
  std::string comment;
};
// Whether a running job may take `to` for its request `from`: equal but the time limit.
bool RunningRequestMayBecome(const sched::JobRequest& from, const sched::JobRequest& to);
struct NodeUpserted {  // an agent registered (again): the whole record
  NodeRecord record;
};
struct NodeStateChanged {
  std::string name;
  NodeState state = NodeState::kUp;
  std::string reason;
  Time since = 0;
};
struct NodeHealthChanged {  // the node's unhealthy GPUs, all of them, with their reasons
  std::string name;
  GpuSet unhealthy;
  std::map<int, std::string> reasons;  // only for GPUs in `unhealthy`
};

// Burn-in: the node's burn-in fields, all of them (NodeRecord). The node's
// state and GPU health change by their own edits in the same commit.
struct NodeBurnInChanged {
  std::string name;
  std::string passed;
  int run = 0;  // never below the record's
  BurnInPhase phase = BurnInPhase::kNone;
  GpuSet gpus;
};

struct TokenIssued {  // a new token: id and hash never used before
  TokenRecord record;
};
struct TokenRevoked {  // the token stops working at once; its record is removed
  std::string token_id;
};

// Job steps. A step starts only in a running job's current run, with the
// next step number of that run (StepRecord::step == the number of steps of the run so
// far); it ends once, into a final state.
struct StepStarted {
  StepRecord record;  // state kRunning, end_time 0
};
struct StepEnded {
  StepKey key;
  JobState state = JobState::kCompleted;  // must be final
  Time end_time = 0;
  int exit_code = 0;
  int signal = 0;
  std::string reason;
};
// The step number a new step of the run (job, job_start) takes: one past the run's
// highest, 0 for its first. Steps are numbered without gaps, so this is also how many
// the run has; reading only the last one is what lets the SQLite store check a
// StepStarted without loading the run's every step.
int NextStepNumber(const StateImage& image, JobId job, Time job_start);
// The run's steps still kRunning, in step order (what ends with the run).
std::vector<StepKey> RunningSteps(const StateImage& image, JobId job, Time job_start);

using Edit =
    std::variant<JobSubmitted, JobStarted, JobEnded, JobRequeued, JobHeld, JobUpdated,
                 NodeUpserted, NodeStateChanged, NodeHealthChanged, NodeBurnInChanged,
                 TokenIssued, TokenRevoked, StepStarted, StepEnded>;

// Applies one edit to `image`. Checks the transition first and leaves `image` unchanged
// on error (kNotFound: no such job/node/step; kInvalidArgument: an illegal transition
// such as starting a job that is not pending, ending one that already ended, a
// non-final end state, a duplicate job id, a step outside its job's running run or out
// of number order). The server applies an edit in memory only after the store has made
// it durable, and checks it before committing (so both agree).
Status ApplyEdit(StateImage* image, const Edit& edit);
// Checks without applying.
Status CheckEdit(const StateImage& image, const Edit& edit);

}  // namespace hachi::state
