#include "sched/power.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "sched/eligibility.h"
#include "sched/features.h"

namespace hachi::sched {

std::string_view PowerStateName(PowerState s) {
  constexpr std::string_view kNames[] = {"on",         "off",           "resuming",
                                         "suspending", "resume-failed", "burn-in"};
  return kNames[static_cast<int>(s)];
}

namespace {

// The reasons of a job that waits for capacity, which more nodes could give it.
bool WaitsForCapacity(Reason r) {
  constexpr Reason kCapacity[] = {Reason::kResources,  Reason::kPriority,
                                  Reason::kFragmented, Reason::kReservedForOther,
                                  Reason::kIsolation,  Reason::kNodesUnavailable};
  return std::find(std::begin(kCapacity), std::end(kCapacity), r) != std::end(kCapacity);
}

// What a burst node can still take once up, as the jobs given it fill it.
struct Room {
  int node = -1;
  int pool = -1;
  int gpus = 0, cpus = 0;
  int64_t memory_mib = 0;
  bool up = false;       // on and up now: a gang's part may go there without a resume
  bool coming = false;   // resuming already (else off, or up: nothing to resume)
  bool given = false;    // a job was given it
  bool claimed = false;  // up and busy: a gang counts on it once its jobs end
};

}  // namespace

bool IsEmpty(const Node& n) {
  return n.whole_node_jobs == 0 && n.shared_jobs == 0 &&
         n.free_gpus.size() + n.unhealthy.size() == n.gpu_count() &&
         n.free_cpus == n.cpus;
}

void RankByCost(const std::vector<PowerPool>& pools, ClusterState* state) {
  std::vector<double> prices;
  for (const PowerPool& p : pools) {
    if (p.burst) prices.push_back(p.price_per_gpu_hour);
  }
  std::sort(prices.begin(), prices.end());
  prices.erase(std::unique(prices.begin(), prices.end()), prices.end());
  for (Node& n : state->nodes) n.cost_rank = 0;
  state->max_cost_rank = 0;
  for (const PowerPool& p : pools) {
    if (!p.burst) continue;
    const int rank = 1 + static_cast<int>(std::lower_bound(prices.begin(), prices.end(),
                                                           p.price_per_gpu_hour) -
                                          prices.begin());
    for (int i : p.nodes) state->nodes[i].cost_rank = rank;
    state->max_cost_rank = std::max(state->max_cost_rank, rank);
  }
}

PowerPlan PlanPower(const ClusterState& state, const Plan& plan,
                    const std::vector<PowerPool>& pools,
                    const std::vector<NodePower>& power, Time now) {
  PowerPlan out;
  // The burst nodes that could be powered up (resuming or off), by pool price then
  // pool then node, and how many of each pool's nodes are powered.
  std::vector<int> order(pools.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return pools[a].price_per_gpu_hour < pools[b].price_per_gpu_hour;
  });
  std::vector<int> powered(pools.size(), 0);
  std::vector<Room> rooms;
  for (int p : order) {
    const PowerPool& pool = pools[p];
    if (!pool.burst) continue;
    for (int i : pool.nodes) {
      const NodePower& np = power[i];
      if (np.state != PowerState::kOff && np.state != PowerState::kFailed) ++powered[p];
      if (np.state == PowerState::kResuming && now - np.since >= pool.resume_timeout) {
        out.timed_out.push_back(i);
        continue;
      }
      if (np.state == PowerState::kResuming) {
        out.wake_at = std::min(out.wake_at, np.since + pool.resume_timeout);
      }
      const bool coming =
          np.state == PowerState::kResuming || np.state == PowerState::kBurnIn;
      if (!coming && np.state != PowerState::kOff) continue;
      const Node& n = state.nodes[i];
      Room room;
      room.node = i;
      room.pool = p;
      room.gpus = n.gpu_count();
      room.cpus = n.cpus;
      room.memory_mib = n.memory_mib;
      room.coming = coming;
      rooms.push_back(room);
    }
  }
  // What is up now first (for gangs: one that waits for 3 nodes while 1 is free needs
  // 2 resumed, not 3), then capacity already coming, then nodes to resume.
  std::stable_partition(rooms.begin(), rooms.end(),
                        [](const Room& r) { return r.coming; });
  std::vector<Room> up;
  for (size_t i = 0; i < state.nodes.size(); ++i) {
    const Node& n = state.nodes[i];
    if (n.state != NodeState::kUp || power[i].state != PowerState::kOn) continue;
    Room room;
    room.node = static_cast<int>(i);
    room.gpus = n.free_gpus.size();
    room.cpus = n.free_cpus;
    room.memory_mib = n.free_memory_mib;
    room.up = true;
    room.given = !IsEmpty(n);  // a whole-node part needs it empty
    up.push_back(room);
  }
  rooms.insert(rooms.begin(), up.begin(), up.end());
  // Resuming `room` would power a node up (not up, not coming, not given yet).
  const auto resumes = [](const Room& room) {
    return !room.up && !room.coming && !room.given;
  };

