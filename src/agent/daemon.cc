#include "agent/daemon.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "agent/agent_http.h"
#include "agent/spawn.h"
#include "api/protocol_json.h"

namespace hachi::agent {

namespace {
AgentOptions WithClock(AgentOptions o) {
  if (o.clock == nullptr) o.clock = RealClock();
  return o;
}
}  // namespace

AgentDaemon::AgentDaemon(AgentOptions options, LauncherFactory make_launcher)
    : options_(WithClock(std::move(options))),
      started_(options_.clock->Now()),
      poll_http_(std::make_unique<HttpClientHolder>(
          options_.server, options_.cluster_secret, options_.epoch_floor)),
      steps_http_(std::make_unique<HttpClientHolder>(
          options_.server, options_.cluster_secret, options_.epoch_floor)) {
  std::random_device rd;
  char id[40];
  std::snprintf(id, sizeof id, "%08x%08x%08x", rd(), rd(), rd());
  instance_ = id;
  jitter_state_ = (uint64_t{rd()} << 32) | rd();
  if (options_.epoch_floor) {
    // One line per new leader (docs/ha.md); it asks this agent to register again, as a
    // restarted server does, and the jobs keep running meanwhile.
    options_.epoch_floor->SetRiseObserver([](int64_t epoch, const std::string& from) {
      std::fprintf(stderr, "hachi agent: now following the leader at %s, epoch %lld\n",
                   from.c_str(), static_cast<long long>(epoch));
    });
  }
  // Before the launcher, whose exits (OnExit) stop their jobs' steps.
  const std::string steps_path =
      std::string(api::kApiPrefix) + "/agents/" + options_.node + "/steps";
  StepRunner::Options step_options;
  step_options.node = options_.node;
  step_options.clock = options_.clock;
  steps_ = std::make_unique<StepRunner>(
      std::move(step_options),
      [this](state::JobId job, Time start) {
        return launcher_->StepContextOf(job, start);
      },
      [this, steps_path](const std::vector<api::StepReport>& reports)
          -> Result<std::vector<api::StepAck>> {
        Result<std::string> r = steps_http_->Call(
            "POST", steps_path, api::StepReportsToJson({instance_, reports}), 10000);
        if (!r.ok()) return r.status();
        return api::StepAcksFromJson(*r);
      });
  launcher_ = make_launcher(
      LauncherEvents{[this](const api::JobExit& e) { OnExit(e); },
                     [this](state::JobId job, int sig) { steps_->SignalJob(job, sig); }});
  burn_in_ = std::make_unique<BurnInRunner>(
      options_.self_exe.empty() ? "/proc/self/exe" : options_.self_exe, options_.node,
      [this](const api::BurnInReport& r) {
        MutexLock lock(&mu_);
        burn_in_reports_.push_back(r);
        burn_in_reports_.back().instance = instance_;
        cv_.SignalAll();
      },
      options_.clock);
  // Runs an earlier agent process left and the launcher took over are this process's
  // now: a launch the server sends again for one of them is not launched twice. An exit
  // of one may have been queued (OnExit) already; then the run is not live.
  std::vector<state::JobId> adopted;
  {
    MutexLock lock(&mu_);
    AdoptRunsLocked(&adopted);
  }
  // The MPS daemons an earlier agent started serve those runs' shares, maybe: kept
  // while they last (which GPU each holds is not known here).
  if (options_.mps) options_.mps->AdoptLeftovers(adopted);
}

void AgentDaemon::AdoptRunsLocked(std::vector<state::JobId>* adopted) {
  // Adopted runs get one lease from now to reach the server.
  lease_ms_ = std::max<int64_t>(options_.lease, 1) * 1000;
  renewed_ms_ = options_.clock->MonotonicMs();
  // Not published: the lease file keeps what the earlier process promised, and a
  // deadline written from this process's default lease (longer than the server's,
  // maybe) could not be taken back before it passed. The registration's reply sets it.
  for (const auto& run : launcher_->AdoptedRuns()) {
    // Named, not structured bindings: clang 14 (make analyze) cannot capture those.
    const state::JobId job = run.first;
    const Time start = run.second;
    launched_.emplace(job, start);
    current_run_[job] = start;
    const bool ended = std::any_of(
        unreported_.begin(), unreported_.end(),
        [&](const api::JobExit& e) { return e.job == job && e.start_time == start; });
    if (!ended) live_[job] = start;
  }
  for (const auto& [job, start] : live_) adopted->push_back(job);
}

AgentDaemon::~AgentDaemon() { Stop(); }

Status AgentDaemon::Start() {
  if (options_.node.empty()) return InvalidArgument("agent: the node has no name");
  Result<std::unique_ptr<api::HttpClient>> probe =
      api::HttpClient::Create(options_.server);
  if (!probe.ok()) return probe.status();
  poll_ = std::thread([this] { PollLoop(); });
  report_ = std::thread([this] { ReportLoop(); });
  lease_ = std::thread([this] { LeaseLoop(); });
  if (options_.usage_interval_ms > 0)
    usage_thread_ = std::thread([this] { UsageLoop(); });
  return Status::Ok();
}

bool AgentDaemon::CancelAll(int wait_ms) {
  if (!launcher_) return true;
  for (state::JobId id : launcher_->Running()) launcher_->Cancel(id, "agent stopping");
  const auto deadline = CondVar::Clock::now() + std::chrono::milliseconds(wait_ms);
  MutexLock lock(&mu_);
  for (;;) {
    if (launcher_->Running().empty() && unreported_.empty()) return true;
    if (!cv_.WaitUntil(deadline))
      return launcher_->Running().empty() && unreported_.empty();
  }
}

void AgentDaemon::Stop(bool cancel_jobs) {
  if (cancel_jobs) CancelAll(0);
  {
    MutexLock lock(&mu_);
    if (stopping_ && !poll_.joinable()) return;
    stopping_ = true;
  }
  cv_.SignalAll();
  poll_http_->Abort();  // a long poll in progress returns now
  steps_http_->Abort();
  if (poll_.joinable()) poll_.join();
  if (report_.joinable()) report_.join();
  if (lease_.joinable()) lease_.join();
  if (usage_thread_.joinable()) usage_thread_.join();
  burn_in_->Stop();   // kills a check under way
  launcher_.reset();  // joins the supervisor (after the cancels were delivered)
  steps_.reset();     // kills the steps' tasks (after the launcher's last OnExit)
}

bool AgentDaemon::registered() const {
  MutexLock lock(&mu_);
  return registered_;
}

void AgentDaemon::OnExit(const api::JobExit& exit) {
  // The run is over here: what its steps still run goes with it (Slurm's job end).
  steps_->StopJob(exit.job, 0);
  if (options_.mps) options_.mps->Release(exit.job);
  MutexLock lock(&mu_);
  soft_limits_.erase(exit.job);
  api::JobExit e = exit;
  e.ended_mono_ms = options_.clock->MonotonicMs();
  if (e.start_time == 0) {
    auto run = current_run_.find(e.job);
    if (run != current_run_.end()) e.start_time = run->second;
  }
  // Stopped because its lease expired: lost with the node, to the server.
  if (lease_stopped_.erase({e.job, e.start_time}) > 0 &&
      e.kind == api::ExitKind::kCancelled) {
    e.kind = api::ExitKind::kLost;
    e.message = "lease expired: its agent on " + options_.node +
                " had no contact with the server for " +
                std::to_string(lease_ms_ / 1000) + " s and stopped it";
  }
  auto live = live_.find(e.job);
  if (live != live_.end() && live->second == e.start_time) {
    live_.erase(live);
    // A later run of the job waited for this one to end: the report thread starts it.
    auto d = deferred_.find(e.job);
    if (d != deferred_.end()) {
      ready_.push_back(std::move(d->second));
      deferred_.erase(d);
    }
  }
  unreported_.push_back(e);
  cv_.SignalAll();
}

Status AgentDaemon::RegisterOnce(HttpClientHolder& http) {
  api::AgentRegistration reg;
  reg.node = options_.node;
  reg.address = options_.address;
  reg.topology_json = options_.topology_json;
  reg.cpus = options_.cpus;
  reg.memory_mib = options_.memory_mib;
  reg.agent_started = started_;
  reg.instance = instance_;
  reg.cgroup = options_.cgroup;
  reg.gpu_sharing = options_.gpu_sharing;
  reg.gpu_driver = options_.gpu_driver;
  reg.simulated = options_.simulated;
  reg.running = launcher_->Running();
  reg.steps = steps_->Running();
  {
    MutexLock lock(&mu_);
    for (state::JobId id : finished_order_) reg.finished.push_back(id);
    for (const api::JobExit& e : unreported_)
      reg.running.push_back(e.job);  // report pending
  }
  const int64_t sent = options_.clock->MonotonicMs();
  Result<std::string> r =
      http.Call("POST", std::string(api::kApiPrefix) + "/agents/register",
                api::AgentRegistrationToJson(reg), 10000);
  if (!r.ok()) return r.status();
  // {"ok":true,"lease_s":30}; a server without lease_s: the agent's own default.
  const nlohmann::json reply = nlohmann::json::parse(*r, nullptr, false);
  int64_t lease_s = options_.lease;
  if (reply.is_object() && reply.contains("lease_s") &&
      reply["lease_s"].is_number_integer() && reply["lease_s"].get<int64_t>() > 0) {
    lease_s = reply["lease_s"].get<int64_t>();
  }
  MutexLock lock(&mu_);
  lease_ms_ = std::max<int64_t>(lease_s, 1) * 1000;
  RenewLeaseLocked(sent);
  registered_ = true;
  // A new server session (or a restarted server) knows nothing of the GPU processes.
  if (!processes_.empty()) processes_due_ = true;
  cv_.SignalAll();  // the report thread waits for a registration
  return Status::Ok();
}

void AgentDaemon::PollLoop() {
  HttpClientHolder& http = *poll_http_;
  const std::string work_base =
      std::string(api::kApiPrefix) + "/agents/" + options_.node + "/work?wait_ms=";
  int backoff_ms = 100;
  // The last batch of work acted on (AgentWork::seq), acknowledged by the next poll; a
  // registration starts a new session.
  uint64_t acked = 0;
  auto sleep_backoff = [&] {
    MutexLock lock(&mu_);
    BackoffLocked(&backoff_ms);
  };
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
    }
    bool need_register;
    {
      MutexLock lock(&mu_);
      need_register = !registered_;
    }
    if (need_register) {
      if (Status st = RegisterOnce(http); !st.ok()) {
        NoteCallFailed(st);
        sleep_backoff();
        continue;
      }
      backoff_ms = 100;
      acked = 0;
    }
    // A poll renews the lease from when it was sent, so when the link goes the last
    // renewal is up to two polls old: the agent stops its jobs between lease - 2 polls
    // and lease after the cut. Polls of at most a sixth of the lease keep that within
    // [2/3 lease, lease] (20-30 s at the defaults).
    int wait_ms = options_.poll_wait_ms;
    {
      MutexLock lock(&mu_);
      wait_ms = static_cast<int>(std::min<int64_t>(wait_ms, lease_ms_ / 6));
    }
    const int64_t sent = options_.clock->MonotonicMs();
    // How long past the server's answer at `wait` the poll waits for it. With several
    // controllers a leader frozen or cut off must not keep the agent from the one that
    // took over for long: 3 s, against 10 s for a lone, maybe busy, server.
    const int poll_slack_ms =
        options_.server.find(',') == std::string::npos ? 10000 : 3000;
    // clock_ms: this node's wall clock, which the server compares with its own (its
    // clock offset, shown by `hachi show node`).
    Result<std::string> body =
        http.Call("GET",
                  work_base + std::to_string(wait_ms) + "&ack=" + std::to_string(acked) +
                      "&clock_ms=" + std::to_string(options_.clock->NowMicros() / 1000),
                  "", wait_ms + poll_slack_ms);
    if (!body.ok()) {
      if (body.status().code() == StatusCode::kNotFound) {
        MutexLock lock(&mu_);
        registered_ = false;
      }
      NoteCallFailed(body.status());
      sleep_backoff();
      continue;
    }
    Result<api::AgentWork> work = api::AgentWorkFromJson(*body);
    if (!work.ok()) {
      sleep_backoff();
      continue;
    }
    backoff_ms = 100;
    if (work->reregister) {  // the server did not count it as contact: no renewal
      MutexLock lock(&mu_);
      registered_ = false;
      continue;
    }
    {
      MutexLock lock(&mu_);
      RenewLeaseLocked(sent);
    }
    // A burn-in run replaces the one under way (checks take minutes: they run
    // on the runner's thread, not this one).
    if (work->burn_in) burn_in_->Start(*work->burn_in);
    // Cancels first: one for a job that is also launched in this batch stops its earlier
    // run (the job was requeued), not the new one; one for the new run ends it unstarted.
    for (const api::RunStop& stop : work->cancel) StopRun(stop);
    for (const api::LaunchSpec& l : work->launch) {
      {
        MutexLock lock(&mu_);
        auto live = live_.find(l.job);
        if (live != live_.end() && live->second != l.start_time &&
            launched_.count({l.job, l.start_time}) == 0) {
          // The job's earlier run is still stopping here: this run starts once it exits
          // (OnExit), since the launcher runs one run of a job at a time.
          deferred_[l.job] = l;
          continue;
        }
        if (!AcceptRunLocked(l)) {
          // Sent again (the server restarted): report the exit again if it ended.
          auto f = finished_.find(l.job);
          if (f != finished_.end()) {
            unreported_.push_back(f->second);
            cv_.SignalAll();
          }
          continue;
        }
      }
      LaunchNow(l);
    }
    // POST /jobs/ID/signal: to the runs here now (a signal for a run that ended or has
    // not started yet here is dropped, as Slurm's for a job no longer running).
    for (const api::JobSignal& sig : work->signals) {
      if (sig.scope == api::SignalScope::kSteps) {
        steps_->SignalJob(sig.job, sig.signal);
      } else {
        launcher_->Signal(sig.job, sig.signal, sig.scope == api::SignalScope::kBatch);
      }
    }
    // scontrol update TimeLimit= of a running job: to that run here, if it still runs.
    for (const api::AgentWork::Limit& l : work->limits) {
      launcher_->SetTimeLimit(l.job, l.start_time, l.time_limit, l.time_left);
    }
    // Job steps: after the launches, so that a step of a job launched in this batch
    // finds its run.
    for (const api::StepLaunch& l : work->steps) steps_->Launch(l);
    for (const api::StepSignal& s : work->step_signals) steps_->Signal(s);
    for (const api::StepInput& in : work->step_input) steps_->Input(in);
    if (work->seq != 0) acked = work->seq;
  }
}

