#include "sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <queue>

#include "sched/apply.h"
#include "sched/fair_share.h"
#include "sim/cluster_spec.h"

namespace hachi::sim {
namespace {

using Clock = std::chrono::steady_clock;

// Decayed GPU-seconds per account (sched::DecayedUsage, as the server's meter), copied
// into the cluster's fair-share usage at every advance.
class FairShareMeter {
 public:
  FairShareMeter(const std::vector<TraceJob>& trace, const SimOptions& options,
                 sched::FairShare* fs)
      : usage_(options.fairshare_half_life) {
    for (const TraceJob& j : trace) {
      if (usage_.Find(j.account) >= 0) continue;
      usage_.Index(j.account);
      // An account's share: SimOptions, else the cluster's (a config file), else 1.
      auto it = options.shares.find(j.account);
      if (it != options.shares.end()) {
        fs->shares[j.account] = it->second;
      } else {
        fs->shares.emplace(j.account, 1.0);
      }
      fs->usage[j.account] = 0;
    }
    // Pointers into the map stay valid: no account is added after this point.
    out_.resize(usage_.size());
    for (size_t i = 0; i < usage_.size(); ++i)
      out_[i] = &fs->usage[usage_.key(static_cast<int>(i))];
  }

  int AccountOf(const std::string& account) const { return usage_.Find(account); }
  void AddRunning(int account, int gpus) { usage_.AddRunning(account, gpus); }

  void AdvanceTo(Time now) {
    if (now <= usage_.now()) return;
    usage_.AdvanceTo(now);
    for (size_t i = 0; i < out_.size(); ++i) *out_[i] = usage_.usage(static_cast<int>(i));
  }

 private:
  sched::DecayedUsage usage_;
  std::vector<double*> out_;
};

// The simulation's mutable state. Plans are applied by sched::PlanApplier, the server's
// applier (same checks, same bookkeeping). Job ids are trace ids 1..n, so per-job
// bookkeeping lives in dense vectors indexed by id - 1.
class Run {
 public:
  Run(const std::vector<TraceJob>& trace, sched::ClusterState cluster,
      sched::Scheduler& scheduler, const SimOptions& options)
      : trace_(trace),
        state_(std::move(cluster)),
        applier_(&state_),
        scheduler_(scheduler),
        options_(options),
        fairshare_(trace, options, &state_.fairshare),
        runs_(trace.size(), 0),
        cancel_(trace.size(), 0),
        pending_pos_(trace.size(), -1),
        running_pos_(trace.size(), -1),
        account_(trace.size(), 0) {
    state_.pending.clear();
    state_.running.clear();
    state_.clock_offset = options.clock_offset;
    for (size_t i = 0; i < trace.size(); ++i)
      account_[i] = fairshare_.AccountOf(trace[i].account);
    result_.outcomes.reserve(trace.size());
    InitPools();
  }

  Result<SimResult> Go();

 private:
  // A completion or a preemption kill of one run of a job: stale once the job has
  // left (ended, or requeued and started again: `run` counts its starts).
  struct Completion {
    Time end;
    int64_t index;
    int32_t run = 0;
    bool operator>(const Completion& o) const {
      return end != o.end ? end > o.end : index > o.index;
    }
  };
  using EventHeap =
      std::priority_queue<Completion, std::vector<Completion>, std::greater<>>;

  void Arrive(size_t i);
  Status ApplyStart(const sched::Start& s, Time now);
  Status ApplyPreemption(const sched::Preemption& p, Time now);
  bool Current(const Completion& c) const {
    return running_pos_[c.index] >= 0 && runs_[c.index] == c.run;
  }
  // Takes job `index` off its nodes and out of `running` at `now`.
  sched::Job Leave(int64_t index, Time now);
  void Complete(int64_t index, Time now);
  void Kill(int64_t index, Time now);
  Status Stuck(const sched::Plan& plan, Time now) const;
  void Report(Time now, bool force);
  // Pools: burst nodes off at the start; PlanPower's resumes and suspends applied after
  // each cycle; a resumed node up `resume_delay` later; the powered time counted.
  void InitPools();
  void Power(const sched::Plan& plan, Time now);
  void PowerUp(int node, Time now);
  void CountPowered(int node, Time now);  // since powered_since_, into its pool
  void FinishPools(Time now);

