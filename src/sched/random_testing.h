// Random clusters and workloads for the scheduler's RapidCheck properties, and plan
// comparison helpers. Test-only.
//
// A cluster: 1-10 nodes drawn from four presets (two interconnect classes each side),
// in two blocks, a shared partition over every node and a whole-node partition over
// some; users u0-u3 and accounts a0-a1 with random GPU quotas; running jobs placed
// greedily with random time limits (some already overdue); 0-30 pending jobs of 1, 2,
// 4 or 8 GPUs, gangs, whole-node jobs, held and dependent ones.
//
// With `preemption`: the two partitions get random tiers (0-2), graces and modes, a
// third partition "prod" (tier 2, may preempt lower tiers) covers some nodes and may own
// some of them in a random daily window; 0-6 pending prod jobs; some running jobs are
// already being preempted.
//
// With `cpu_jobs`: both partitions take jobs without GPUs, some running and
// pending jobs have none (single-node and gangs), some nodes carry the feature "ib",
// and some pending jobs ask for -C/-w/-x.
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "sched/plan.h"
#include "sched/scheduler.h"
#include "sched/testing.h"

namespace hachi::sched::testing {

// A scheduler for the property tests: `policy`, explaining or lean, depth 4.
inline std::unique_ptr<Scheduler> MakeTestScheduler(const std::string& policy,
                                                    bool explain = true) {
  SchedConfig c;
  c.policy = policy;
  c.explain = explain;
  c.backfill_depth = 4;
  return std::move(Scheduler::Create(c).value());
}

// `shares`: partition shared allows GPU shares, and some running and pending jobs
// are shares (gpu_share.h).
inline ClusterState RandomCluster(bool preemption = false, bool shares = false,
                                  bool cpu_jobs = false) {
  static const char* kPresets[] = {"hgx-h100", "pcie-8x-l40s", "pcie-8x-4090-nv4-pairs",
                                   "dgx-a100"};
  ClusterBuilder b;
  const int nodes = *rc::gen::inRange(1, 11);
  for (int i = 0; i < nodes; ++i) {
    const int p = *rc::gen::inRange(0, 4);
    b.Nodes(1, kPresets[p], *rc::gen::element<std::string>("a", "b"));
    if (*rc::gen::inRange(0, 12) == 0) b.NodeState(i, NodeState::kDrained);
  }
  if (cpu_jobs) {
    for (int i = 0; i < nodes; ++i) {
      if (*rc::gen::inRange(0, 2) == 0) b.Features(i, {"ib"});
    }
  }
  b.Partition("shared");
  if (shares) b.AllowSharing();
  if (cpu_jobs) b.AllowCpuJobs();
  std::vector<int> whole;
  for (int i = 0; i < nodes; ++i) {
    if (*rc::gen::inRange(0, 2) == 0) whole.push_back(i);
  }
  if (whole.empty()) whole.push_back(0);
  b.Partition("gpu8", PartitionMode::kWholeNode, whole);
  // Jobs without GPUs go only where validation lets them (an unvalidated exclusive one
  // would hold a node's GPUs its request does not count).
  const bool gpu8_cpu = cpu_jobs && *rc::gen::inRange(0, 2) == 0;
  if (gpu8_cpu) b.AllowCpuJobs();
  if (preemption) {
    for (int p = 0; p < 2; ++p) {
      Partition& part = b.state().partitions[p];
      part.tier = *rc::gen::inRange(0, 3);
      part.grace = *rc::gen::element<Duration>(0, 60, 300, 1800);
      part.preempt_mode = *rc::gen::element(PreemptMode::kRequeue, PreemptMode::kCancel);
    }
    std::vector<int> prod;
    for (int i = 0; i < nodes; ++i) {
      if (*rc::gen::inRange(0, 3) != 0) prod.push_back(i);
    }
    if (prod.empty()) prod.push_back(0);
    b.Partition("prod", PartitionMode::kShared, prod).Tier(2).PreemptsLowerTiers();
    if (*rc::gen::inRange(0, 2) == 0) {
      const int start = *rc::gen::inRange(0, 24 * 60);
      const int end = *rc::gen::inRange(0, 24 * 60);
      b.state().partitions.back().windows.push_back({start, end, {}});
      b.state().partitions.back().window_nodes = {prod.front()};
    }
  }
  for (int u = 0; u < 4; ++u) {
    if (*rc::gen::inRange(0, 2) == 0) {
      b.UserQuota("u" + std::to_string(u), *rc::gen::inRange(0, 24));
    }
  }
  if (*rc::gen::inRange(0, 2) == 0) b.AccountQuota("a0", *rc::gen::inRange(0, 40));
  b.Share("a0", 1, *rc::gen::inRange(0, 100)).Share("a1", 2, *rc::gen::inRange(0, 100));

  auto user = [] { return "u" + std::to_string(*rc::gen::inRange(0, 4)); };
  auto account = [] { return "a" + std::to_string(*rc::gen::inRange(0, 2)); };
  const Time now = 10000;
  // Running jobs, placed greedily on the lowest free GPUs.
  JobId id = 1;
  const int running = *rc::gen::inRange(0, 3 * nodes + 1);
  for (int r = 0; r < running; ++r) {
    const int node = *rc::gen::inRange(0, nodes);
    const int free = b.state().nodes[node].free_gpus.size();
    if (free == 0) continue;
    const bool whole_job = free == 8 && b.state().nodes[node].shared_jobs == 0 &&
                           std::find(whole.begin(), whole.end(), node) != whole.end() &&
                           *rc::gen::inRange(0, 3) == 0;
    const Time start = now - *rc::gen::inRange(0, 20000);
    const Duration limit = *rc::gen::inRange(1, 40) * 600;
    const std::string who = user();
    JobBuilder j =
        MakeJob(id++).User(who).Account(account()).Start(start).Limit(limit).Cpus(
            *rc::gen::inRange(0, 9));
    if (shares && !whole_job && *rc::gen::inRange(0, 2) == 0) {
      // A share on the first free GPU, or shared GPU of its user, with room.
      const Node& n = b.state().nodes[node];
      if (n.whole_node_jobs > 0) continue;
      const int milli = *rc::gen::element(100, 250, 500, 750);
      const int64_t mem = *rc::gen::element<int64_t>(0, 0, 10000, 30000);
      int gpu = -1;
      for (int g : (n.free_gpus | n.shared_gpus).Indices()) {
        if (ShareFits(n, g, milli, mem, who)) {
          gpu = g;
          break;
        }
      }
      if (gpu < 0) continue;
      b.Running(j.Share(milli, mem), node, std::to_string(gpu));
      continue;
    }
    if (whole_job) {
      j.Gpus(8).Partition("gpu8");
    } else {
      if (b.state().nodes[node].whole_node_jobs > 0) continue;
      // A job without GPUs (it needs a CPU).
      const bool cpu_only = cpu_jobs && *rc::gen::inRange(0, 3) == 0;
      j.Gpus(cpu_only ? 0 : *rc::gen::inRange(1, free + 1));
      if (cpu_only) j.Cpus(*rc::gen::inRange(1, 9));
    }
    b.Running(j, node);
  }
  // Pending jobs.
  const int pending = *rc::gen::inRange(0, 31);
  for (int p = 0; p < pending; ++p) {
    JobBuilder j = MakeJob(1000 + p)
                       .User(user())
                       .Account(account())
                       .Submit(now - *rc::gen::inRange(0, 5000))
                       .Limit(*rc::gen::inRange(1, 30) * 600)
                       .Cpus(*rc::gen::inRange(0, 9));
    const int kind = *rc::gen::inRange(0, 10);
    if (shares && *rc::gen::inRange(0, 3) == 0) {
      j.Share(*rc::gen::element(100, 250, 400, 500, 900),
              *rc::gen::element<int64_t>(0, 0, 20000, 50000));
    } else if (kind < 6) {
      j.Gpus(*rc::gen::element(1, 1, 1, 2, 4, 8));
    } else if (kind < 7) {
      j.Gang(*rc::gen::inRange(2, 4), *rc::gen::element(2, 4, 8));
    } else if (kind < 9) {
      j.Gpus(*rc::gen::element(4, 8, 16)).Partition("gpu8");
    } else {
      j.Gpus(*rc::gen::inRange(1, 4)).Exclusive();
    }
    if (cpu_jobs && *rc::gen::inRange(0, 3) == 0) {  // no GPUs
      j.Gpus(0).Partition(gpu8_cpu && *rc::gen::inRange(0, 3) == 0 ? "gpu8" : "shared");
      j.job().req.gpu_share_milli = 0;  // not a share any more
      j.job().req.gpu_memory_mib = 0;
      j.Cpus(*rc::gen::inRange(1, 17));
      if (*rc::gen::inRange(0, 6) == 0) j.Gang(*rc::gen::inRange(2, 4), 0);
      if (*rc::gen::inRange(0, 8) == 0) j.Exclusive();
    }
    if (cpu_jobs) {  // -C, -x, -w
      const int sel = *rc::gen::inRange(0, 8);
      if (sel == 0) j.Constraint("ib");
      if (sel == 1)
        j.Constraint(*rc::gen::element<std::string>("h100|l40s", "[ib|a100]"));
      if (sel == 2) j.Exclude("n" + std::to_string(*rc::gen::inRange(0, nodes)));
      if (sel == 3) j.Nodelist("n" + std::to_string(*rc::gen::inRange(0, nodes)));
    }
    if (*rc::gen::inRange(0, 15) == 0) j.Held();
    if (*rc::gen::inRange(0, 15) == 0) j.Deps(DependencyState::kWaiting);
    b.Pending(j);
  }
  if (preemption) {
    const int prod = *rc::gen::inRange(0, 7);
    for (int p = 0; p < prod; ++p) {
      JobBuilder j = MakeJob(2000 + p)
                         .Partition("prod")
                         .User(user())
                         .Account(account())
                         .Submit(now - *rc::gen::inRange(0, 5000))
                         .Limit(*rc::gen::inRange(1, 30) * 600);
      if (*rc::gen::inRange(0, 6) == 0) {
        j.Gang(2, *rc::gen::element(4, 8));
      } else {
        j.Gpus(*rc::gen::element(1, 2, 4, 8));
      }
      b.Pending(j);
    }
    for (Job& r : b.state().running) {
      if (*rc::gen::inRange(0, 6) == 0)
        r.preempt_kill_at = now + *rc::gen::inRange(0, 900);
    }
  }
  return b.Build();
}

inline bool SameAllocations(const std::vector<Allocation>& a,
                            const std::vector<Allocation>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].node != b[i].node || a[i].gpus != b[i].gpus || a[i].cpus != b[i].cpus ||
        a[i].memory_mib != b[i].memory_mib || a[i].share_milli != b[i].share_milli ||
        a[i].gpu_memory_mib != b[i].gpu_memory_mib) {
      return false;
    }
  }
  return true;
}

