// Which MASTER_PORT a job's run uses: the lowest port of its rank-0 node's range that no
// other running job there holds, kept with its start. Pure functions of the records;
// thread-compatible.
#pragma once

#include <set>
#include <string>
#include <unordered_map>

#include "state/records.h"

namespace hachi::server {

// The ports jobs draw from: [base, base + count).
struct PortRange {
  int base = 29500;
  int count = 1000;
};

// The MASTER_PORT a run of `job` uses: the one its start chose, or for a job started
// before ports were tracked (a row without one), the old rule's.
int MasterPortOf(const state::JobRecord& job, const PortRange& range);

// Which port range a rank-0 node draws from: its address, since MASTER_ADDR:MASTER_PORT
// is what must be unique. Nodes on one host (`hachi dev`'s simulated nodes, all
// 127.0.0.1) share one range; two jobs whose rank-0 nodes are different hosts may have
// the same port.
std::string PortKey(const state::StateImage& image, const std::string& node);

// Per rank-0 node address (PortKey), the MASTER_PORTs its running jobs hold.
using PortsInUse = std::unordered_map<std::string, std::set<int>>;
PortsInUse MasterPortsInUse(const state::StateImage& image,
                            const std::set<state::JobId>& active, const PortRange& range);

// The lowest port of the range not in `used`; 0 when every one is.
int LowestFreePort(const std::set<int>& used, const PortRange& range);

}  // namespace hachi::server
