// Invariants of every plan, on random clusters and workloads (random_testing.h):
// no GPU given twice, gangs all or nothing, quotas never exceeded, hard isolation
// never broken, the same input gives the same plan (also from a memoised scheduler),
// and a lean cycle starts exactly what an explaining one starts.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <map>

#include "sched/eligibility.h"
#include "sched/features.h"
#include "sched/gpu_share.h"
#include "sched/random_testing.h"
#include "sched/scheduler.h"
#include "sched/window.h"

namespace hachi::sched {
namespace {

constexpr Time kNow = 10000;

std::unique_ptr<Scheduler> Make(const std::string& policy, bool explain = true) {
  return testing::MakeTestScheduler(policy, explain);
}

const Job& PendingJob(const ClusterState& s, JobId id) {
  for (const Job& j : s.pending) {
    if (j.id == id) return j;
  }
  RC_FAIL("start of a job that is not pending");
}

void CheckInvariants(const ClusterState& s, const Plan& plan) {
  const int n = static_cast<int>(s.nodes.size());
  std::vector<GpuSet> taken(n);  // whole GPUs given this cycle
  // GPU shares: per node and GPU, milli and promised memory after this plan.
  std::vector<std::vector<GpuShareUse>> use(n);
  for (int i = 0; i < n; ++i) {
    use[i] = s.nodes[i].share_use;
    use[i].resize(GpuSet::kMaxGpus);
  }
  std::vector<bool> whole(n), shared(n);
  for (int i = 0; i < n; ++i) whole[i] = s.nodes[i].whole_node_jobs > 0;
  for (int i = 0; i < n; ++i) shared[i] = s.nodes[i].shared_jobs > 0;
  std::map<std::string, int> user_used, account_used;
  for (const Job& j : s.running) {
    for (const Allocation& a : j.allocations) {
      user_used[j.req.user] += a.gpus.size();
      account_used[j.req.account] += a.gpus.size();
    }
  }
  for (const Start& st : plan.starts) {
    const Job& job = PendingJob(s, st.job);
    RC_ASSERT(!job.held);
    RC_ASSERT(job.deps == DependencyState::kNone);
    // Gangs all or nothing, on distinct nodes, each share the full size.
    RC_ASSERT(static_cast<int>(st.allocations.size()) == std::max(job.req.nodes, 1));
    const bool is_whole = IsWholeNode(s, job);
    std::vector<int> seen;
    for (const Allocation& a : st.allocations) {
      RC_ASSERT(a.node >= 0 && a.node < n);
      RC_ASSERT(std::find(seen.begin(), seen.end(), a.node) == seen.end());
      seen.push_back(a.node);
      const Node& node = s.nodes[a.node];
      RC_ASSERT(node.state == NodeState::kUp);
      RC_ASSERT(a.gpus.size() == (is_whole ? node.gpu_count() : job.req.GpusPerNode()));
      RC_ASSERT(a.share_milli == job.req.gpu_share_milli);
      if (a.share_milli > 0) {
        // A share: a free or shared healthy GPU, not given whole this cycle, and the
        // shares on it never exceed the GPU (milli and promised memory).
        RC_ASSERT(a.gpus.size() == 1);
        RC_ASSERT(s.partitions[job.partition].allow_gpu_sharing);
        RC_ASSERT(
            a.gpus.IsSubsetOf((node.free_gpus | node.shared_gpus) - node.unhealthy));
        RC_ASSERT((a.gpus & taken[a.node]).empty());
        GpuShareUse& u = use[a.node][a.gpus.First()];
        // One user per GPU: an MPS server serves one user at a time.
        RC_ASSERT(u.milli == 0 || (!u.mixed && u.user == job.req.user));
        u.user = job.req.user;
        u.milli += a.share_milli;
        u.memory_mib += a.gpu_memory_mib;
        RC_ASSERT(u.milli <= kFullGpuMilli);
        RC_ASSERT(u.memory_mib <= node.gpu_memory_mib);
      } else {
        // No GPU twice: free in the snapshot, healthy, and not given this cycle — and
        // never one that holds shares (in the snapshot or from this plan).
        RC_ASSERT(a.gpus.IsSubsetOf(node.free_gpus - node.unhealthy));
        RC_ASSERT((a.gpus & taken[a.node]).empty());
        RC_ASSERT((a.gpus & node.shared_gpus).empty());
        for (int g : a.gpus.Indices()) RC_ASSERT(use[a.node][g].milli == 0);
        taken[a.node] = taken[a.node] | a.gpus;
      }
      // Hard isolation.
      if (is_whole) {
        RC_ASSERT(!shared[a.node]);
        whole[a.node] = true;
      } else {
        RC_ASSERT(!whole[a.node]);
        shared[a.node] = true;
      }
      user_used[job.req.user] += a.gpus.size();
      account_used[job.req.account] += a.gpus.size();
    }
    // Classes never mix in a gang.
    for (const Allocation& a : st.allocations) {
      const Node& x = s.nodes[a.node];
      const Node& y = s.nodes[st.allocations[0].node];
      RC_ASSERT(x.interconnect == y.interconnect && x.gpu_model == y.gpu_model);
    }
    if (auto it = s.limits.user_gpus.find(job.req.user); it != s.limits.user_gpus.end()) {
      RC_ASSERT(user_used[job.req.user] <= it->second);
    }
    if (auto it = s.limits.account_gpus.find(job.req.account);
        it != s.limits.account_gpus.end()) {
      RC_ASSERT(account_used[job.req.account] <= it->second);
    }
  }
  // CPUs and memory never overcommitted (jobs without GPUs, take only
  // these); -C/-w/-x honoured.
  std::vector<int> cpus(n);
  std::vector<int64_t> memory(n);
  for (const Start& st : plan.starts) {
    const Job& job = PendingJob(s, st.job);
    Result<NodeSelection> sel = ResolveSelection(s, job.req);
    RC_ASSERT(sel.ok());
    for (const Allocation& a : st.allocations) {
      cpus[a.node] += a.cpus;
      memory[a.node] += a.memory_mib;
      RC_ASSERT(cpus[a.node] <= s.nodes[a.node].free_cpus);
      RC_ASSERT(memory[a.node] <= s.nodes[a.node].free_memory_mib);
      RC_ASSERT(SelectionAllows(s, *sel, job.req.nodes, a.node));
    }
    for (int want : sel->required) {
      RC_ASSERT(std::any_of(st.allocations.begin(), st.allocations.end(),
                            [&](const Allocation& a) { return a.node == want; }));
    }
  }
  // Every pending job either starts or is diagnosed, once.
  RC_ASSERT(plan.starts.size() + plan.pending.size() == s.pending.size());
}

RC_GTEST_PROP(SchedProperty, PlansKeepTheInvariants, ()) {
  const ClusterState s = testing::RandomCluster();
  for (const char* policy : {"hachi", "easy", "fifo"}) {
    const Plan plan = Make(policy)->Schedule(s, kNow);
    CheckInvariants(s, plan);
    RC_CLASSIFY(!plan.starts.empty(), "starts");
    RC_CLASSIFY(!plan.reservations.empty(), "reserves");
    RC_CLASSIFY(plan.backfilled > 0, "backfills");
  }
}

// The same with tiers that preempt and time windows: no GPU given twice, quotas,
// isolation and gangs all hold, and no start lands on another partition's window node
// in (or running into) its window.
RC_GTEST_PROP(SchedProperty, PlansKeepTheInvariantsWithPreemptionAndWindows, ()) {
  const ClusterState s = testing::RandomCluster(/*preemption=*/true);
  for (const char* policy : {"hachi", "easy", "fifo"}) {
    const Plan plan = Make(policy)->Schedule(s, kNow);
    CheckInvariants(s, plan);
    for (const Start& st : plan.starts) {
      const Job& job = PendingJob(s, st.job);
      for (const Allocation& a : st.allocations) {
        for (size_t p = 0; p < s.partitions.size(); ++p) {
          const Partition& owner = s.partitions[p];
          const auto& wn = owner.window_nodes;
          if (static_cast<int>(p) == job.partition ||
              std::find(wn.begin(), wn.end(), a.node) == wn.end()) {
            continue;
          }
          RC_ASSERT(ActiveOrNext(owner.windows, kNow, s.clock_offset).start >=
                    kNow + job.req.time_limit);
        }
      }
    }
    RC_CLASSIFY(!plan.starts.empty(), "starts");
    RC_CLASSIFY(!plan.preemptions.empty(), "preempts");
  }
}

// Jobs without GPUs and -C/-w/-x in the mix. Beside the invariants (hard
// isolation: a job without GPUs is never on a node of a whole-node job, nor a
// whole-node job beside one; it never holds a GPU), lean and explaining cycles agree
// and the same input gives the same plan.
RC_GTEST_PROP(SchedProperty, PlansKeepTheInvariantsWithCpuJobs, ()) {
  const ClusterState s = testing::RandomCluster(/*preemption=*/false,
                                                /*shares=*/*rc::gen::arbitrary<bool>(),
                                                /*cpu_jobs=*/true);
  for (const char* policy : {"hachi", "easy", "fifo"}) {
    const Plan plan = Make(policy)->Schedule(s, kNow);
    CheckInvariants(s, plan);
    bool cpu_only = false;
    for (const Start& st : plan.starts) {
      const Job& job = PendingJob(s, st.job);
      if (job.req.TotalGpus() != 0) continue;
      cpu_only = true;
      for (const Allocation& a : st.allocations) {
        RC_ASSERT(IsWholeNode(s, job) || a.gpus.empty());
        RC_ASSERT(s.nodes[a.node].whole_node_jobs == 0 || IsWholeNode(s, job));
      }
    }
    RC_ASSERT(testing::SameStarts(plan, Make(policy, false)->Schedule(s, kNow)));
    RC_ASSERT(testing::SamePlan(plan, Make(policy)->Schedule(s, kNow)));
    RC_CLASSIFY(cpu_only, "starts a job without GPUs");
  }
}

// Random workloads with GPU shares: shares never overcommit a GPU, never join another
// user's, and no whole-GPU job lands on a shared GPU (CheckInvariants); lean and
// explaining cycles agree.
RC_GTEST_PROP(SchedProperty, PlansKeepTheInvariantsWithShares, ()) {
  const ClusterState s = testing::RandomCluster(/*preemption=*/false, /*shares=*/true);
  for (const char* policy : {"hachi", "easy", "fifo"}) {
    const Plan plan = Make(policy)->Schedule(s, kNow);
    CheckInvariants(s, plan);
    RC_ASSERT(testing::SameStarts(plan, Make(policy, false)->Schedule(s, kNow)));
    bool shared = false;
    for (const Start& st : plan.starts) shared |= st.allocations[0].share_milli > 0;
    RC_CLASSIFY(shared, "starts a share");
  }
}

// With a workload (fragmentation-aware placement, fragmentation.h): the same
// invariants, GPU-model constraints ('|' alternatives too) hold, lean and explaining
// cycles agree, and a scheduler that has seen another workload answers as a fresh one.
RC_GTEST_PROP(SchedProperty, FragmentationPlacementKeepsTheInvariants, ()) {
  ClusterState s = testing::RandomCluster(/*preemption=*/false, /*shares=*/true);
  static const std::vector<std::string> kModels = {"",     "",     "H100",      "A100",
                                                   "L40S", "4090", "H100|A100", "V100"};
  for (Job& j : s.pending) {
    if (*rc::gen::inRange(0, 3) == 0) j.req.gpu_model = *rc::gen::elementOf(kModels);
  }
  const int classes = *rc::gen::inRange(1, 5);
  for (int c = 0; c < classes; ++c) {
    WorkloadClass w;
    if (*rc::gen::inRange(0, 3) == 0) {
      w.gpus = 1;
      w.share_milli = *rc::gen::element(100, 250, 500, 750);
    } else {
      w.gpus = *rc::gen::element(0, 1, 1, 2, 4, 8);
    }
    w.cpus = *rc::gen::inRange(0, 9);
    w.gpu_model = *rc::gen::elementOf(kModels);
    w.weight = *rc::gen::inRange(1, 10);
    s.workload.push_back(w);
  }
  const Plan plan = Make("hachi")->Schedule(s, kNow);
  CheckInvariants(s, plan);
  for (const Start& st : plan.starts) {
    const Job& job = PendingJob(s, st.job);
    for (const Allocation& a : st.allocations) {
      RC_ASSERT(NodeMatchesStatic(s.nodes[a.node], job.req));
    }
  }
  RC_ASSERT(testing::SameStarts(plan, Make("hachi", false)->Schedule(s, kNow)));
  auto memo = Make("hachi");
  ClusterState other = s;
  other.workload.pop_back();
  memo->Schedule(other, kNow);
  RC_ASSERT(testing::SamePlan(memo->Schedule(s, kNow), plan));
  RC_CLASSIFY(!plan.starts.empty(), "starts");
}

// The FGD benchmark (sim/placement/sched_policy.h) places all its pods in one cycle
// with no reservations. That equals a cycle per job with the earlier starts applied
// in between (as a server would run them), with or without a workload.
RC_GTEST_PROP(SchedProperty, OneCycleEqualsACyclePerJob, ()) {
  ClusterState s = testing::RandomCluster(/*preemption=*/false, /*shares=*/true);
  s.weights = PriorityWeights{0, kDay, 0, 0, 0, 0};  // the queue is the id order
  for (Job& j : s.pending) j.submit_time = kNow;
  if (*rc::gen::arbitrary<bool>()) {
    s.workload = {{1, 0, 0, 0, "", 3}, {1, 250, 2, 0, "", 2}, {4, 0, 4, 0, "", 1}};
  }
  SchedConfig c;
  c.backfill_depth = 0;
  c.explain = false;
  const Plan all = (*Scheduler::Create(c))->Schedule(s, kNow);
  std::map<JobId, std::vector<Allocation>> want;
  for (const Start& st : all.starts) want[st.job] = st.allocations;

  ClusterState one = s;
  std::vector<Job> queue = s.pending;
  std::sort(queue.begin(), queue.end(),
            [](const Job& a, const Job& b) { return a.id < b.id; });
  std::unique_ptr<Scheduler> sched = std::move(Scheduler::Create(c).value());
  for (const Job& job : queue) {
    one.pending = {job};
    const Plan p = sched->Schedule(one, kNow);
    auto it = want.find(job.id);
    RC_ASSERT(p.starts.size() == (it != want.end() ? 1u : 0u));
    if (p.starts.empty()) continue;
    RC_ASSERT(testing::SameAllocations(p.starts[0].allocations, it->second));
    Job run = job;  // applied as the simulator does
    for (const Allocation& a : run.allocations = p.starts[0].allocations) {
      Node& n = one.nodes[a.node];
      if (a.share_milli > 0) {
        RC_ASSERT(ApplyShare(n, a, run.req.user).ok());
      } else {
        n.free_gpus = n.free_gpus - a.gpus;
      }
      n.free_cpus -= a.cpus;
      n.free_memory_mib -= a.memory_mib;
      ++(IsWholeNode(one, run) ? n.whole_node_jobs : n.shared_jobs);
    }
    run.start_time = kNow;
    one.running.push_back(run);
  }
  RC_CLASSIFY(!s.workload.empty(), "workload");
}

RC_GTEST_PROP(SchedProperty, SameInputSamePlan, ()) {
  const ClusterState s = testing::RandomCluster();
  for (const char* policy : {"hachi", "easy", "fifo"}) {
    const Plan a = Make(policy)->Schedule(s, kNow);
    const Plan b = Make(policy)->Schedule(s, kNow);
    RC_ASSERT(testing::SamePlan(a, b));
  }
}

RC_GTEST_PROP(SchedProperty, MemoisedSchedulerMatchesFresh, ()) {
  // A scheduler that has seen other queues (a prefix, a shuffled copy, an earlier
  // time) answers as a fresh one does.
  const ClusterState s = testing::RandomCluster();
  ClusterState before = s;
  const size_t keep = *rc::gen::inRange<size_t>(0, s.pending.size() + 1);
  before.pending.resize(keep);
  if (!before.pending.empty() && *rc::gen::arbitrary<bool>()) {
    std::swap(before.pending.front(), before.pending.back());
  }
  ClusterState after = s;  // drop some, keep the rest in order
  std::vector<Job> kept;
  for (const Job& j : s.pending) {
    if (*rc::gen::inRange(0, 4) != 0) kept.push_back(j);
  }
  after.pending = kept;
  for (const char* policy : {"hachi", "easy"}) {
    auto memo = Make(policy);
    memo->Schedule(before, kNow - *rc::gen::inRange(0, 2000));
    memo->Schedule(s, kNow);
    const Plan a = memo->Schedule(after, kNow);
    const Plan b = Make(policy)->Schedule(after, kNow);
    RC_ASSERT(testing::SamePlan(a, b));
  }
}

RC_GTEST_PROP(SchedProperty, LeanCycleStartsTheSame, ()) {
  const ClusterState s = testing::RandomCluster();
  for (const char* policy : {"hachi", "easy", "fifo"}) {
    const Plan full = Make(policy, true)->Schedule(s, kNow);
    const Plan lean = Make(policy, false)->Schedule(s, kNow);
    RC_ASSERT(testing::SameStarts(full, lean));
    RC_ASSERT(lean.pending.empty());
  }
}

}  // namespace
}  // namespace hachi::sched
