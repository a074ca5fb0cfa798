#include "agent/daemon.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "agent/gpu_processes.h"
#include "agent/job_usage.h"
#include "api/http_client.h"
#include "api/protocol_json.h"

namespace hachi::agent {

// Keeps an HttpClient per thread and recreates it after connection errors.
// Stop() aborts a long poll in progress through Abort(), from another thread.
class HttpClientHolder {
 public:
  HttpClientHolder(std::string server, std::string cluster_secret)
      : server_(std::move(server)), cluster_secret_(std::move(cluster_secret)) {}
  Result<std::string> Call(std::string_view method, const std::string& path,
                           const std::string& body, int timeout_ms) {
    api::HttpClient* client = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (aborted_) return Unavailable("agent stopping");
      if (!client_) {
        Result<std::unique_ptr<api::HttpClient>> c = api::HttpClient::Create(server_);
        if (!c.ok()) return c.status();
        // What opens the server's /agents/* endpoints (server/auth.h).
        (*c)->SetHeader(api::kClusterSecretHeader, cluster_secret_);
        client_ = std::move(*c);
      }
      client = client_.get();
    }
    Result<std::string> r = client->Call(method, path, body, timeout_ms);
    if (!r.ok() && r.status().code() == StatusCode::kUnavailable) {
      std::lock_guard<std::mutex> lock(mu_);
      client_.reset();
    }
    return r;
  }
  void Abort() {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    if (client_) client_->Abort();
  }

 private:
  const std::string server_;
  const std::string cluster_secret_;
  std::mutex mu_;  // guards client_ (replaced after errors) against Abort
  std::unique_ptr<api::HttpClient> client_;
  bool aborted_ = false;
};

namespace {
constexpr size_t kFinishedKept = 20000;
// SIGTERM -> SIGKILL for a stopping job's steps' tasks (the job's own grace is the
// launcher's; the steps go no later than this).
constexpr Duration kStepGrace = 10;

AgentOptions WithClock(AgentOptions o) {
  if (o.clock == nullptr) o.clock = RealClock();
  return o;
}
}  // namespace

AgentDaemon::AgentDaemon(AgentOptions options, LauncherFactory make_launcher)
    : options_(WithClock(std::move(options))),
      started_(options_.clock->Now()),
      poll_http_(
          std::make_unique<HttpClientHolder>(options_.server, options_.cluster_secret)),
      steps_http_(
          std::make_unique<HttpClientHolder>(options_.server, options_.cluster_secret)) {
  std::random_device rd;
  char id[40];
  std::snprintf(id, sizeof id, "%08x%08x%08x", rd(), rd(), rd());
  instance_ = id;
  jitter_state_ = (uint64_t{rd()} << 32) | rd();
  // Before the launcher, whose exits (OnExit) stop their jobs' steps.
  const std::string steps_path =
      std::string(api::kApiPrefix) + "/agents/" + options_.node + "/steps";
  steps_ = std::make_unique<StepRunner>(
      StepRunner::Options{options_.node},
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
  launcher_ = make_launcher([this](const api::JobExit& e) { OnExit(e); });
  burn_in_ = std::make_unique<BurnInRunner>(
      options_.self_exe.empty() ? "/proc/self/exe" : options_.self_exe, options_.node,
      [this](const api::BurnInReport& r) {
        std::lock_guard<std::mutex> lock(mu_);
        burn_in_reports_.push_back(r);
        burn_in_reports_.back().instance = instance_;
        cv_.notify_all();
      });
  // Runs an earlier agent process left and the launcher took over are this process's
  // now: a launch the server sends again for one of them is not launched twice. An exit
  // of one may have been queued (OnExit) already; then the run is not live.
  std::unique_lock<std::mutex> lock(mu_);
  // Adopted runs get one lease from now to reach the server.
  lease_ms_ = std::max<int64_t>(options_.lease, 1) * 1000;
  renewed_ms_ = options_.clock->MonotonicMs();
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
  // The MPS daemons an earlier agent started serve those runs' shares, maybe: kept
  // while they last (which GPU each holds is not known here).
  if (options_.mps) {
    std::vector<state::JobId> adopted;
    for (const auto& [job, start] : live_) adopted.push_back(job);
    lock.unlock();
    options_.mps->AdoptLeftovers(adopted);
  }
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

void AgentDaemon::UsageLoop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, std::chrono::milliseconds(options_.usage_interval_ms),
                       [&] { return stopping_; })) {
        return;
      }
    }
    SampleUsage();
  }
}

