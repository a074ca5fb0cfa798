// The job waiter as a program of its own, `hachi-job-waiter` (agent/waiter.h): what the
// agent execs for every job. `hachi __job-waiter` runs the same WaiterMain, but a start
// of the whole `hachi` binary costs several times an empty program (ld.so relocates its
// statically linked OpenSSL and SQLite, C++ static initialisers run), and every job paid
// it; this one links only the waiter and spawn.cc.
#include <cstring>

#include "agent/waiter.h"

int main(int argc, char** argv) {
  // A holder (a node of a first-node-only job, an interactive allocation) is the
  // launcher's `WAITER __hold`, run under a waiter like any job.
  if (argc == 2 && std::strcmp(argv[1], hachi::agent::kHoldCommand) == 0) {
    hachi::agent::HoldMain();
  }
  return hachi::agent::WaiterMain(argc, argv);
}
