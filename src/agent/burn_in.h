// BurnInRunner: runs a node's burn-in checks (docs/burn-in.md) when the server
// asks, one run at a time, on a thread of its own. Each check is a process: "doctor ..."
// and "commtest ..." are this binary's `hachi doctor --json` / `hachi commtest --json`
// (with --gpu N for each GPU of a GPU's run), anything else a site script run by
// /bin/sh -c with $HACHI_NODE and $HACHI_BURN_IN_GPUS. A check passes when it exits 0
// or 1 (warnings), and fails otherwise, with its first FAIL item (doctor, commtest) or
// its last line of output as the reason; the first check that fails ends the run. Each
// check runs in a process group of its own, killed whole at the run's timeout and when
// a newer run replaces it.
//
// A run's timeout is measured on the Clock the runner is given (a test moves a
// FakeClock); the runner waits on its checks' output in real time.
//
// Thread safety: Start and Stop may be called from any thread; the callback runs on the
// runner's thread, never with a lock of the runner held.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/protocol.h"
#include "core/clock.h"
#include "core/mutex.h"

namespace hachi::agent {

// The command line of one check (BurnInWork::checks' form) for `gpus` (empty: all):
// `self` is this binary. Site scripts are a /bin/sh -c line. `xid_since_s` > 0 (a GPU's
// run: the seconds since it began, and a margin): doctor counts only the Xid lines of
// that window, since the Xid that took the GPU out is history once it is back.
std::vector<std::string> BurnInCommand(const std::string& check, const std::string& self,
                                       const std::vector<int>& gpus,
                                       int64_t xid_since_s = 0);

// How one finished check went: `exit_code` (-1 when it was killed by `signal`) and what
// it printed. For doctor and commtest the reason is the first FAIL item of their JSON
// ("persistence: GPU 3: persistence mode off"; "(GPU n)" added when the evidence does
// not name its GPU); else the exit code or signal and the
// last line of stderr (of stdout when stderr is empty).
struct BurnInVerdict {
  bool passed = false;
  std::string reason;  // one line; empty when passed
};
BurnInVerdict JudgeBurnInCheck(const std::string& check, int exit_code, int signal,
                               const std::string& stdout_text,
                               const std::string& stderr_text);

class BurnInRunner {
 public:
  using Done = std::function<void(const api::BurnInReport&)>;
  // `self`: this binary (for doctor and commtest); `node`: $HACHI_NODE of site scripts;
  // `clock`: not owned, outlives the runner.
  BurnInRunner(std::string self, std::string node, Done done,
               const Clock* clock = RealClock());
  ~BurnInRunner();  // Stop()
  BurnInRunner(const BurnInRunner&) = delete;
  BurnInRunner& operator=(const BurnInRunner&) = delete;

  // Starts `run`, replacing the run under way (its check is killed; it reports nothing).
  void Start(api::BurnInWork run) EXCLUDES(mu_);
  // Kills the check under way and joins the thread; idempotent.
  void Stop() EXCLUDES(mu_);

 private:
  void Loop() EXCLUDES(mu_);
  // Runs one check to its end, its deadline, or a newer run: exit code, signal, output.
  // False when it was cut short by a newer run or Stop (nothing to report).
  bool RunCheck(const std::vector<std::string>& argv, const std::vector<int>& gpus,
                int64_t deadline_ms, int run, int* exit_code, int* signal,
                std::string* out_text, std::string* err_text, bool* timed_out)
      EXCLUDES(mu_);

  // Constant after construction.
  const std::string self_;
  const std::string node_;
  const Done done_;
  const Clock* const clock_;

  Mutex mu_;
  CondVar cv_{&mu_};
  std::optional<api::BurnInWork> next_ GUARDED_BY(mu_);
  int current_run_ GUARDED_BY(mu_) = 0;  // the run under way
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;  // set by the constructor; joined by Stop
};

}  // namespace hachi::agent