void AgentDaemon::SampleUsage() {
  std::vector<std::pair<state::JobId, Time>> runs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (usage_refused_) return;
    for (const auto& [job, start] : live_) runs.emplace_back(job, start);
  }
  if (runs.empty()) return;
  const std::vector<state::GpuSample> gpus =
      options_.sample_gpus ? options_.sample_gpus() : std::vector<state::GpuSample>{};
  const Time now = options_.clock->Now();
  std::vector<state::JobUsageSample> samples;
  for (const auto& [job, start] : runs) {
    std::optional<StepContext> c = launcher_->StepContextOf(job, start);
    if (!c) continue;  // adopted (its launch unknown) or stopping
    state::JobUsageSample u = JobSample(job, start, now, c->spec.gpus.Indices(), gpus,
                                        ReadCgroupUse(c->cgroup_procs));
    // Nothing measured (simulated GPUs without cgroups): nothing to send.
    if (u.gpus.empty() && u.cpu_usec < 0 && u.mem_mib < 0) continue;
    samples.push_back(std::move(u));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (usage_refused_) return;
  for (state::JobUsageSample& u : samples) {
    if (live_.count(u.job) == 0) continue;  // exited meanwhile
    usage_[u.job] = std::move(u);
  }
  if (!usage_.empty()) cv_.notify_all();
}

bool AgentDaemon::CancelAll(int wait_ms) {
  if (!launcher_) return true;
  for (state::JobId id : launcher_->Running()) launcher_->Cancel(id, "agent stopping");
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [&] {
    return launcher_->Running().empty() && unreported_.empty();
  });
}

void AgentDaemon::Stop(bool cancel_jobs) {
  if (cancel_jobs) CancelAll(0);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !poll_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
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
  std::lock_guard<std::mutex> lock(mu_);
  return registered_;
}

void AgentDaemon::OnExit(const api::JobExit& exit) {
  // The run is over here: what its steps still run goes with it (Slurm's job end).
  steps_->StopJob(exit.job, 0);
  if (options_.mps) options_.mps->Release(exit.job);
  std::lock_guard<std::mutex> lock(mu_);
  soft_limits_.erase(exit.job);
  api::JobExit e = exit;
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
  cv_.notify_all();
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
    std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> lock(mu_);
  lease_ms_ = std::max<int64_t>(lease_s, 1) * 1000;
  RenewLeaseLocked(sent);
  registered_ = true;
  // A new server session (or a restarted server) knows nothing of the GPU processes.
  if (!processes_.empty()) processes_due_ = true;
  cv_.notify_all();  // the report thread waits for a registration
  return Status::Ok();
}

