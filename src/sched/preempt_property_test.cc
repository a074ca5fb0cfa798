// Preemption and time windows on random clusters (random_testing.h, preemption on):
// the plan's invariants still hold, a victim is always of a lower tier than its
// preemptor (or a window's outsider), never one already leaving, never twice; after
// its victims leave the preemptor fits on the GPUs it holds; lean and explaining cycles
// preempt the same jobs; the same input gives the same plan.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "sched/eligibility.h"
#include "sched/random_testing.h"
#include "sched/scheduler.h"

namespace hachi::sched {
namespace {

constexpr Time kNow = 10000;

std::unique_ptr<Scheduler> Make(const std::string& policy, bool explain = true) {
  return testing::MakeTestScheduler(policy, explain);
}

const Job* Find(const std::vector<Job>& jobs, JobId id) {
  for (const Job& j : jobs) {
    if (j.id == id) return &j;
  }
  return nullptr;
}

void CheckPreemptions(const ClusterState& s, const Plan& plan, bool tiers) {
  std::set<JobId> seen;
  std::map<JobId, Time> last_kill;  // per preemptor
  for (const Preemption& p : plan.preemptions) {
    const Job* v = Find(s.running, p.job);
    RC_ASSERT(v != nullptr);
    RC_ASSERT(v->preempt_kill_at == kNever);  // never one already leaving
    RC_ASSERT(seen.insert(p.job).second);     // never twice
    const Partition& vp = s.partitions[v->partition];
    RC_ASSERT(p.signal_at == kNow);
    RC_ASSERT(p.kill_at == p.signal_at + vp.grace);
    RC_ASSERT(p.mode == vp.preempt_mode);
    RC_ASSERT((p.for_job != 0) != (p.for_partition >= 0));
    if (p.for_job != 0) {
      RC_ASSERT(tiers);
      const Job* pj = Find(s.pending, p.for_job);
      RC_ASSERT(pj != nullptr);
      const Partition& pp = s.partitions[pj->partition];
      RC_ASSERT(pp.preempt_lower_tiers);
      RC_ASSERT(vp.tier < pp.tier);  // never an equal or higher tier
      last_kill[p.for_job] = std::max(last_kill[p.for_job], p.kill_at);
    } else {
      RC_ASSERT(v->partition != p.for_partition);
      const auto& wn = s.partitions[p.for_partition].window_nodes;
      bool on_window = false;
      for (const Allocation& a : v->allocations) {
        on_window |= std::find(wn.begin(), wn.end(), a.node) != wn.end();
      }
      RC_ASSERT(on_window);
    }
  }
  // After its victims leave, the preemptor fits on the GPUs it holds: each of them is
  // free now or held by a job that is gone by the hold's start, and no start of this
  // plan that still runs then, nor another preemptor's hold, has it.
  std::map<JobId, Time> kill_of;
  for (const Preemption& p : plan.preemptions) kill_of[p.job] = p.kill_at;
  std::vector<std::pair<int, GpuSet>> held;
  for (const auto& [job, kill] : last_kill) {
    const Reservation* r = nullptr;
    for (const Reservation& x : plan.reservations) {
      if (x.job == job) r = &x;
    }
    RC_ASSERT(r != nullptr);
    RC_ASSERT(r->start >= kill);
    for (const Start& st : plan.starts) RC_ASSERT(st.job != job);
    const Job* pj = Find(s.pending, job);
    RC_ASSERT(static_cast<int>(r->allocations.size()) == std::max(pj->req.nodes, 1));
    for (const Allocation& a : r->allocations) {
      const Node& n = s.nodes[a.node];
      RC_ASSERT(a.gpus.size() ==
                (IsWholeNode(s, *pj) ? n.gpu_count() : pj->req.GpusPerNode()));
      GpuSet avail = n.free_gpus - n.unhealthy;
      for (const Job& j : s.running) {
        auto k = kill_of.find(j.id);
        // Victims leave at their kill time (grace 0: now); others by their limit.
        const Time leave =
            k != kill_of.end() ? k->second : std::max(j.LeaveEstimate(), kNow + 1);
        if (leave > r->start) continue;
        for (const Allocation& b : j.allocations) {
          if (b.node == a.node) avail = avail | b.gpus;
        }
      }
      RC_ASSERT(a.gpus.IsSubsetOf(avail));
      for (const Start& st : plan.starts) {
        const Job* sj = Find(s.pending, st.job);
        if (kNow + sj->req.time_limit <= r->start) continue;
        for (const Allocation& b : st.allocations) {
          if (b.node == a.node) RC_ASSERT((b.gpus & a.gpus).empty());
        }
      }
      for (const auto& [node, gpus] : held) {
        if (node == a.node) RC_ASSERT((gpus & a.gpus).empty());
      }
    }
    for (const Allocation& a : r->allocations) held.emplace_back(a.node, a.gpus);
  }
}

RC_GTEST_PROP(PreemptProperty, VictimsAreLowerTiersAndThePreemptorFits, ()) {
  const ClusterState s = testing::RandomCluster(/*preemption=*/true);
  for (const char* policy : {"hachi", "easy", "fifo"}) {
    const Plan plan = Make(policy)->Schedule(s, kNow);
    CheckPreemptions(s, plan, policy == std::string("hachi"));
    RC_CLASSIFY(!plan.preemptions.empty(), "preempts");
    RC_CLASSIFY(plan.wake_at != kNever, "windows");
  }
}

RC_GTEST_PROP(PreemptProperty, LeanCyclesPreemptTheSameAndInputsGiveOnePlan, ()) {
  const ClusterState s = testing::RandomCluster(/*preemption=*/true);
  for (const char* policy : {"hachi", "easy"}) {
    const Plan full = Make(policy, true)->Schedule(s, kNow);
    const Plan lean = Make(policy, false)->Schedule(s, kNow);
    RC_ASSERT(testing::SameStarts(full, lean));
    RC_ASSERT(testing::SamePreemptions(full, lean));
    RC_ASSERT(testing::SamePlan(full, Make(policy, true)->Schedule(s, kNow)));
  }
}

}  // namespace
}  // namespace hachi::sched