void AgentDaemon::StopRun(const api::RunStop& stop) {
  {
    MutexLock lock(&mu_);
    auto live = live_.find(stop.job);
    if (stop.start_time != 0 &&
        (live == live_.end() || live->second != stop.start_time)) {
      StopUnstartedLocked(stop);  // not the run that runs here now
      return;
    }
    if (live != live_.end()) {
      auto starting = starting_.find({stop.job, live->second});
      if (starting != starting_.end()) {
        starting->second = "cancelled";  // LaunchNow stops it once launched
        return;
      }
    }
  }
  launcher_->Cancel(stop.job, "cancelled");
  steps_->StopJob(stop.job, kStepGrace);  // steps' tasks are in sessions of their own
}

void AgentDaemon::StopUnstartedLocked(const api::RunStop& stop) {
  const std::pair<state::JobId, Time> run{stop.job, stop.start_time};
  auto waiting = [&](const api::LaunchSpec& l) {
    return l.job == stop.job && l.start_time == stop.start_time;
  };
  auto d = deferred_.find(stop.job);
  const bool deferred = d != deferred_.end() && waiting(d->second);
  if (deferred) deferred_.erase(d);
  const bool ready = std::erase_if(ready_, waiting) > 0;
  if (!launched_.emplace(run).second && !deferred && !ready) {
    // It ran here and ended: its exit again, in case the server has not got it.
    auto f = finished_.find(stop.job);
    if (f != finished_.end() && f->second.start_time == stop.start_time) {
      unreported_.push_back(f->second);
      cv_.SignalAll();
    }
    return;
  }
  // Never started here (its launch was lost, is in this batch, or waited for an earlier
  // run): it ends now, and a launch of it that comes later finds it launched.
  current_run_[stop.job] = stop.start_time;
  api::JobExit e;
  e.job = stop.job;
  e.start_time = stop.start_time;
  e.kind = api::ExitKind::kCancelled;
  e.message = "cancelled before it started on " + options_.node;
  e.end_time = options_.clock->Now();
  unreported_.push_back(e);
  cv_.SignalAll();
}

