// MIG devices over many cycles (mig.h): random nodes with random MIG layouts, MIG jobs
// of random profiles and counts beside whole-GPU jobs, every plan applied through the
// PlanApplier as the simulator applies it, some jobs ending each cycle. After every
// cycle: no device is booked twice, each node's bookings agree with the running jobs,
// a MIG job holds exactly its count of its profile on their parent GPUs, and no
// whole-GPU job holds a GPU in MIG mode; every release frees exactly what it booked.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "sched/apply.h"
#include "sched/mig.h"
#include "sched/random_testing.h"
#include "sched/scheduler.h"

namespace hachi::sched {
namespace {

constexpr Time kStart = 10000;

void CheckBookings(const ClusterState& s) {
  std::map<std::pair<int, std::string>, JobId> held;  // (node, uuid) -> job
  for (const Job& j : s.running) {
    for (const Allocation& a : j.allocations) {
      const Node& n = s.nodes[a.node];
      if (j.req.Mig()) {
        RC_ASSERT(static_cast<int>(a.mig.size()) == j.req.gpus);
        std::vector<int> slots;
        for (const std::string& uuid : a.mig) {
          const int k = FindMigSlot(n, uuid);
          RC_ASSERT(k >= 0);
          RC_ASSERT(n.mig[k].profile == j.req.mig_profile);
          RC_ASSERT(held.emplace(std::make_pair(a.node, uuid), j.id).second);  // once
          slots.push_back(k);
        }
        RC_ASSERT(MigParents(n, slots) == a.gpus);
      } else {
        RC_ASSERT(a.mig.empty());
        RC_ASSERT((a.gpus & n.mig_gpus).empty());  // never a MIG GPU whole
      }
    }
  }
  for (size_t node = 0; node < s.nodes.size(); ++node) {
    const Node& n = s.nodes[node];
    RC_ASSERT((n.free_gpus & n.mig_gpus).empty());
    for (const MigSlot& m : n.mig) {
      auto it = held.find({static_cast<int>(node), m.uuid});
      RC_ASSERT(m.job == (it == held.end() ? 0 : it->second));
    }
  }
}

ClusterState RandomMigCluster() {
  static const char* kProfiles[] = {"1g.10gb", "2g.20gb", "3g.40gb"};
  testing::ClusterBuilder b;
  const int nodes = *rc::gen::inRange(1, 5);
  b.Nodes(nodes, "hgx-h100");
  for (int node = 0; node < nodes; ++node) {
    for (int gpu = 0; gpu < 8; ++gpu) {
      if (*rc::gen::inRange(0, 3) != 0) continue;
      std::vector<std::string> layout;
      for (int k = *rc::gen::inRange(1, 8); k > 0; --k) {
        layout.push_back(kProfiles[*rc::gen::inRange(0, 3)]);
      }
      b.Mig(node, gpu, layout);
    }
  }
  b.Partition("gpu");
  return b.Build();
}

Job RandomJob(const ClusterState& s, JobId id, Time now) {
  JobRequest r;
  if (*rc::gen::inRange(0, 3) != 0) {
    r.mig_profile = *rc::gen::element<std::string>("1g.10gb", "2g.20gb", "3g.40gb");
    r.gpus = *rc::gen::inRange(1, 4);
  } else {
    r.gpus = *rc::gen::element(1, 2, 4);
  }
  r.cpus = *rc::gen::inRange(0, 9);
  r.user = "u" + std::to_string(*rc::gen::inRange(0, 3));
  r.partition = "gpu";
  r.time_limit = *rc::gen::inRange(1, 20) * 600;
  Job j;
  j.id = id;
  j.submit_time = now;
  Result<Job> v = ValidateRequest(s, r);
  j.req = v.ok() ? v->req : r;  // a profile no node has: refused at submit, still fed
  j.partition = 0;
  return j;
}

RC_GTEST_PROP(MigProperty, DevicesAreNeverDoubleBookedAndReleasesFreeWhatWasBooked, ()) {
  ClusterState s = RandomMigCluster();
  const std::string policy = *rc::gen::element<std::string>("hachi", "easy", "fifo");
  std::unique_ptr<Scheduler> sched = testing::MakeTestScheduler(policy);
  PlanApplier applier(&s);
  Time now = kStart;
  JobId next = 1;
  int mig_started = 0;
  const int cycles = *rc::gen::inRange(2, 9);
  for (int cycle = 0; cycle < cycles; ++cycle) {
    for (int k = *rc::gen::inRange(0, 10); k > 0; --k) {
      s.pending.push_back(RandomJob(s, next++, now));
    }
    const Plan plan = sched->Schedule(s, now);
    for (const Start& st : plan.starts) {
      auto it = std::find_if(s.pending.begin(), s.pending.end(),
                             [&](const Job& j) { return j.id == st.job; });
      RC_ASSERT(it != s.pending.end());
      Job job = *it;
      s.pending.erase(it);
      const Status applied = applier.Apply(job, st);
      RC_ASSERT(applied.ok());
      job.allocations = st.allocations;
      job.start_time = now;
      mig_started += job.req.Mig();
      s.running.push_back(std::move(job));
    }
    CheckBookings(s);
    now += *rc::gen::inRange(60, 4 * 3600);
    for (size_t i = 0; i < s.running.size();) {
      if (s.running[i].EndEstimate() <= now || *rc::gen::inRange(0, 4) == 0) {
        const Job& gone = s.running[i];
        std::vector<std::vector<JobId>> before;
        for (const Node& n : s.nodes) {
          std::vector<JobId> jobs;
          for (const MigSlot& m : n.mig) jobs.push_back(m.job);
          before.push_back(jobs);
        }
        applier.Release(gone);
        for (size_t node = 0; node < s.nodes.size(); ++node) {
          for (size_t k = 0; k < s.nodes[node].mig.size(); ++k) {
            const JobId was = before[node][k];
            RC_ASSERT(s.nodes[node].mig[k].job == (was == gone.id ? 0 : was));
          }
        }
        s.running.erase(s.running.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    CheckBookings(s);
  }
  RC_CLASSIFY(mig_started > 0, "starts MIG jobs");
}

}  // namespace
}  // namespace hachi::sched