inline bool SameStarts(const Plan& a, const Plan& b) {
  if (a.starts.size() != b.starts.size()) return false;
  for (size_t i = 0; i < a.starts.size(); ++i) {
    if (a.starts[i].job != b.starts[i].job ||
        a.starts[i].backfilled != b.starts[i].backfilled ||
        !SameAllocations(a.starts[i].allocations, b.starts[i].allocations)) {
      return false;
    }
  }
  return true;
}

inline bool SamePreemptions(const Plan& a, const Plan& b) {
  if (a.preemptions.size() != b.preemptions.size() || a.wake_at != b.wake_at)
    return false;
  for (size_t i = 0; i < a.preemptions.size(); ++i) {
    const Preemption &x = a.preemptions[i], &y = b.preemptions[i];
    if (x.job != y.job || x.mode != y.mode || x.signal_at != y.signal_at ||
        x.kill_at != y.kill_at || x.for_job != y.for_job ||
        x.for_partition != y.for_partition) {
      return false;
    }
  }
  return true;
}

inline bool SamePlan(const Plan& a, const Plan& b) {
  if (!SameStarts(a, b) || !SamePreemptions(a, b) ||
      a.reservations.size() != b.reservations.size() ||
      a.pending.size() != b.pending.size()) {
    return false;
  }
  for (size_t i = 0; i < a.reservations.size(); ++i) {
    const Reservation &x = a.reservations[i], &y = b.reservations[i];
    if (x.job != y.job || x.start != y.start ||
        !SameAllocations(x.allocations, y.allocations)) {
      return false;
    }
  }
  for (size_t i = 0; i < a.pending.size(); ++i) {
    const Diagnosis &x = a.pending[i], &y = b.pending[i];
    if (x.job != y.job || x.reason != y.reason || x.queue_position != y.queue_position ||
        x.earliest_start != y.earliest_start || x.largest_free != y.largest_free ||
        x.priority != y.priority || x.blocking_job != y.blocking_job) {
      return false;
    }
  }
  return true;
}

}  // namespace hachi::sched::testing
