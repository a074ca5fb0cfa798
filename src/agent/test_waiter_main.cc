// The job waiter alone, for agent_test (launcher_test.cc, waiter_test.cc): the same
// WaiterMain that `hachi __job-waiter` runs.
#include "agent/waiter.h"

int main(int argc, char** argv) { return hachi::agent::WaiterMain(argc, argv); }
