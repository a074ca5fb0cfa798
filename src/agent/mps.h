// MpsDaemons: one NVIDIA MPS control daemon per GPU that holds GPU shares (
// docs/isolation.md "GPU shares"). Without a running MPS server, the MPS variables a
// share gets (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) do
// nothing: shares time-slice with no memory limit. So the agent starts
// `nvidia-cuda-mps-control -f` for a GPU before its first share launches, with the GPU
// as its only visible device and pipe and log directories of its own
// (<dir>/gpu<N>/pipe, <dir>/gpu<N>/log), and stops it (`quit` on its control pipe) after
// its last share ended. Each share's job gets CUDA_MPS_PIPE_DIRECTORY, so its CUDA
// context goes through that GPU's server, where the limits hold.
//
// The daemon is its shares' user's (MpsUser): it runs as that user, NVIDIA's recipe for
// MPS per user, and its pipe and log directories are theirs alone (0700), so no other
// user reaches its pipes or reads its logs. <dir> and <dir>/gpu<N> stay root's (0711):
// the agent's own files (the daemon's pid and output) live there, and nothing running as
// root writes into a directory a user controls.
//
// The daemon runs in the foreground (-f, not -d) as the agent's child, in a session of
// its own (it outlives an agent restart, as jobs do): the agent sees its exit at once,
// reports it (`on_event`) and starts it again while shares still hold the GPU. Lines of
// its control.log that tell of a server fault are reported too: on a fault, MPS ends
// every client of that GPU's server, so the share's neighbours are affected.
//
// MPS serves one Linux user per GPU at a time (a client of another uid waits until the
// server's clients are gone): the scheduler never packs shares of two users on one GPU
// (sched/gpu_share.h), so a share never waits here.
//
// A daemon an earlier agent process left (its pid file in the pipe directory) is kept
// while that agent's adopted runs last (AdoptLeftovers), else stopped.
//
// Thread safety: every method may be called from any thread; `on_event` runs on the
// manager's thread, never with its lock held.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/mutex.h"
#include "core/status.h"
#include "state/records.h"

namespace hachi::agent {

// Whether MPS can serve this node's shares: "" when it can, else why not ("no
// nvidia-cuda-mps-control in PATH", "Tesla P100: MPS memory limits need Volta or
// newer", "off (--mps off)"). `mode`: "on", "off" or "auto"; `control`: the binary,
// a path or a name looked up in PATH ("" = nvidia-cuda-mps-control); `simulated`: the
// GPUs are not real (auto is then off); `models`: the GPUs' model names.
std::string MpsUnavailable(const std::string& mode, const std::string& control,
                           bool simulated, const std::vector<std::string>& models,
                           std::string* resolved);

// True for GPU models older than Volta (compute capability < 7.0): Kepler, Maxwell,
// Pascal (Tesla K80, M60, P100, P40, P4; GeForce GTX 9xx/10xx; Quadro P/M/K), whose MPS
// has no per-client memory limit. Unknown names count as Volta or newer.
bool PreVoltaModel(const std::string& model);

struct MpsOptions {
  std::string control;  // the nvidia-cuda-mps-control binary (a path)
  std::string dir;      // <dir>/gpu<N>/{pipe,log}; see above for owners and modes
  // By GPU index: what the daemon's CUDA_VISIBLE_DEVICES names (the GPU's UUID when
  // known: indices are remapped by MPS, UUIDs are not), and what the share's own
  // CUDA_VISIBLE_DEVICES then is (the UUID, else "0": the one device its server shows).
  std::vector<std::string> devices;
  // How long a started daemon has to create its control pipe, and a quit one to exit
  // before SIGTERM (then SIGKILL after as long again).
  int start_wait_ms = 10000;
  int stop_wait_ms = 5000;
  // A daemon that died this many times within a minute is not started again for that
  // GPU until its shares are gone (its shares run on without MPS).
  int max_restarts = 5;
  // How often the daemons and their logs are looked at.
  int check_interval_ms = 200;
  // What "died this many times within a minute" is measured on (a test moves a
  // FakeClock). The waits for a daemon's pipe and exit are bounds on a real process and
  // stay on real time. Not owned; outlives the manager; never null.
  const Clock* clock = RealClock();
  // What happened, for the server and the agent's log: `gpu`, `kind` ("mps-died",
  // "mps-fault", "mps-failed") and one line.
  std::function<void(int gpu, const std::string& kind, const std::string& message)>
      on_event;
};

// Whom a GPU's daemon serves: the share's user when the agent is root, else the agent's
// own user (uid and gid as the agent's; no switch).
struct MpsUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups (GroupsOf)
};

