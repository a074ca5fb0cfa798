// GPU shares of several users over many cycles (random_testing.h, shares on): every
// plan is applied through the PlanApplier as the simulator applies it, some jobs end,
// more shares of random users arrive; after every cycle no GPU holds shares of two
// users (an MPS server serves one user per GPU, gpu_share.h), counted from the running
// jobs themselves, and the nodes' bookkeeping (owner, milli) agrees with them.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "sched/apply.h"
#include "sched/gpu_share.h"
#include "sched/random_testing.h"
#include "sched/scheduler.h"

namespace hachi::sched {
namespace {

constexpr Time kStart = 10000;

// Per (node, GPU), the users of the running shares there and their milli.
struct GpuUsers {
  std::map<std::string, int> milli;  // by user
  int total = 0;
};

void CheckOneUserPerGpu(const ClusterState& s) {
  std::map<std::pair<int, int>, GpuUsers> on;
  for (const Job& j : s.running) {
    for (const Allocation& a : j.allocations) {
      if (a.share_milli == 0) continue;
      GpuUsers& g = on[{a.node, a.gpus.First()}];
      g.milli[j.req.user] += a.share_milli;
      g.total += a.share_milli;
    }
  }
  for (const auto& [where, g] : on) {
    const auto& [node, gpu] = where;
    RC_ASSERT(g.milli.size() == 1u);  // the rule itself
    const GpuShareUse& u = ShareUse(s.nodes[node], gpu);
    RC_ASSERT(!u.mixed);
    RC_ASSERT(u.user == g.milli.begin()->first);
    RC_ASSERT(u.milli == g.total);
    RC_ASSERT(u.milli <= kFullGpuMilli);
    RC_ASSERT(s.nodes[node].shared_gpus.contains(gpu));
  }
  // A shared GPU without a running share would keep its owner forever.
  for (size_t node = 0; node < s.nodes.size(); ++node) {
    for (int gpu : s.nodes[node].shared_gpus.Indices()) {
      RC_ASSERT(on.count({static_cast<int>(node), gpu}) == 1u);
    }
  }
}

// A share of a random user (u0-u5: more users than RandomCluster's, so that most
// shared GPUs are some other user's) in the sharing partition, as a submit resolves it.
Job RandomShare(const ClusterState& s, JobId id, Time now) {
  JobRequest r;
  r.gpus = 1;
  r.gpu_share_milli = *rc::gen::element(100, 250, 400, 500, 900);
  r.gpu_memory_mib = *rc::gen::element<int64_t>(0, 0, 20000);
  r.cpus = *rc::gen::inRange(0, 9);
  r.user = "u" + std::to_string(*rc::gen::inRange(0, 6));
  r.account = "a0";
  r.partition = "shared";
  r.time_limit = *rc::gen::inRange(1, 20) * 600;
  Job j;
  j.id = id;
  j.submit_time = now;
  Result<Job> v = ValidateRequest(s, r);
  RC_ASSERT(v.ok());
  j.req = v->req;
  j.partition = v->partition;
  return j;
}

RC_GTEST_PROP(GpuShareProperty, NoGpuEverHoldsSharesOfTwoUsers, ()) {
  ClusterState s = testing::RandomCluster(/*preemption=*/false, /*shares=*/true);
  const std::string policy = *rc::gen::element<std::string>("hachi", "easy", "fifo");
  if (policy == "hachi" && *rc::gen::arbitrary<bool>()) {  // fragmentation-aware too
    s.workload = {{1, 250, 2, 0, "", 3}, {1, 500, 0, 0, "", 2}, {1, 0, 4, 0, "", 1}};
  }
  CheckOneUserPerGpu(s);
  std::unique_ptr<Scheduler> sched = testing::MakeTestScheduler(policy);
  PlanApplier applier(&s);
  Time now = kStart;
  JobId next = 5000;
  int shares_started = 0;
  const int cycles = *rc::gen::inRange(2, 9);
  for (int cycle = 0; cycle < cycles; ++cycle) {
    for (int k = *rc::gen::inRange(0, 8); k > 0; --k) {
      s.pending.push_back(RandomShare(s, next++, now));
    }
    const Plan plan = sched->Schedule(s, now);
    for (const Start& st : plan.starts) {
      auto it = std::find_if(s.pending.begin(), s.pending.end(),
                             [&](const Job& j) { return j.id == st.job; });
      RC_ASSERT(it != s.pending.end());
      Job job = *it;
      s.pending.erase(it);
      // The applier re-checks every start (the one-user rule included) before booking.
      const Status applied = applier.Apply(job, st);
      RC_ASSERT(applied.ok());
      job.allocations = st.allocations;
      job.start_time = now;
      shares_started += st.allocations[0].share_milli > 0;
      s.running.push_back(std::move(job));
    }
    CheckOneUserPerGpu(s);
    // Time passes: jobs past their limit end, and some others end early.
    now += *rc::gen::inRange(60, 4 * 3600);
    for (size_t i = 0; i < s.running.size();) {
      if (s.running[i].EndEstimate() <= now || *rc::gen::inRange(0, 4) == 0) {
        applier.Release(s.running[i]);
        s.running.erase(s.running.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    CheckOneUserPerGpu(s);
  }
  RC_CLASSIFY(shares_started > 0, "starts shares");
}

}  // namespace
}  // namespace hachi::sched
