// Burn-in (docs/burn-in.md): the pure parts of the gate the Controller runs
// (burn_in.cc). A node that registers for the first time, or with another GPU driver or
// topology, and a GPU that comes back from repair (`hachi resume NODE --gpu N`), run the
// configured checks on their agent before they take jobs.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/gpu_set.h"
#include "core/status.h"
#include "state/records.h"

namespace hachi::server {

// What a node is, for burn-in: its GPU driver and its topology as read (every GPU's
// model, UUID, memory and bus id; every pair's link), hashed. A driver upgrade, a GPU
// swapped or a link that trains differently changes it; Hachi's own encoding of the
// topology does not. kInvalidArgument for a topology that does not parse.
Result<std::string> BurnInFingerprint(const std::string& gpu_driver,
                                      const std::string& topology_json,
                                      const std::string& node);

// NodeRecord::burn_in_passed of a node known from before burn-in existed (row format 2,
// state/row_codec.cc): its next registration's fingerprint is taken as passed, so an
// upgrade does not take a working fleet out of service.
inline constexpr const char* kBurnInAdopt = "*";

// How long past its timeout a run's report may take (the agent kills the check at the
// timeout, then reports): a run not reported by then fails.
inline constexpr Duration kBurnInReportSlack = 60;

// "doctor, commtest" (the checks, by their first word) for reasons.
std::string BurnInCheckNames(const std::vector<std::string>& checks);
// The reason a node or GPU shows while its run is under way: "burn-in: running doctor
// (GPUs 3)".
std::string BurnInRunningReason(const std::vector<std::string>& checks, GpuSet gpus);
// ... and once it failed: "burn-in failed: doctor: persistence (GPU 3): ...".
std::string BurnInFailedReason(const std::string& check, const std::string& why);

}  // namespace hachi::server
