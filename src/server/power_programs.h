// PowerPrograms: how the server runs a pool's resume, suspend and resume-failure
// programs (docs/pools.md). Slurm's calling convention, so that a site's scripts for a
// cloud API or IPMI work as they are: the program with the nodes as one hostlist
// ("burst[1-3]") as its only argument, HACHI_POOL and HACHI_POWER_ACTION in its
// environment, its output on the server's. A program is started and later polled,
// never waited for: a cycle must not block on a cloud API.
//
// Thread-compatible: the PowerService calls it under the ledger's mu().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "core/time.h"

namespace hachi::server {

class PowerPrograms {
 public:
  struct Call {
    std::string program;   // an absolute path
    std::string hostlist;  // its argument
    std::string pool;      // $HACHI_POOL
    std::string action;    // $HACHI_POWER_ACTION: "resume", "suspend", "resume-failed"
    Duration limit = 0;    // killed past this; 0: never
  };
  struct Ended {
    int id = 0;
    bool ok = false;  // exited 0
    std::string how;  // "exited 3", "killed by signal 9", "killed after 10m"
  };

  virtual ~PowerPrograms() = default;
  // Starts `call`; an id that a later Poll names, or why it could not start.
  virtual Result<int> Start(const Call& call) = 0;
  // The calls that ended since the last Poll.
  virtual std::vector<Ended> Poll() = 0;
};

// Runs each call as a child process of the server (posix_spawn), reaped by Poll.
std::unique_ptr<PowerPrograms> RealPowerPrograms(const Clock* clock);

}  // namespace hachi::server