  const std::vector<TraceJob>& trace_;
  sched::ClusterState state_;
  sched::PlanApplier applier_;  // over state_
  sched::Scheduler& scheduler_;
  const SimOptions& options_;
  FairShareMeter fairshare_;
  EventHeap completions_;
  EventHeap kills_;
  Time wake_ = kNever;                // the last plan's wake_at
  Time progress_ = 0;                 // last time a job arrived, started or left
  std::vector<int32_t> runs_;         // starts per job
  std::vector<uint8_t> cancel_;       // the pending kill cancels (else requeues)
  std::vector<int32_t> pending_pos_;  // index into state_.pending, -1: not pending
  std::vector<int32_t> running_pos_;  // index into state_.running, -1: not running
  std::vector<int> account_;
  SimResult result_;
  int64_t finished_ = 0;
  int64_t reported_permille_ = -1;
  std::vector<sched::NodePower> power_;  // one per node (all kOn without pools)
  std::vector<int> pool_of_;             // node -> index in options_.pools, -1: none
  std::vector<Time> powered_since_;      // a burst node's resume start (billing)
  EventHeap ups_;                        // resumes completing: {time, node}
  Time power_wake_ = kNever;             // PlanPower's next timer
};

void Run::InitPools() {
  power_.assign(state_.nodes.size(), sched::NodePower{});
  pool_of_.assign(state_.nodes.size(), -1);
  powered_since_.assign(state_.nodes.size(), 0);
  for (size_t p = 0; p < options_.pools.size(); ++p) {
    const sched::PowerPool& pool = options_.pools[p];
    PoolUse use;
    use.name = pool.name;
    use.burst = pool.burst;
    use.price_per_gpu_hour = pool.price_per_gpu_hour;
    for (int n : pool.nodes) {
      pool_of_[n] = static_cast<int>(p);
      ++use.nodes;
      use.gpus += state_.nodes[n].gpu_count();
      if (pool.burst) {
        power_[n] = {sched::PowerState::kOff, 0, 0};
        state_.nodes[n].state = sched::NodeState::kDown;
      }
    }
    if (!pool.burst) use.max_powered = use.nodes;
    result_.pools.push_back(std::move(use));
  }
  sched::RankByCost(options_.pools, &state_);
}

void Run::CountPowered(int node, Time now) {
  const int p = pool_of_[node];
  result_.pools[p].powered_gpu_seconds +=
      static_cast<double>(state_.nodes[node].gpu_count()) *
      static_cast<double>(now - powered_since_[node]);
  powered_since_[node] = now;
}

void Run::PowerUp(int node, Time now) {
  if (power_[node].state != sched::PowerState::kResuming) return;
  power_[node] = {sched::PowerState::kOn, now, now};
  state_.nodes[node].state = sched::NodeState::kUp;
  progress_ = now;
}

void Run::Power(const sched::Plan& plan, Time now) {
  if (options_.pools.empty()) return;
  const sched::PowerPlan p = sched::PlanPower(state_, plan, options_.pools, power_, now);
  for (int n : p.resume) {
    power_[n] = {sched::PowerState::kResuming, now, 0};
    powered_since_[n] = now;
    ++result_.pools[pool_of_[n]].resumes;
    ups_.push({now + options_.resume_delay, n, 0});
  }
  // The simulated resume always succeeds after resume_delay; one slower than its
  // pool's timeout fails, as the server would judge it.
  for (int n : p.timed_out) {
    CountPowered(n, now);
    power_[n] = {sched::PowerState::kFailed, now, 0};
  }
  for (int n : p.suspend) {
    CountPowered(n, now);
    power_[n] = {sched::PowerState::kOff, now, 0};
    state_.nodes[n].state = sched::NodeState::kDown;
    ++result_.pools[pool_of_[n]].suspends;
  }
  power_wake_ = p.wake_at > now ? p.wake_at : kNever;
  std::vector<int> powered(options_.pools.size(), 0);
  for (size_t n = 0; n < power_.size(); ++n) {
    if (pool_of_[n] >= 0 && options_.pools[pool_of_[n]].burst &&
        (power_[n].state == sched::PowerState::kOn ||
         power_[n].state == sched::PowerState::kResuming)) {
      ++powered[pool_of_[n]];
    }
  }
  for (size_t i = 0; i < powered.size(); ++i) {
    if (options_.pools[i].burst) {
      result_.pools[i].max_powered = std::max(result_.pools[i].max_powered, powered[i]);
    }
  }
}

void Run::FinishPools(Time now) {
  for (size_t n = 0; n < power_.size(); ++n) {
    const int p = pool_of_[n];
    if (p < 0) continue;
    if (!options_.pools[p].burst) {
      powered_since_[n] = 0;  // a fixed node was on from trace time 0
      CountPowered(static_cast<int>(n), now);
    } else if (power_[n].state == sched::PowerState::kOn ||
               power_[n].state == sched::PowerState::kResuming) {
      CountPowered(static_cast<int>(n), now);
    }
  }
}

void Run::Arrive(size_t i) {
  const TraceJob& t = trace_[i];
  sched::JobRequest req;
  // ShapeOf cannot fail here: the readers checked every row.
  Result<GangShape> shape = ShapeOf(t.gpus);
  req.gpus = t.gpus;
  if (shape.ok() && shape->nodes > 1) {
    req.nodes = shape->nodes;
    req.gpus_per_node = shape->gpus_per_node;
  }
  req.partition = t.partition;
  req.user = t.user;
  req.account = t.account;
  req.time_limit =
      t.time_limit > 0 ? t.time_limit : TimeLimitFor(options_.time_limits, t.duration);
  // The server's admission check: a request that can never run is refused at submit.
  Result<sched::Job> job = sched::ValidateRequest(state_, req);
  if (!job.ok()) {
    ++result_.rejected;
    ++finished_;
    if (result_.rejections.size() < 5) {
      result_.rejections.push_back("job " + std::to_string(t.id) + " (trace line " +
                                   std::to_string(t.row) +
                                   "): " + job.status().message());
    }
    return;
  }
  job->id = t.id;
  job->submit_time = t.submit;
  pending_pos_[i] = static_cast<int32_t>(state_.pending.size());
  state_.pending.push_back(std::move(*job));
}

Status Run::ApplyStart(const sched::Start& s, Time now) {
  const int64_t i = s.job - 1;
  if (i < 0 || i >= static_cast<int64_t>(trace_.size()) || pending_pos_[i] < 0) {
    return Internal("plan starts job " + std::to_string(s.job) +
                    ", which is not pending");
  }
  sched::Job& job = state_.pending[pending_pos_[i]];
  // The server's applier (sched/apply.h): the same checks, all parts or none.
  HACHI_RETURN_IF_ERROR(applier_.Apply(job, s));
  job.start_time = now;
  job.allocations = s.allocations;
  for (const sched::Allocation& a : s.allocations) power_[a.node].idle_since = 0;
  if (s.backfilled) ++result_.backfilled;
  fairshare_.AddRunning(account_[i], job.req.TotalGpus());
  completions_.push({now + trace_[i].duration, i, ++runs_[i]});

  // Swap-and-pop: the scheduler orders `pending` itself, so its order is free.
  const int32_t pos = pending_pos_[i];
  running_pos_[i] = static_cast<int32_t>(state_.running.size());
  state_.running.push_back(std::move(job));
  if (pos != static_cast<int32_t>(state_.pending.size()) - 1) {
    state_.pending[pos] = std::move(state_.pending.back());
    pending_pos_[state_.pending[pos].id - 1] = pos;
  }
  state_.pending.pop_back();
  pending_pos_[i] = -1;
  return Status::Ok();
}

sched::Job Run::Leave(int64_t i, Time now) {
  const int32_t pos = running_pos_[i];
  sched::Job job = std::move(state_.running[pos]);
  applier_.Release(job);
  for (const sched::Allocation& a : job.allocations) {
    if (pool_of_[a.node] >= 0) {
      result_.pools[pool_of_[a.node]].busy_gpu_seconds +=
          static_cast<double>(a.gpus.size()) * static_cast<double>(now - job.start_time);
    }
    if (sched::IsEmpty(state_.nodes[a.node])) power_[a.node].idle_since = now;
  }
  fairshare_.AddRunning(account_[i], -job.req.TotalGpus());
  if (pos != static_cast<int32_t>(state_.running.size()) - 1) {
    state_.running[pos] = std::move(state_.running.back());
    running_pos_[state_.running[pos].id - 1] = pos;
  }
  state_.running.pop_back();
  running_pos_[i] = -1;
  return job;
}

void Run::Complete(int64_t i, Time now) {
  const sched::Job job = Leave(i, now);
  result_.outcomes.push_back(
      JobOutcome{job.id, job.req.TotalGpus(), job.submit_time, job.start_time, now});
  ++finished_;
  progress_ = now;
}

void Run::Kill(int64_t i, Time now) {
  sched::Job job = Leave(i, now);
  progress_ = now;
  if (cancel_[i]) {  // the mode of the plan's Preemption
    ++result_.cancelled;
    ++finished_;
    return;
  }
  // Back to pending as it was submitted: same id and submit time; the run is lost.
  ++result_.requeues;
  result_.lost_gpu_seconds += static_cast<double>(job.req.TotalGpus()) *
                              static_cast<double>(now - job.start_time);
  job.start_time = 0;
  job.allocations.clear();
  job.preempt_kill_at = kNever;
  pending_pos_[i] = static_cast<int32_t>(state_.pending.size());
  state_.pending.push_back(std::move(job));
}

Status Run::ApplyPreemption(const sched::Preemption& p, Time now) {
  const int64_t i = p.job - 1;
  if (i < 0 || i >= static_cast<int64_t>(trace_.size()) || running_pos_[i] < 0) {
    return Internal("plan preempts job " + std::to_string(p.job) +
                    ", which is not running");
  }
  sched::Job& job = state_.running[running_pos_[i]];
  if (job.preempt_kill_at != kNever) {
    return Internal("plan preempts job " + std::to_string(p.job) +
                    " again; it is already being preempted");
  }
  job.preempt_kill_at = std::max(p.kill_at, now);
  cancel_[i] = p.mode == sched::PreemptMode::kCancel;
  ++result_.preemptions;
  kills_.push({job.preempt_kill_at, i, runs_[i]});
  return Status::Ok();
}

Status Run::Stuck(const sched::Plan& lean_plan, Time now) const {
  // A lean cycle (explain = false) may leave Plan::pending empty; the diagnoses come
  // from one explaining cycle of a fresh scheduler with the same policy, which starts
  // the same jobs (none) by the scheduler's contract.
  sched::Plan explained;
  const sched::Plan* plan = &lean_plan;
  if (!scheduler_.config().explain) {
    sched::SchedConfig config = scheduler_.config();
    config.explain = true;
    Result<std::unique_ptr<sched::Scheduler>> s = sched::Scheduler::Create(config);
    if (s.ok()) {
      explained = (*s)->Schedule(state_, now);
      plan = &explained;
    }
  }
  std::string msg = "simulation stuck at t=" + std::to_string(now) +
                    "s: " + std::to_string(state_.pending.size()) +
                    " jobs pending, none running, none arriving; the scheduler never "
                    "starts them:";
  int shown = 0;
  for (const sched::Diagnosis& d : plan->pending) {
    if (shown++ == 5) break;
    const int64_t i = d.job - 1;
    if (i < 0 || i >= static_cast<int64_t>(trace_.size()) || pending_pos_[i] < 0)
      continue;
    const sched::Job& j = state_.pending[pending_pos_[i]];
    msg += "\n  job " + std::to_string(d.job) + " (" + std::to_string(j.req.TotalGpus()) +
           " GPUs): " + std::string(sched::ReasonName(d.reason)) + ": " +
           d.Format(state_, now);
  }
  if (plan->pending.empty()) msg += " (the plan gave no diagnoses)";
  return Unsatisfiable(std::move(msg));
}

void Run::Report(Time now, bool force) {
  if (!options_.progress) return;
  const int64_t total = static_cast<int64_t>(trace_.size());
  const int64_t permille = total == 0 ? 1000 : finished_ * 1000 / total;
  if (!force && permille == reported_permille_) return;
  reported_permille_ = permille;
  options_.progress(SimProgress{finished_, total, now});
}

Result<SimResult> Run::Go() {
  size_t next = 0;  // next arrival
  Time now = 0;
  while (next < trace_.size() || !completions_.empty() || !kills_.empty() ||
         !ups_.empty() || power_wake_ != kNever ||
         (!state_.pending.empty() && wake_ != kNever)) {
    now = kNever;
    if (next < trace_.size()) now = trace_[next].submit;
    if (!completions_.empty()) now = std::min(now, completions_.top().end);
    if (!kills_.empty()) now = std::min(now, kills_.top().end);
    if (!ups_.empty()) now = std::min(now, ups_.top().end);
    now = std::min(now, power_wake_);
    if (!state_.pending.empty()) now = std::min(now, wake_);
    fairshare_.AdvanceTo(now);
    while (!ups_.empty() && ups_.top().end == now) {  // resumed nodes first: usable now
      PowerUp(static_cast<int>(ups_.top().index), now);
      ups_.pop();
    }
    // Completions first: their GPUs are free for the jobs arriving at the same second,
    // and a job that ends on its own at its kill time is not killed.
    while (!completions_.empty() && completions_.top().end == now) {
      const Completion c = completions_.top();
      completions_.pop();
      if (Current(c)) Complete(c.index, now);
    }
    while (!kills_.empty() && kills_.top().end == now) {
      const Completion c = kills_.top();
      kills_.pop();
      if (Current(c)) Kill(c.index, now);
    }
    while (next < trace_.size() && trace_[next].submit == now) {
      Arrive(next++);
      progress_ = now;
    }
    wake_ = kNever;
    sched::Plan plan;
    if (!state_.pending.empty()) {
      const Clock::time_point t0 = Clock::now();
      plan = scheduler_.Schedule(state_, now);
      const Clock::time_point t1 = Clock::now();
      result_.cycle_ms.push_back(
          std::chrono::duration<double, std::milli>(t1 - t0).count());
      for (const sched::Start& s : plan.starts) HACHI_RETURN_IF_ERROR(ApplyStart(s, now));
      for (const sched::Preemption& p : plan.preemptions) {
        HACHI_RETURN_IF_ERROR(ApplyPreemption(p, now));
      }
      if (!plan.starts.empty()) progress_ = now;
      if (plan.wake_at > now) wake_ = plan.wake_at;
    }
    Power(plan, now);
    // Stuck: nothing runs, arrives or powers up, and waking up for windows has not
    // helped for longer than any weekly window pattern.
    if (!state_.pending.empty() && plan.starts.empty() && state_.running.empty() &&
        next == trace_.size() && ups_.empty() &&
        (wake_ == kNever || now - progress_ > 8 * kDay)) {
      return Stuck(plan, now);
    }
    Report(now, false);
  }
  Report(now, true);
  FinishPools(now);
  result_.end = now;
  std::sort(result_.outcomes.begin(), result_.outcomes.end(),
            [](const JobOutcome& a, const JobOutcome& b) { return a.id < b.id; });
  return std::move(result_);
}

}  // namespace

Result<SimResult> Simulate(const std::vector<TraceJob>& trace,
                           sched::ClusterState cluster, sched::Scheduler& scheduler,
                           const SimOptions& options) {
  for (size_t i = 0; i < trace.size(); ++i) {
    if (trace[i].id != static_cast<int64_t>(i) + 1 ||
        (i > 0 && trace[i].submit < trace[i - 1].submit)) {
      return InvalidArgument("trace must be sorted by submit time with ids 1..n (job " +
                             std::to_string(trace[i].id) + " at position " +
                             std::to_string(i + 1) + ")");
    }
  }
  if (!options.pools.empty() && !scheduler.config().explain) {
    return InvalidArgument(
        "pools need the plan's diagnoses: run the scheduler with explain = true");
  }
  Run run(trace, std::move(cluster), scheduler, options);
  return run.Go();
}

Result<SimMetrics> RunSimulation(const std::vector<TraceJob>& trace,
                                 const RunConfig& config) {
  const Clock::time_point t0 = Clock::now();
  Result<sched::ClusterState> cluster =
      BuildCluster(config.cluster, config.cluster_options);
  if (!cluster.ok()) return cluster.status();
  if (config.configure) HACHI_RETURN_IF_ERROR(config.configure(&*cluster));
  SimOptions options = config.sim;
  if (config.pools) {
    Result<std::vector<sched::PowerPool>> pools = config.pools(*cluster);
    if (!pools.ok()) return pools.status();
    options.pools = std::move(*pools);
  }
  const int gpus = TotalGpus(*cluster);
  Result<std::unique_ptr<sched::Scheduler>> scheduler =
      sched::Scheduler::Create(config.sched);
  if (!scheduler.ok()) return scheduler.status();
  Result<SimResult> r = Simulate(trace, std::move(*cluster), **scheduler, options);
  if (!r.ok()) return r.status();
  SimMetrics m;
  m.policy = config.sched.policy;
  m.cluster = config.cluster;
  m.cluster_gpus = gpus;
  m.time_limits = std::string(TimeLimitModelName(config.sim.time_limits));
  m.rejected = r->rejected;
  m.rejections = r->rejections;
  m.backfilled = r->backfilled;
  m.preemptions = r->preemptions;
  m.requeues = r->requeues;
  m.cancelled = r->cancelled;
  m.lost_gpu_hours = r->lost_gpu_seconds / 3600.0;
  ComputeMetrics(r->outcomes, gpus, r->cycle_ms, &m);
  m.pools = r->pools;
  m.span_s = static_cast<double>(r->end);
  m.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return m;
}

}  // namespace hachi::sim
