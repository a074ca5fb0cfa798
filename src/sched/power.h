// Burst capacity (docs/pools.md): which powered-off nodes of burst pools to power up
// for the jobs that wait, and which idle ones to power down. One pure function that the
// server and `hachi sim` both call after a scheduling cycle, with the cycle's plan.
//
// Resumes: the pending jobs that wait for capacity (Resources, Priority, Fragmented,
// Reserved, Isolation, NodesUnavailable), in the plan's priority order, each get nodes
// of their partition that are already powering up (capacity already coming is used
// first: a GPU node is up minutes before it can work, and asking again for every cycle
// meanwhile is the autoscalers' classic over-scale-up), then powered-off ones — the
// cheapest pool first, within each pool's cap on powered nodes. A job gets all the
// nodes it needs or none (a gang never holds half a resume). Several small jobs share
// one resumed node as they would share a node that is up. A job the plan expects to
// start on powered nodes within its pool's resume_timeout gets none: the resume would
// not start it sooner.
//
// A node in burn-in after its resume counts as capacity coming, as a resuming one does,
// with no resume timeout (its burn-in has its own).
//
// Suspends: a burst node that has been on and empty for its pool's suspend_after, and
// that no waiting job was given.
//
// Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"
#include "sched/cluster.h"
#include "sched/plan.h"

namespace hachi::sched {

enum class PowerState : uint8_t {
  kOn,          // powered (fixed nodes always)
  kOff,         // a burst node powered down
  kResuming,    // its resume program ran; not registered yet
  kSuspending,  // its suspend program ran; not off yet
  kFailed,      // a resume that failed or timed out; not tried again until reset
  kBurnIn,      // registered after a resume, proving itself (burn-in) before it works
};
std::string_view PowerStateName(PowerState s);  // "on", "off", "resuming", ...

struct PowerPool {
  std::string name;
  bool burst = false;
  std::vector<int> nodes;  // indices into ClusterState::nodes
  Duration suspend_after = 30 * kMinute;
  Duration resume_timeout = 15 * kMinute;
  int max_powered = 0;  // nodes on, resuming or suspending at once; 0: no cap
  double price_per_gpu_hour = 0;
};

// A pool's capacity as the server shows it (GET /pools, /metrics): its nodes and GPUs,
// how many are powered now (a fixed pool's all), and the GPU-seconds its burst nodes
// have been powered.
struct PoolPower {
  std::string name;
  bool burst = false;
  double price_per_gpu_hour = 0;
  int nodes = 0;
  int gpus = 0;
  int powered = 0;
  double powered_gpu_seconds = 0;
};

// A node's power, kept by the caller across cycles (one per ClusterState node).
struct NodePower {
  PowerState state = PowerState::kOn;
  Time since = 0;       // when it entered `state`
  Time idle_since = 0;  // kOn: empty since then; 0 while a job is on it
};

struct PowerPlan {
  std::vector<int> resume;     // power these up now (node indices, by pool then index)
  std::vector<int> suspend;    // power these down now
  std::vector<int> timed_out;  // resuming for longer than their pool's resume_timeout
  // The jobs the resumes (new and under way) are for, with the pool and how many of its
  // nodes: what their pending reason says.
  struct Waiting {
    JobId job = 0;
    int pool = -1;
    int nodes = 0;
  };
  std::vector<Waiting> waiting;
  Time wake_at = kNever;  // the next suspend timer or resume timeout
};

// No job on `node`: its healthy GPUs and its CPUs all free, no job counted on it.
bool IsEmpty(const Node& node);

// Sets each node's Node::cost_rank from `pools` (0 unless in a burst pool; a burst
// pool's nodes 1 + its rank by price, equal prices sharing one) and max_cost_rank.
void RankByCost(const std::vector<PowerPool>& pools, ClusterState* state);

// `power` has one entry per state.nodes; `pools` index state.nodes. Nodes in no pool,
// and the nodes of fixed pools, are never resumed or suspended.
PowerPlan PlanPower(const ClusterState& state, const Plan& plan,
                    const std::vector<PowerPool>& pools,
                    const std::vector<NodePower>& power, Time now);

}  // namespace hachi::sched