// What a share's launch needs of its GPU's daemon.
struct MpsClient {
  std::string pipe_dir;  // CUDA_MPS_PIPE_DIRECTORY
  std::string log_dir;   // CUDA_MPS_LOG_DIRECTORY
  std::string device;    // the share's CUDA_VISIBLE_DEVICES
};

class MpsDaemons {
 public:
  explicit MpsDaemons(MpsOptions options);
  // Leaves running daemons running when shares still hold them (their jobs outlive the
  // agent); stops the others.
  ~MpsDaemons();
  MpsDaemons(const MpsDaemons&) = delete;
  MpsDaemons& operator=(const MpsDaemons&) = delete;

  // Daemons an earlier agent process left: kept, held by `adopted_runs` (the runs that
  // process left and this one took over; which GPU each holds is not known, so every
  // leftover daemon is held by all of them), or stopped when there are none. Call once,
  // before the first Acquire.
  void AdoptLeftovers(const std::vector<state::JobId>& adopted_runs) EXCLUDES(mu_);

  // `job`, a share of `gpu` run by `user`, is about to launch: its GPU's daemon runs as
  // `user` (started now if needed, and ready: its control pipe exists). Errors: the
  // daemon could not start, it failed too often, or it serves another user (the
  // scheduler never packs two users' shares on one GPU); the share then runs without
  // MPS.
  Result<MpsClient> Acquire(int gpu, state::JobId job, const MpsUser& user) EXCLUDES(mu_);
  // `job` ended: a daemon that no job holds any more is stopped, on the manager's thread
  // (quitting takes a while, and the caller is a launcher's supervisor). Unknown jobs:
  // no-op.
  void Release(state::JobId job) EXCLUDES(mu_);

  // The GPUs whose daemon runs now, ascending (tests, `hachi show node`).
  std::vector<int> Serving() const EXCLUDES(mu_);
  // The pid of `gpu`'s daemon, 0 when none.
  pid_t DaemonPid(int gpu) const EXCLUDES(mu_);

 private:
  struct Daemon {
    pid_t pid = 0;
    MpsUser user;       // whom it runs as; an earlier agent's: its pipe directory's owner
    bool child = true;  // ours to reap; false: an earlier agent's (kill(pid, 0) probes)
    std::set<state::JobId> holders;
    std::vector<int64_t> deaths_ms;  // monotonic, within the last minute
    bool gave_up = false;
    long log_offset = 0;  // how far control.log was read for faults
  };
  std::string PipeDir(int gpu) const;
  std::string LogDir(int gpu) const;
  std::string GpuDir(int gpu) const;  // root's: the pid file, the daemon's output
  // With mu_ held: starts `gpu`'s daemon as d.user and waits for its control pipe.
  Status StartLocked(int gpu, Daemon& d) REQUIRES(mu_);
  // Without mu_: asks the daemon to quit, waits, then signals; reaps it when ours.
  void StopDaemon(int gpu, const Daemon& d) EXCLUDES(mu_);
  // Stops these daemons (taken out of daemons_ and put in stopping_ with mu_ held).
  void StopAll(const std::vector<std::pair<int, Daemon>>& idle) EXCLUDES(mu_);
  void Watch() EXCLUDES(mu_);  // the manager's thread
  void Event(int gpu, const std::string& kind, const std::string& message);

  const MpsOptions options_;  // constant after construction
  mutable Mutex mu_;
  std::map<int, Daemon> daemons_ GUARDED_BY(mu_);  // by GPU index
  // GPUs whose daemon is being stopped (outside the lock); a new one for them waits,
  // since both would use one pipe directory.
  std::set<int> stopping_ GUARDED_BY(mu_);
  std::vector<std::pair<int, Daemon>> idle_ GUARDED_BY(mu_);  // for Watch to stop
  bool stop_ GUARDED_BY(mu_) = false;
  CondVar cv_{&mu_};
  std::thread watcher_;  // set by the constructor, joined by the destructor
};

}  // namespace hachi::agent