bool AgentDaemon::AcceptRunLocked(const api::LaunchSpec& l) {
  if (!launched_.emplace(l.job, l.start_time).second) return false;
  current_run_[l.job] = l.start_time;
  live_[l.job] = l.start_time;
  starting_.emplace(std::make_pair(l.job, l.start_time), std::string());
  if (finished_.erase(l.job) > 0) {  // a new run of a requeued job: its own exit
    finished_order_.erase(
        std::find(finished_order_.begin(), finished_order_.end(), l.job));
  }
  return true;
}

void AgentDaemon::LaunchNow(const api::LaunchSpec& launch) {
  api::LaunchSpec l = launch;
  if (l.share_milli > 0 && !l.gpus.empty()) {
    const int gpu = l.gpus.First();
    if (options_.mps) {
      // The daemon runs as whoever the share runs as (the launcher's rule).
      MpsUser user{geteuid(), getegid(), {}};
      if (geteuid() == 0) {
        user = MpsUser{l.spec.uid, l.spec.gid, {}};
        if (user.uid != 0) user.groups = GroupsOf(l.user, user.uid, user.gid);
      }
      Result<MpsClient> c = options_.mps->Acquire(gpu, l.job, user);
      if (c.ok()) {
        l.mps_pipe_dir = c->pipe_dir;
        l.mps_log_dir = c->log_dir;
        l.mps_device = c->device;
      } else {
        // The share runs anyway, time-sliced, under the soft limit; the node's record
        // hears why.
        std::cerr << "hachi agent: " << options_.node << ": job " << l.job
                  << " runs without MPS: " << c.status().message() << "\n";
        ReportHealth(api::GpuHealthEvent{
            gpu, "mps-failed", 0, "info",
            "job " + std::to_string(l.job) + " runs without MPS: " + c.status().message(),
            options_.clock->Now()});
      }
    }
    if (l.mps_pipe_dir.empty() && l.gpu_memory_mib > 0) {
      MutexLock lock(&mu_);
      soft_limits_[l.job] = SoftLimit{gpu, l.gpu_memory_mib, false};
    }
  }
  Status s = launcher_->Launch(l);
  std::string stop;  // asked while it was being launched (StopRun, the lease)
  {
    MutexLock lock(&mu_);
    auto starting = starting_.find({l.job, l.start_time});
    if (starting != starting_.end()) {
      stop = std::move(starting->second);
      starting_.erase(starting);
    }
  }
  if (s.ok() && !stop.empty()) {
    launcher_->Cancel(l.job, stop);
    steps_->StopJob(l.job, kStepGrace);
  }
  if (!s.ok()) {
    api::JobExit e;
    e.job = l.job;
    e.start_time = l.start_time;
    e.kind = api::ExitKind::kLaunchFailed;
    e.message = s.message();
    e.end_time = options_.clock->Now();
    OnExit(e);
  }
}

}  // namespace hachi::agent
