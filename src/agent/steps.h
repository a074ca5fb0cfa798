// StepRunner: the tasks of job steps on this node (docs/steps.md). A step is
// one `srun` inside a job's allocation; the server sends each node its part
// (api::StepLaunch: the ranks to run here), and the runner starts those tasks inside the
// job's run — its cgroup, its user, its node's GPUs (or each task's own with
// --gpus-per-task), the environment StepEnvironment gives — each in a session of its
// own, with stdin from /dev/null and stdout/stderr on pipes (or in files, srun -o/-e).
// A --pty step's one task gets a terminal instead (a pseudo-terminal the agent opens,
// owned by the job's user, its controlling terminal, srun's window size): what it
// writes comes back as its stdout, what srun's user types is written to it (Input).
//
// What the tasks write goes to the server, which relays it to srun
// (POST /agents/NODE/steps, api::StepReport): the runner reads the pipes as data comes
// and keeps what the server has not acknowledged, up to `buffer_bytes` per step. Flow
// control, as Slurm's: once a step holds that much, its pipes are not read until the
// server takes some, so its tasks wait on their writes — a slow reader (srun, and the
// server's bounded buffer behind it) slows the tasks and loses nothing. A batch is sent
// again until acknowledged, with the offset that lets the server take it once; the
// acknowledgement says how far the server took it, and what it held back is offered
// again after a short wait (5 ms, doubling to 100 ms while none is taken). Each batch
// is sized by its JSON, not by the bytes read (a NUL takes several bytes there), far
// below the server's body limit, a chunk cut where needed. A batch the server refuses
// (400, 413) is not sent again as it was: its parts go one at a time, and a part
// refused alone has what it offered dropped (marked lost in the step's output), then,
// refused again, is given up; so one step's output never blocks another's.
//
// A task's end: when its process exits, what is left of its process group is killed
// (Slurm's stepd ends the step's processes the same way) and its pipes are read to their
// end (at most a second more of reading, for a process that left the group holding
// them; a step held back by flow control gets its second once the server takes). The
// node's part is done once every task ended and all output was acknowledged.
// Cancelling (srun's second Ctrl-C, -K, the job's end) sends SIGTERM to each task's
// group and SIGKILL after the kill grace. Steps do not outlive the agent process: its
// destructor kills every task (the server ends steps whose agent restarted).
//
// Thread-safety: every public method may be called from any thread. Internally one I/O
// thread (poll over the pipes and the tasks' pidfds) and one sender thread (the only
// one that calls `send`).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "agent/launcher.h"
#include "api/protocol.h"
#include "core/clock.h"
#include "core/status.h"

namespace hachi::agent {

class StepRunner {
 public:
  struct Options {
    std::string node;
    int64_t buffer_bytes = 4 << 20;  // per step, output not yet acknowledged
    // A batch's JSON body at most (its chunks' data as encoded, not as read): a
    // quarter of the server's body limit, the rest a margin. At least 64 KiB.
    int64_t batch_bytes = api::kMaxRequestBodyBytes / 4;
    // Kill graces and pipe drains read it (not owned; outlives the runner). The I/O
    // thread waits in real time: after moving a FakeClock, call Tick() for it to act
    // on what is due.
    const Clock* clock = RealClock();
  };
  // The job's run a step belongs to (Launcher::StepContextOf).
  using ContextFn = std::function<std::optional<StepContext>(state::JobId, Time)>;
  // Sends one batch to the server and returns its acknowledgements; an error is retried
  // with backoff. Called on the sender thread only.
  using SendFn = std::function<Result<std::vector<api::StepAck>>(
      const std::vector<api::StepReport>&)>;

  StepRunner(Options options, ContextFn context, SendFn send);
  ~StepRunner();  // kills every task, joins the threads
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  // Starts this node's tasks of a step. A part sent twice is started once. A part that
  // cannot start (the job does not run here, exec fails) reports its tasks as
  // kLaunchFailed with the reason.
  void Launch(const api::StepLaunch& launch);
  // A signal for the step's tasks here, or its cancel (SIGTERM, grace, SIGKILL).
  void Signal(const api::StepSignal& signal);
  // `sig` for the tasks of every step of `job` here that is not being stopped (Slurm's
  // scancel --signal and --signal without B:, which spare the batch shell and srun).
  void SignalJob(state::JobId job, int sig);
  // A --pty step's keystrokes (written to its terminal, in order; never blocking the
  // agent: what the terminal does not take yet waits) and window size.
  void Input(const api::StepInput& input);
  // The job's run is being stopped or has ended here (its cancel, its lease, its end):
  // its steps' tasks get SIGTERM, and SIGKILL `grace` seconds later (0: now). Their
  // exits are reported as cancelled.
  void StopJob(state::JobId job, Duration grace);
  // The steps with a part here not yet reported done.
  std::vector<state::StepKey> Running() const;
  // Blocks until no step is left here or `wait_ms` passed (tests). True when none left.
  bool WaitIdle(int wait_ms) const;
  // Has the I/O thread read the clock and act on what is due (SIGKILL after a kill
  // grace, the pipes of an exited task closed after their drain) before it returns: for
  // tests that move a FakeClock (Options::clock). A real clock needs no ticks.
  void Tick();

 private:
  struct State;
  struct Offer;  // what a report of a batch offered (steps_io.cc)
  void IoLoop();
  void SendLoop();
  // The sender's round (steps_io.cc), with the state's lock held: the next batch, and
  // what becomes of its parts when the server did not take it, or took it.
  std::vector<api::StepReport> NextBatch(std::chrono::steady_clock::time_point now,
                                         std::vector<Offer>* offers);
  void NotTaken(const std::vector<Offer>& offers, const Status& why, int backoff_ms);
  void Taken(const std::vector<api::StepReport>& batch, const std::vector<Offer>& offers,
             const std::vector<api::StepAck>& acks);

  const Options options_;
  const ContextFn context_;
  const SendFn send_;
  std::unique_ptr<State> state_;
  std::thread io_;
  std::thread sender_;
};

}  // namespace hachi::agent
