// StepStreams: the server's side of job steps in progress (docs/steps.md): for
// each step, the output its nodes' agents sent and srun has not read yet, what each
// node's agent has delivered, the tasks' exits, and which nodes are done. In memory
// only: a restarted server has none, and a stream is made again when an agent reports
// for a step the records say runs (its output from before the restart is lost).
//
// Output is one sequence per step (bytes, counting gaps): chunks from all nodes in the
// order they came. A reader asks from an offset and gets what follows; everything below
// the offset it asks from is dropped (it has it). Agents send each batch with their own
// offset in their node's stream, so a batch sent twice is taken once, and are told how
// far it was taken: once `max_held` bytes wait unread, no more is taken (the agent keeps
// it and its tasks wait on their writes), so a reader that falls behind or never comes
// costs bounded memory and no output. The same holds for a job's steps together
// (`max_held_per_job`): a job may run many steps, and each one's bound alone let 60
// unread steps of one job hold 300 MB. A reader that reconnects with its last offset
// loses nothing; one that asks from below what was dropped sees it as `lost`.
//
// Observers (sattach) read without dropping: besides what srun has not read, a stream
// keeps the last kObserverTail bytes srun has read, so an observer attaching or
// following alongside srun sees what came lately without taking it from srun.
//
// Thread-safety: every method may be called from any thread; one mutex guards all
// streams. Lock order: after the Controller's and the hub's locks. How long an ended
// stream is kept is measured on the Clock it is given (a test moves a FakeClock).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/protocol.h"
#include "core/clock.h"
#include "core/mutex.h"
#include "core/status.h"
#include "state/records.h"

namespace hachi::server {

// The topic a step output's long poll waits on.
std::string StepTopic(state::JobId job, int step);

class StepStreams {
 public:
  static constexpr int64_t kMaxHeld = 8 << 20;         // a step's unread output
  static constexpr int64_t kMaxHeldPerJob = 64 << 20;  // all of a job's steps'
  static constexpr int64_t kObserverTail = 64 << 10;   // read output kept for observers
  // `clock`: not owned, outlives this; never null.
  explicit StepStreams(int64_t max_held = kMaxHeld, const Clock* clock = RealClock(),
                       int64_t max_held_per_job = kMaxHeldPerJob)
      : max_held_(max_held), max_held_per_job_(max_held_per_job), clock_(clock) {}

  // A new step: its nodes, whether a failing task stops it (-K), whether it runs on a
  // terminal.
  void Open(const state::StepKey& key, std::vector<std::string> nodes,
            bool kill_on_bad_exit, bool pty = false) EXCLUDES(mu_);
  bool Has(const state::StepKey& key) const EXCLUDES(mu_);
  // kBusy, naming the bound, while job `job`'s steps hold max_held_per_job unread bytes:
  // a new step's output could not be taken either (StepService::CreateStep refuses it).
  Status RoomForStep(state::JobId job) const EXCLUDES(mu_);
  // Whether the step runs on a terminal (srun --pty): its input is taken.
  bool IsPty(const state::StepKey& key) const EXCLUDES(mu_);

  struct Added {
    int64_t next = 0;       // the agent's offset the server now holds up to
    bool all_done = false;  // this report made every node done (once)
    bool bad_exit = false;  // this report brought the step's first failing task (-K)
    bool kill_on_bad_exit = false;
  };
  // One node's report for a step. A step not open is opened with `nodes` (a restarted
  // server learning of a step from its agents). Output is taken up to the bound, a
  // chunk at a time (`next` says how far; `done` counts only with all of it taken).
  // `last_word`: the step has ended and its agent sends nothing more, so what does not
  // fit is kept as a gap the reader sees as lost, and the node is done.
  Added Add(const state::StepKey& key, const std::string& node,
            const api::StepReport& report, const std::vector<std::string>& nodes,
            bool last_word = false) EXCLUDES(mu_);

  struct Read {
    bool known = false;
    int64_t from = 0, next = 0, lost = 0;
    std::vector<api::OutputChunk> chunks;
    bool all_done = false;                   // every node reported done
    bool ended = false;                      // End was called
    std::chrono::microseconds ended_for{0};  // since End, by the Clock
    std::vector<api::TaskExit> exits;        // by rank
  };
  // From offset `from`, at most about `max_bytes` of data. The reader (srun) drops what
  // lies below `from`; an `observe`r drops nothing and may read the tail srun has read.
  Read ReadFrom(const state::StepKey& key, int64_t from, int64_t max_bytes,
                bool observe = false) EXCLUDES(mu_);
  // The tasks' exits so far, by rank.
  std::vector<api::TaskExit> Exits(const state::StepKey& key) const EXCLUDES(mu_);
  // The step's end is recorded: the stream is kept until its reader was told it is done
  // (Delivered), or `keep_for` after this call at most (Sweep).
  void End(const state::StepKey& key) EXCLUDES(mu_);
  // A reader got everything and the step's end.
  void Delivered(const state::StepKey& key) EXCLUDES(mu_);
  // Drops ended streams delivered, or ended longer than `keep_for` ago.
  void Sweep(std::chrono::microseconds keep_for) EXCLUDES(mu_);
  size_t size() const EXCLUDES(mu_);

 private:
  struct Stream {
    std::vector<std::string> nodes;
    bool kill_on_bad_exit = false;
    bool pty = false;
    bool bad_exit_seen = false;
    std::map<std::string, int64_t> node_next;  // each agent's offset taken
    std::set<std::string> nodes_done;
    bool all_done = false;
    std::map<int, api::TaskExit> exits;
    std::deque<api::OutputChunk> chunks;  // from offset `base`
    int64_t base = 0;                     // the offset of chunks.front()
    // What the reader dropped lately, up to kObserverTail data bytes, ending at `base`.
    std::deque<api::OutputChunk> seen;
    int64_t seen_held = 0;
    int64_t end = 0;   // the offset after the last chunk
    int64_t held = 0;  // data bytes in `chunks`
    bool ended = false;
    bool delivered = false;
    int64_t ended_at_us = 0;  // the Clock's monotonic time
  };
  Stream& OpenLocked(const state::StepKey& key, const std::vector<std::string>& nodes)
      REQUIRES(mu_);
  // `bytes` more (or, negative, fewer) held by stream `s` of `job`: its held and the
  // job's.
  void HoldLocked(state::JobId job, Stream* s, int64_t bytes) REQUIRES(mu_);
  int64_t JobHeldLocked(state::JobId job) const REQUIRES(mu_);

  const int64_t max_held_;
  const int64_t max_held_per_job_;
  const Clock* const clock_;
  mutable Mutex mu_;
  std::map<state::StepKey, Stream> streams_ GUARDED_BY(mu_);
  std::map<state::JobId, int64_t> job_held_ GUARDED_BY(mu_);  // held, summed per job
};

}  // namespace hachi::server