void AgentDaemon::PollLoop() {
  HttpClientHolder& http = *poll_http_;
  const std::string work_base =
      std::string(api::kApiPrefix) + "/agents/" + options_.node + "/work?wait_ms=";
  int backoff_ms = 100;
  auto sleep_backoff = [&] {
    std::unique_lock<std::mutex> lock(mu_);
    BackoffLocked(lock, &backoff_ms);
  };
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    bool need_register;
    {
      std::lock_guard<std::mutex> lock(mu_);
      need_register = !registered_;
    }
    if (need_register) {
      if (!RegisterOnce(http).ok()) {
        sleep_backoff();
        continue;
      }
      backoff_ms = 100;
    }
    // A poll renews the lease from when it was sent, so when the link goes the last
    // renewal is up to two polls old: the agent stops its jobs between lease - 2 polls
    // and lease after the cut. Polls of at most a sixth of the lease keep that within
    // [2/3 lease, lease] (20-30 s at the defaults).
    int wait_ms = options_.poll_wait_ms;
    {
      std::lock_guard<std::mutex> lock(mu_);
      wait_ms = static_cast<int>(std::min<int64_t>(wait_ms, lease_ms_ / 6));
    }
    const int64_t sent = options_.clock->MonotonicMs();
    Result<std::string> body =
        http.Call("GET", work_base + std::to_string(wait_ms), "", wait_ms + 10000);
    if (!body.ok()) {
      if (body.status().code() == StatusCode::kNotFound) {
        std::lock_guard<std::mutex> lock(mu_);
        registered_ = false;
      }
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
      std::lock_guard<std::mutex> lock(mu_);
      registered_ = false;
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      RenewLeaseLocked(sent);
    }
    // Issue 19: a burn-in run replaces the one under way (checks take minutes: they run
    // on the runner's thread, not this one).
    if (work->burn_in) burn_in_->Start(*work->burn_in);
    // Cancels first: one for a job that is also launched in this batch stops its earlier
    // run (the job was requeued), not the new one.
    for (state::JobId id : work->cancel) {
      launcher_->Cancel(id, "cancelled");
      steps_->StopJob(id, kStepGrace);  // steps' tasks are in sessions of their own
    }
    for (const api::LaunchSpec& l : work->launch) {
      {
        std::lock_guard<std::mutex> lock(mu_);
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
            cv_.notify_all();
          }
          continue;
        }
      }
      LaunchNow(l);
    }
    // POST /jobs/ID/signal: to the runs here now (a signal for a run that ended or has
    // not started yet here is dropped, as Slurm's for a job no longer running).
    for (const api::JobSignal& sig : work->signals) {
      launcher_->Signal(sig.job, sig.signal, sig.batch_only);
    }
    // scontrol update TimeLimit= of a running job: to that run here, if it still runs.
    for (const api::AgentWork::Limit& l : work->limits) {
      launcher_->SetTimeLimit(l.job, l.start_time, l.time_limit);
    }
    // Job steps: after the launches, so that a step of a job launched in this batch
    // finds its run.
    for (const api::StepLaunch& l : work->steps) steps_->Launch(l);
    for (const api::StepSignal& s : work->step_signals) steps_->Signal(s);
    for (const api::StepInput& in : work->step_input) steps_->Input(in);
  }
}

bool AgentDaemon::AcceptRunLocked(const api::LaunchSpec& l) {
  if (!launched_.emplace(l.job, l.start_time).second) return false;
  current_run_[l.job] = l.start_time;
  live_[l.job] = l.start_time;
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
      Result<MpsClient> c = options_.mps->Acquire(gpu, l.job);
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
      std::lock_guard<std::mutex> lock(mu_);
      soft_limits_[l.job] = SoftLimit{gpu, l.gpu_memory_mib, false};
    }
  }
  Status s = launcher_->Launch(l);
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

void AgentDaemon::ReportHealth(const api::GpuHealthEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (health_.size() >= kHealthQueued) health_.erase(health_.begin());  // bounded
  health_.push_back(e);
  cv_.notify_all();
}

namespace {

// The same processes, each within 256 MiB of its memory: the server hears of a job's
// GPU memory as it grows (issue 20: its peak against its promise), not of every MiB.
bool SameProcesses(const std::vector<api::GpuProcessReport>& a,
                   const std::vector<api::GpuProcessReport>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const api::GpuProcessReport& x, const api::GpuProcessReport& y) {
                      return x.gpu == y.gpu && x.pid == y.pid && x.job == y.job &&
                             std::abs(x.used_mib - y.used_mib) < 256;
                    });
}

}  // namespace

void AgentDaemon::ReportProcesses(std::vector<api::GpuProcessReport> processes) {
  std::vector<std::pair<state::JobId, std::string>> over;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!soft_limits_.empty()) {
      std::map<state::JobId, ShareMemoryLimit> limits;
      for (const auto& [job, l] : soft_limits_) {
        if (!l.stopped) limits[job] = ShareMemoryLimit{l.gpu, l.promised_mib};
      }
      over = OverSoftLimit(processes, limits);
      for (const auto& [job, why] : over) soft_limits_[job].stopped = true;
    }
  }
  for (const auto& [job, why] : over) {
    std::cerr << "hachi agent: " << options_.node << ": job " << job << ": " << why
              << ": stopping it\n";
    launcher_->Stop(job, api::ExitKind::kOutOfMemory, why);
  }
  std::lock_guard<std::mutex> lock(mu_);
  const Time now = options_.clock->Now();
  const bool changed = !SameProcesses(processes, processes_);
  const bool refresh = !processes.empty() && now - processes_sent_at_ >= 60;
  processes_ = std::move(processes);
  if (changed || refresh) {
    processes_due_ = true;
    cv_.notify_all();
  }
}