  // When each node's running jobs end by their time limits (kNever: one has none).
  std::vector<Time> free_at_memo;
  const auto free_at = [&](int node) {
    if (free_at_memo.empty()) {
      free_at_memo.assign(state.nodes.size(), now);
      for (const Job& j : state.running) {
        const Time end = j.req.time_limit > 0 ? j.EndEstimate() : kNever;
        for (const Allocation& a : j.allocations) {
          if (a.node >= 0 && static_cast<size_t>(a.node) < free_at_memo.size())
            free_at_memo[a.node] = std::max(free_at_memo[a.node], end);
        }
      }
    }
    return free_at_memo[node];
  };
  std::unordered_map<JobId, const Job*> pending;
  for (const Job& j : state.pending) pending.emplace(j.id, &j);
  for (const Diagnosis& d : plan.pending) {
    if (!WaitsForCapacity(d.reason)) continue;
    auto it = pending.find(d.job);
    if (it == pending.end() || it->second->partition < 0) continue;
    const Job& job = *it->second;
    const Partition& part = state.partitions[job.partition];
    const JobRequest& r = job.req;
    const bool whole = IsWholeNode(part, r);
    const int gpn = r.Shared() ? 1 : r.GpusPerNode();
    const int cpus = NodeCpus(r);
    const int64_t mem = NodeMemory(r);
    const bool selects =
        !r.constraint.empty() || !r.nodelist.empty() || !r.exclude.empty();
    Result<NodeSelection> sel =
        selects ? ResolveSelection(state, r) : Result<NodeSelection>(NodeSelection{});
    // The node is one the job may run on: its partition's, its GPU model and
    // features, its -w/-x.
    const auto suits = [&](int node) {
      const Node& n = state.nodes[node];
      const bool in_partition = std::find(n.partitions.begin(), n.partitions.end(),
                                          job.partition) != n.partitions.end();
      return in_partition && NodeMatchesStatic(n, r) &&
             !(sel.ok() && !sel->empty() && !SelectionAllows(state, *sel, r.nodes, node));
    };
    std::vector<size_t> chosen;
    for (size_t k = 0; k < rooms.size() && static_cast<int>(chosen.size()) < r.nodes;
         ++k) {
      Room& room = rooms[k];
      // A single-node job that waits while a node that is up has room waits for what a
      // count cannot see (its GPUs' topology, a reservation): a resume is what helps.
      if (room.up && r.nodes == 1) continue;
      // Not worth a resume: the plan starts it on powered nodes before one is up.
      if (!room.up && d.earliest_start != kNever &&
          d.earliest_start <= now + pools[room.pool].resume_timeout) {
        continue;
      }
      if (!suits(room.node)) continue;
      if (whole ? room.given
                : (room.gpus < gpn || room.cpus < cpus || room.memory_mib < mem)) {
        continue;
      }
      // A node to resume counts against its pool's cap.
      if (resumes(room) && pools[room.pool].max_powered > 0 &&
          powered[room.pool] >= pools[room.pool].max_powered) {
        continue;
      }
      chosen.push_back(k);
      if (resumes(room)) ++powered[room.pool];  // held while deciding
    }
    bool any_burst = false;
    for (size_t k : chosen) any_burst = any_burst || !rooms[k].up;
    // A gang short of nodes may count busy nodes that are up, by when their jobs end
    // (their time limits): the burst nodes are resumed so as to be up by then, not
    // after the busy ones free and the gang still waits a resume.
    if (static_cast<int>(chosen.size()) < r.nodes && any_burst && r.nodes > 1) {
      std::vector<std::pair<Time, size_t>> busy;  // (free at, room)
      for (size_t k = 0; k < rooms.size(); ++k) {
        const Room& room = rooms[k];
        if (!room.up || !room.given || room.claimed) continue;
        if (std::find(chosen.begin(), chosen.end(), k) != chosen.end()) continue;
        if (!suits(room.node)) continue;
        busy.push_back({free_at(room.node), k});
      }
      std::sort(busy.begin(), busy.end());
      const size_t short_by = static_cast<size_t>(r.nodes) - chosen.size();
      if (busy.size() >= short_by) {
        const Time ready = busy[short_by - 1].first;  // the last of them to free
        Duration slowest = 0;  // the longest resume among the burst nodes it takes
        for (size_t k : chosen) {
          if (!rooms[k].up)
            slowest = std::max(slowest, pools[rooms[k].pool].resume_timeout);
        }
        if (ready != kNever && ready <= now + slowest) {
          for (size_t i = 0; i < short_by; ++i) {
            rooms[busy[i].second].claimed = true;  // counted once, for this gang
            chosen.push_back(busy[i].second);
          }
        } else if (ready != kNever) {
          out.wake_at = std::min(out.wake_at, ready - slowest);  // ask again then
        }
      }
    }
    // All or none; and a job that fits on what is up needs no resume.
    if (static_cast<int>(chosen.size()) < r.nodes || !any_burst) {
      for (size_t k : chosen) {
        if (resumes(rooms[k])) --powered[rooms[k].pool];
      }
      continue;
    }
    std::unordered_map<int, int> per_pool;
    for (size_t k : chosen) {
      Room& room = rooms[k];
      if (room.up) {
        room.given = true;  // a gang's part: the node is taken
        room.gpus = 0;
        continue;
      }
      room.given = true;
      if (whole) {
        room.gpus = room.cpus = 0;
        room.memory_mib = 0;
      } else {
        room.gpus -= gpn;
        room.cpus -= cpus;
        room.memory_mib -= mem;
      }
      ++per_pool[room.pool];
    }
    for (const auto& [pool, count] : per_pool)
      out.waiting.push_back({job.id, pool, count});
  }
  for (const Room& room : rooms) {
    if (room.given && !room.coming && !room.up) out.resume.push_back(room.node);
  }

  // Suspends: burst nodes on and empty past their pool's suspend_after.
  for (const PowerPool& pool : pools) {
    if (!pool.burst) continue;
    for (int i : pool.nodes) {
      const NodePower& np = power[i];
      if (np.state != PowerState::kOn || np.idle_since <= 0) continue;
      if (!IsEmpty(state.nodes[i])) continue;
      const Time due = np.idle_since + pool.suspend_after;
      if (due <= now) {
        out.suspend.push_back(i);
      } else {
        out.wake_at = std::min(out.wake_at, due);
      }
    }
  }
  return out;
}

}  // namespace hachi::sched
