// The job waiter as a program of its own, `hachi-job-waiter` (agent/waiter.h): what the
// agent execs for every job. `hachi __job-waiter` runs the same WaiterMain, but a start
// of the whole `hachi` binary costs several times an empty program (ld.so relocates its
// statically linked OpenSSL and SQLite, C++ static initialisers run), and every job paid
// it; this one links only the waiter and spawn.cc.
#include "agent/waiter.h"

int main(int argc, char** argv) { return hachi::agent::WaiterMain(argc, argv); }