void AgentDaemon::ReportLoop() {
  HttpClientHolder http(options_.server, options_.cluster_secret);
  const std::string base = std::string(api::kApiPrefix) + "/agents/" + options_.node;
  const std::string path = base + "/exits";
  int backoff_ms = 100;
  for (;;) {
    std::vector<api::JobExit> batch;
    std::vector<api::GpuHealthEvent> health;
    bool send_processes = false;
    std::vector<api::GpuProcessReport> processes;
    std::vector<state::JobUsageSample> usage;
    std::vector<api::BurnInReport> burn_in;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return stopping_ || !ready_.empty() ||
               ((!unreported_.empty() || !health_.empty() || processes_due_ ||
                 !usage_.empty() || !burn_in_reports_.empty()) &&
                registered_);
      });
      if (!ready_.empty() &&
          !stopping_) {  // runs that waited for their job's earlier run
        std::vector<api::LaunchSpec> ready, now;
        ready.swap(ready_);
        for (api::LaunchSpec& l : ready) {
          if (AcceptRunLocked(l)) now.push_back(std::move(l));  // else launched already
        }
        lock.unlock();
        for (const api::LaunchSpec& l : now) LaunchNow(l);
        continue;
      }
      if ((unreported_.empty() && health_.empty() && !processes_due_ && usage_.empty() &&
           burn_in_reports_.empty()) ||
          !registered_) {
        if (stopping_) return;
        continue;
      }
      burn_in = burn_in_reports_;
      batch = unreported_;
      health = health_;
      send_processes = processes_due_;
      if (send_processes) processes = processes_;
      for (const auto& [job, u] : usage_) usage.push_back(u);
    }
    if (!health.empty() || send_processes || !usage.empty()) {
      // GPU faults first: the server takes the GPU out before it hears of the exits the
      // fault caused. A report it refuses (400: an index it does not know) is dropped.
      api::AgentHealth report{instance_, health, send_processes, processes, usage};
      Result<std::string> r =
          http.Call("POST", base + "/health", api::AgentHealthToJson(report), 10000);
      if (!r.ok() && r.status().code() == StatusCode::kInvalidArgument &&
          !usage.empty()) {
        // A server older than the usage samples (issue 21) refuses the whole report:
        // the GPU faults go again without them, and this agent stops sampling.
        std::fprintf(stderr,
                     "hachi agent: the server refused job usage samples (%s); sending "
                     "none from now on\n",
                     r.status().message().c_str());
        report.usage.clear();
        r = http.Call("POST", base + "/health", api::AgentHealthToJson(report), 10000);
        std::lock_guard<std::mutex> lock(mu_);
        usage_refused_ = true;
        usage_.clear();
      }
      std::unique_lock<std::mutex> lock(mu_);
      if (r.ok() || r.status().code() == StatusCode::kInvalidArgument) {
        if (send_processes) {
          processes_sent_at_ = options_.clock->Now();
          processes_due_ = !SameProcesses(processes, processes_);
        }
        if (!r.ok()) {
          std::fprintf(stderr,
                       "hachi agent: the server refused a GPU health report: %s\n",
                       r.status().message().c_str());
        }
        health_.erase(health_.begin(),
                      health_.begin() + static_cast<std::ptrdiff_t>(
                                            std::min(health.size(), health_.size())));
        for (const state::JobUsageSample& u : usage) {
          auto it = usage_.find(u.job);
          if (it != usage_.end() && it->second.at == u.at) usage_.erase(it);  // not newer
        }
      } else {
        if (r.status().code() == StatusCode::kNotFound) registered_ = false;
        if (stopping_) return;
        BackoffLocked(lock, &backoff_ms);
        continue;
      }
    }
    if (!burn_in.empty()) {
      // Issue 19: a refused report (400) is dropped; the server fails a run it never
      // hears of at its timeout.
      bool sent_all = true;
      for (const api::BurnInReport& b : burn_in) {
        Result<std::string> r =
            http.Call("POST", base + "/burn-in", api::BurnInReportToJson(b), 10000);
        if (!r.ok() && r.status().code() != StatusCode::kInvalidArgument) {
          std::unique_lock<std::mutex> lock(mu_);
          if (r.status().code() == StatusCode::kNotFound) registered_ = false;
          sent_all = false;
          break;
        }
        std::lock_guard<std::mutex> lock(mu_);
        if (!burn_in_reports_.empty()) burn_in_reports_.erase(burn_in_reports_.begin());
      }
      if (!sent_all) {
        std::unique_lock<std::mutex> lock(mu_);
        if (stopping_) return;
        BackoffLocked(lock, &backoff_ms);
        continue;
      }
    }
    if (batch.empty()) continue;
    const int64_t sent = options_.clock->MonotonicMs();
    Result<std::string> r = http.Call("POST", path, api::JobExitsToJson(batch), 10000);
    std::unique_lock<std::mutex> lock(mu_);
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kNotFound) registered_ = false;
      if (stopping_) return;
      BackoffLocked(lock, &backoff_ms);
      continue;
    }
    backoff_ms = 100;
    RenewLeaseLocked(sent);
    // Acknowledged: remember them (a repeated launch re-reports), drop from the queue.
    for (const api::JobExit& e : batch) {
      if (finished_.emplace(e.job, e).second) finished_order_.push_back(e.job);
    }
    while (finished_order_.size() > kFinishedKept) {
      finished_.erase(finished_order_.front());
      finished_order_.pop_front();
    }
    unreported_.erase(unreported_.begin(),
                      unreported_.begin() + static_cast<std::ptrdiff_t>(batch.size()));
    cv_.notify_all();  // CancelAll waits for the queue to empty
  }
}

