#include "server/history.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

namespace hachi::server {
namespace {

double Median(std::vector<double>& v) {
  if (v.empty()) return -1;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  if (v.size() % 2 == 1) return v[mid];
  const double upper = v[mid];
  const double lower =
      *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

}  // namespace

HistorySample Summarize(Time now, const std::vector<JobBrief>& active,
                        const std::vector<JobBrief>& ended, const CountedStarts& counted,
                        const std::vector<state::NodeStatus>& nodes,
                        const std::vector<std::string>& partitions) {
  HistorySample s;
  s.at = now;
  for (const std::string& p : partitions) s.partitions[p];
  std::map<std::string, std::vector<double>> pending_waits, started_waits;
  auto started = [&](const JobBrief& j) {
    if (j.start_time == 0) return;  // ended without running (cancelled while pending)
    if (auto c = counted.find(j.id); c != counted.end() && c->second == j.start_time)
      return;
    ++s.partitions[j.partition].started;
    started_waits[j.partition].push_back(
        static_cast<double>(std::max<Time>(0, j.start_time - j.submit_time)));
  };
  for (const JobBrief& j : active) {
    PartitionSample& p = s.partitions[j.partition];
    if (j.state == state::JobState::kPending) {
      if (j.held) continue;  // waiting by choice, not for the scheduler
      ++p.pending;
      pending_waits[j.partition].push_back(
          static_cast<double>(std::max<Time>(0, now - j.submit_time)));
    } else if (j.state == state::JobState::kRunning) {
      ++p.running;
      started(j);
    }
  }
  for (const JobBrief& j : ended) started(j);
  for (auto& [name, waits] : pending_waits)
    s.partitions[name].median_wait_pending = Median(waits);
  for (auto& [name, waits] : started_waits)
    s.partitions[name].median_wait_started = Median(waits);

  for (const state::NodeStatus& n : nodes) {
    if (n.record.state == state::NodeState::kDown) continue;  // its GPUs serve nobody
    for (int g = 0; g < n.gpus; ++g) {
      if (n.record.unhealthy.contains(g)) continue;
      ++s.gpus_healthy;
      const bool whole = g < static_cast<int>(n.gpu_jobs.size()) && n.gpu_jobs[g] != 0;
      const bool shared =
          g < static_cast<int>(n.gpu_share_milli.size()) && n.gpu_share_milli[g] > 0;
      if (whole || shared) ++s.gpus_allocated;
    }
  }
  return s;
}

std::string HistoryToJson(const std::vector<HistorySample>& samples, int interval_s) {
  using nlohmann::json;
  auto seconds = [](double v) { return v < 0 ? json(nullptr) : json(v); };
  json out = json::array();
  for (const HistorySample& s : samples) {
    json parts = json::object();
    for (const auto& [name, p] : s.partitions) {
      parts[name] = {{"pending", p.pending},
                     {"running", p.running},
                     {"started", p.started},
                     {"median_wait_pending_s", seconds(p.median_wait_pending)},
                     {"median_wait_started_s", seconds(p.median_wait_started)}};
    }
    out.push_back(
        {{"at", s.at},
         {"gpus_healthy", s.gpus_healthy},
         {"gpus_allocated", s.gpus_allocated},
         {"utilisation", s.gpus_healthy == 0
                             ? 0.0
                             : static_cast<double>(s.gpus_allocated) / s.gpus_healthy},
         {"partitions", parts}});
  }
  return json{{"interval_s", interval_s}, {"samples", out}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

HistorySampler::HistorySampler(Controller* controller, Options options)
    : controller_(controller), options_(options) {}

HistorySampler::~HistorySampler() { Stop(); }

void HistorySampler::Start() {
  Sample(controller_->clock().Now());
  thread_ = std::thread([this] { Loop(); });
}

void HistorySampler::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void HistorySampler::Loop() {
  // The interval is waited in real time; what a sample says reads the Controller's
  // Clock.
  MutexLock lock(&mu_);
  auto next = CondVar::Clock::now() + std::chrono::seconds(options_.interval_s);
  while (!stopping_) {
    // A spurious wake-up must not take an early sample: wait for the deadline itself.
    if (cv_.WaitUntil(next) || stopping_) continue;
    lock.Unlock();
    Sample(controller_->clock().Now());
    lock.Lock();
    next = CondVar::Clock::now() + std::chrono::seconds(options_.interval_s);
  }
}

void HistorySampler::Sample(Time now) {
  MutexLock one_at_a_time(&sample_mu_);
  const std::vector<JobBrief> active = controller_->job_views().ActiveJobBriefs();
  // The jobs pending at the last sample that are no longer active ran (or were
  // cancelled) in between: their start counts too, or a job shorter than the interval
  // would never show in the started median. Few per interval, so a lookup each.
  std::unordered_set<state::JobId> active_ids;
  active_ids.reserve(active.size());
  for (const JobBrief& j : active) active_ids.insert(j.id);
  std::vector<JobBrief> ended;
  for (state::JobId id : pending_before_) {
    if (active_ids.count(id) != 0) continue;
    Result<state::JobRecord> r = controller_->job_views().Job(id);
    if (!r.ok()) continue;
    ended.push_back(JobBrief{id, r->req.partition, r->state, r->held, r->submit_time,
                             r->start_time, r->req.TotalGpus()});
  }
  std::vector<std::string> partitions;
  for (const sched::Partition& p : controller_->cluster_views().Partitions())
    partitions.push_back(p.name);
  if (first_) {
    // The first sample counts the starts of one interval, not every run since the server
    // (or the job) began.
    for (const JobBrief& j : active) {
      if (j.state == state::JobState::kRunning &&
          j.start_time < now - options_.interval_s) {
        counted_[j.id] = j.start_time;
      }
    }
    first_ = false;
  }
  HistorySample s = Summarize(now, active, ended, counted_,
                              controller_->cluster_views().Nodes(), partitions);

  pending_before_.clear();
  counted_.clear();
  for (const JobBrief& j : active) {
    if (j.state == state::JobState::kPending) pending_before_.insert(j.id);
    if (j.state == state::JobState::kRunning) counted_[j.id] = j.start_time;
  }
  MutexLock lock(&mu_);
  ring_.push_back(std::move(s));
  while (ring_.size() > options_.capacity) ring_.pop_front();
}

std::vector<HistorySample> HistorySampler::Samples(Time since) const {
  MutexLock lock(&mu_);
  std::vector<HistorySample> out;
  for (const HistorySample& s : ring_) {
    if (s.at > since) out.push_back(s);
  }
  return out;
}

}  // namespace hachi::server
