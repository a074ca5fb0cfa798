// FGD's static placement benchmark (ATC'23) on openb, as notes/fgd-protocol.md specifies:
// shuffle the pod list with Go's math/rand, top it up with replacement to 130 % of the
// cluster's GPU capacity, place the pods one by one (no departures, no retries) and
// record the allocation after every event.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "sim/placement/openb.h"

namespace hachi::placement {

enum class Policy { kRandom, kBestFit, kFgd, kHachi };
Result<Policy> ParsePolicy(const std::string& name);
const char* PolicyName(Policy p);

// The event list: indices into `pods` sorted by name, then the shuffle, then the top-up
// (§2); `rng` is left where the protocol draws the node ranks next.
class GoRand;
std::vector<int> BuildEvents(const std::vector<OpenbPod>& sorted_pods,
                             int64_t capacity_milli, GoRand& rng);

struct Placement {
  int node = -1;  // -1: failed
  std::vector<int> gpus;
};

struct BenchResult {
  std::vector<int64_t> arrived, allocated;  // milli, after each event
  std::vector<double> frag_ratio;           // Σ F / Σ idle, after each event (0-1)
  std::vector<Placement> placements;        // per event
  std::vector<int> event_pods;              // per event: index into the sorted pods
  std::vector<OpenbPod> pods;               // sorted by name
  int64_t capacity_milli = 0;
  int failed = 0;
  double wall_s = 0;
};

// Runs the whole protocol for one seed. `pods` need not be sorted. `random`, `bestfit`
// and `fgd` are the reference policies, placed here; `hachi` is the scheduler of
// src/sched/ (sched_policy.h), its placements checked against the protocol's filter.
// Errors: a placement that breaks the protocol, or models the scheduler would confuse.
Result<BenchResult> RunBench(const Cluster& cluster, std::vector<OpenbPod> pods,
                             int64_t seed, Policy policy);

// The published discretised curve (§5): 131 columns, x = 0..130 % of arrived demand;
// values rounded as Python's round(·, 2) does. `values` are per-event percentages.
std::vector<double> DiscreteCurve(const std::vector<int64_t>& arrived,
                                  int64_t capacity_milli,
                                  const std::vector<double>& values);
// Per-event allocation in % (allocated milli / GPUs / 10, the merge script's expression).
std::vector<double> AllocValues(const BenchResult& r);

}  // namespace hachi::placement