void AgentDaemon::RenewLeaseLocked(int64_t sent_ms) {
  renewed_ms_ = std::max(renewed_ms_, sent_ms);
  if (lease_expired_ && options_.clock->MonotonicMs() - renewed_ms_ <= lease_ms_) {
    lease_expired_ = false;
    std::fprintf(stderr, "hachi agent: in contact with the server again\n");
  }
}

void AgentDaemon::BackoffLocked(std::unique_lock<std::mutex>& lock, int* backoff_ms) {
  // splitmix64: a fresh draw in [0, backoff] per wait.
  uint64_t z = (jitter_state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  const int wait_ms = static_cast<int>(z % static_cast<uint64_t>(*backoff_ms + 1));
  cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [&] { return stopping_; });
  *backoff_ms = std::min(*backoff_ms * 2, 2000);
}

void AgentDaemon::LeaseLoop() {
  // Waits in real time, decides by the Clock (a test moves a FakeClock). Never calls
  // the server: a call hung on a dead connection delays nothing here.
  constexpr auto kCheckEvery = std::chrono::milliseconds(200);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait_for(lock, kCheckEvery, [&] { return stopping_; });
    if (stopping_) return;
    const int64_t silent = options_.clock->MonotonicMs() - renewed_ms_;
    if (lease_expired_ || silent <= lease_ms_) continue;
    lease_expired_ = true;
    const std::string why = "lease expired: no contact with the server for " +
                            std::to_string(lease_ms_ / 1000) + " s";
    // Runs that waited for their job's earlier run never start: reported lost.
    std::vector<api::LaunchSpec> unstarted;
    for (auto& [job, l] : deferred_) unstarted.push_back(std::move(l));
    deferred_.clear();
    for (api::LaunchSpec& l : ready_) unstarted.push_back(std::move(l));
    ready_.clear();
    for (const api::LaunchSpec& l : unstarted) {
      launched_.emplace(l.job, l.start_time);  // a launch sent again is not started
      api::JobExit e;
      e.job = l.job;
      e.start_time = l.start_time;
      e.kind = api::ExitKind::kLost;
      e.message = why + " before it started";
      e.end_time = options_.clock->Now();
      unreported_.push_back(e);
    }
    std::vector<state::JobId> stop;
    for (const auto& [job, start] : live_) {
      lease_stopped_.emplace(job, start);
      stop.push_back(job);
    }
    std::string list;
    for (state::JobId id : stop) list += (list.empty() ? "" : ", ") + std::to_string(id);
    std::fprintf(stderr, "hachi agent: %s; stopping %zu job(s)%s%s\n", why.c_str(),
                 stop.size(), list.empty() ? "" : ": ", list.c_str());
    cv_.notify_all();
    lock.unlock();
    // Without mu_: a launcher may report the exit (OnExit) from within Cancel.
    for (state::JobId id : stop) {
      launcher_->Cancel(id, why);
      steps_->StopJob(id, kStepGrace);
    }
    lock.lock();
  }
}

}  // namespace hachi::agent
