#include "cli/sim_cmd.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/placement_cmd.h"
#include "config/cluster_config.h"
#include "config/values.h"
#include "core/strings.h"
#include "core/time_format.h"
#include "sched/lint.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace hachi::cli {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitBadInput = 2;

using Clock = std::chrono::steady_clock;

struct SimFlags {
  std::string trace;
  std::string format;  // empty: told from the header
  std::string policy = "hachi";
  std::string cluster = std::string(sim::kDefaultClusterSpec);
  std::string time_limits = "rounded";
  int backfill_depth = -1;  // -1: the scheduler's default
  int64_t max_jobs = 0;     // 0: all
  bool json = false;
  std::string config;               // cluster config file (docs/config.md); empty: none
  std::string start_time;           // UTC at trace time 0; empty: the default (StartTime)
  std::string resume_delay = "5m";  // how long a simulated burst node takes to come up
  // `--placement openb` (FGD's static placement protocol): a second mode of the same
  // command that reads a pod list instead of replaying time (docs/benchmarks.md).
  PlacementFlags placement;
};

// "12,345": long counts and seconds read better grouped.
std::string Grouped(double v) {
  char raw[32];
  std::snprintf(raw, sizeof raw, "%.0f", v);
  std::string s = raw, out;
  const size_t start = s[0] == '-' ? 1 : 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > start && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

// `setup`: an extra line after the first (the config), or empty.
std::string RenderText(const sim::SimMetrics& m, int64_t trace_jobs,
                       const std::string& setup) {
  std::string out;
  char line[256];
  auto add = [&](const char* fmt, auto... args) {
    std::snprintf(line, sizeof line, fmt, args...);
    out += line;
  };
  add("policy %s on %s (%d GPUs), time limits %s: %s of %s jobs finished",
      m.policy.c_str(), m.cluster.c_str(), m.cluster_gpus, m.time_limits.c_str(),
      Grouped(m.jobs).c_str(), Grouped(trace_jobs).c_str());
  out += m.rejected > 0 ? ", " + Grouped(m.rejected) + " rejected\n" : "\n";
  out += setup;
  add("\n%-22s %12s %12s %12s %12s\n", "seconds", "mean", "p50", "p95", "p99");
  add("%-22s %12s %12s %12s %12s\n", "wait", Grouped(m.wait_mean_s).c_str(),
      Grouped(m.wait_p50_s).c_str(), Grouped(m.wait_p95_s).c_str(),
      Grouped(m.wait_p99_s).c_str());
  add("%-22s %12s\n", "job completion time", Grouped(m.jct_mean_s).c_str());
  add("\n%-22s %12s %12s %12s\n", "wait by GPUs asked", "jobs", "p50", "p95");
  for (const std::string& b : sim::GpuBuckets()) {
    auto jobs = m.jobs_by_gpus.find(b);
    if (jobs == m.jobs_by_gpus.end()) continue;
    static const std::map<std::string, std::string> kLabels = {{"1", "1 GPU"},
                                                               {"2", "2 GPUs"},
                                                               {"4", "3-4 GPUs"},
                                                               {"8", "5-8 GPUs"},
                                                               {">8", ">8 GPUs (gangs)"}};
    add("%-22s %12s %12s %12s\n", kLabels.at(b).c_str(),
        Grouped(static_cast<double>(jobs->second)).c_str(),
        Grouped(m.wait_p50_s_by_gpus.at(b)).c_str(),
        Grouped(m.wait_p95_s_by_gpus.at(b)).c_str());
  }
  add("\nmakespan %s (%s s), GPU utilisation %.1f %%\n",
      FormatDuration(static_cast<Duration>(m.makespan_s)).c_str(),
      Grouped(m.makespan_s).c_str(), 100 * m.gpu_utilization);
  add("scheduler: %s cycles, %.3f ms p50, %.3f ms p99, %.3f ms max; %s backfilled "
      "starts\n",
      Grouped(static_cast<double>(m.cycles)).c_str(), m.cycle_ms_p50, m.cycle_ms_p99,
      m.cycle_ms_max, Grouped(static_cast<double>(m.backfilled)).c_str());
  if (m.preemptions > 0) {
    add("preemption: %s preempted, %s requeued, %s cancelled, %.1f GPU-hours lost\n",
        Grouped(static_cast<double>(m.preemptions)).c_str(),
        Grouped(static_cast<double>(m.requeues)).c_str(),
        Grouped(static_cast<double>(m.cancelled)).c_str(), m.lost_gpu_hours);
  }
  // Pools: what each was powered for and what that cost, over the run's span.
  if (!m.pools.empty()) {
    add("\n%-12s %-6s %6s %9s %9s %12s %12s %8s %12s\n", "pool", "kind", "nodes",
        "resumes", "max on", "GPU-h on", "GPU-h busy", "busy %", "cost");
    double total = 0;
    for (const sim::PoolUse& p : m.pools) {
      const double on = p.powered_gpu_seconds / 3600, busy = p.busy_gpu_seconds / 3600;
      add("%-12s %-6s %6d %9s %9d %12s %12s %7.1f%% %12s\n", p.name.c_str(),
          p.burst ? "burst" : "fixed", p.nodes,
          Grouped(static_cast<double>(p.resumes)).c_str(), p.max_powered,
          Grouped(on).c_str(), Grouped(busy).c_str(), on > 0 ? 100 * busy / on : 0.0,
          Grouped(p.cost()).c_str());
      total += p.cost();
    }
    add("cost %s over %s; %s per 30 days\n", Grouped(total).c_str(),
        FormatDuration(static_cast<Duration>(m.span_s)).c_str(),
        Grouped(m.span_s > 0 ? total * 30 * 86400 / m.span_s : 0).c_str());
  }
  add("wall %.2f s, of which %.2f s in the scheduler (%.3f ms a cycle on average)\n",
      m.wall_s, m.sched_s, m.cycle_ms_mean);
  for (const std::string& r : m.rejections) out += "rejected: " + r + "\n";
  return out;
}

// `config`: the config file or empty; `start_time`: the clock offset (with a config).
std::string RenderJson(const sim::SimMetrics& m, const std::string& trace,
                       const std::string& config, Time start_time) {
  nlohmann::json j;
  j["trace"] = trace;
  if (!config.empty()) {
    j["config"] = config;
    j["start_time"] = start_time;
  }
  j["policy"] = m.policy;
  j["cluster"] = m.cluster;
  j["cluster_gpus"] = m.cluster_gpus;
  j["time_limits"] = m.time_limits;
  j["jobs"] = m.jobs;
  j["rejected"] = m.rejected;
  j["wait_mean_s"] = m.wait_mean_s;
  j["wait_p50_s"] = m.wait_p50_s;
  j["wait_p95_s"] = m.wait_p95_s;
  j["wait_p99_s"] = m.wait_p99_s;
  j["jct_mean_s"] = m.jct_mean_s;
  j["makespan_s"] = m.makespan_s;
  j["gpu_utilization"] = m.gpu_utilization;
  // Every bucket is always present (a stable contract); null when no job asked for it.
  for (const std::string& b : sim::GpuBuckets()) {
    const bool any = m.jobs_by_gpus.count(b) > 0;
    j["wait_p50_s_by_gpus"][b] =
        any ? nlohmann::json(m.wait_p50_s_by_gpus.at(b)) : nullptr;
    j["wait_p95_s_by_gpus"][b] =
        any ? nlohmann::json(m.wait_p95_s_by_gpus.at(b)) : nullptr;
    j["jobs_by_gpus"][b] = any ? m.jobs_by_gpus.at(b) : 0;
  }
  j["backfilled"] = m.backfilled;
  if (m.preemptions > 0) {  // only when preemption is configured and happened
    j["preemptions"] = m.preemptions;
    j["requeues"] = m.requeues;
    j["cancelled"] = m.cancelled;
    j["lost_gpu_hours"] = m.lost_gpu_hours;
  }
  j["cycles"] = m.cycles;
  j["cycle_ms_p50"] = m.cycle_ms_p50;
  j["cycle_ms_p99"] = m.cycle_ms_p99;
  j["cycle_ms_max"] = m.cycle_ms_max;
  j["cycle_ms_mean"] = m.cycle_ms_mean;
  j["sched_s"] = m.sched_s;
  j["wall_s"] = m.wall_s;
  j["rejections"] = m.rejections;
  if (!m.pools.empty()) {
    j["span_s"] = m.span_s;
    for (const sim::PoolUse& p : m.pools) {
      j["pools"].push_back({{"name", p.name},
                            {"kind", p.burst ? "burst" : "fixed"},
                            {"nodes", p.nodes},
                            {"gpus", p.gpus},
                            {"resumes", p.resumes},
                            {"suspends", p.suspends},
                            {"max_powered", p.max_powered},
                            {"powered_gpu_hours", p.powered_gpu_seconds / 3600},
                            {"busy_gpu_hours", p.busy_gpu_seconds / 3600},
                            {"price_per_gpu_hour", p.price_per_gpu_hour},
                            {"cost", p.cost()}});
    }
  }
  return j.dump(2) + "\n";
}

// The progress line: rewritten in place a few times a second on a terminal; on a pipe
// or file, one line per 10 % and only for long traces (short runs stay quiet).
class Progress {
 public:
  explicit Progress(int64_t jobs)
      : tty_(isatty(STDERR_FILENO) == 1), enabled_(tty_ || jobs >= 10000) {}

  void Update(const sim::SimProgress& p) {
    if (!enabled_ || p.total == 0) return;
    const int64_t percent = p.finished * 100 / p.total;
    if (tty_) {
      const Clock::time_point now = Clock::now();
      if (now - started_ < std::chrono::milliseconds(500) && percent < 100) return;
      if (now - last_ < std::chrono::milliseconds(250) && percent < 100) return;
      last_ = now;
      std::fprintf(stderr, "\rhachi sim: %3lld%% (%lld/%lld jobs, simulated %s)  ",
                   static_cast<long long>(percent), static_cast<long long>(p.finished),
                   static_cast<long long>(p.total), FormatDuration(p.now).c_str());
      shown_ = true;
    } else if (percent / 10 > last_decile_) {
      last_decile_ = percent / 10;
      std::fprintf(stderr, "hachi sim: %lld%% (%lld/%lld jobs, simulated %s)\n",
                   static_cast<long long>(percent), static_cast<long long>(p.finished),
                   static_cast<long long>(p.total), FormatDuration(p.now).c_str());
    }
  }

  void Done() {
    if (shown_) std::fputs("\n", stderr);
  }

 private:
  const bool tty_;
  const bool enabled_;
  const Clock::time_point started_ = Clock::now();
  Clock::time_point last_{};
  int64_t last_decile_ = 0;
  bool shown_ = false;
};

// --start-time: whole seconds since the Unix epoch, or "YYYY-MM-DDTHH:MM:SS[Z]"
// (UTC; a space may replace the T).
Result<Time> ParseStartTime(std::string_view text) {
  std::string_view t = Trim(text);
  if (std::optional<long long> secs = ParseInt(t)) return *secs;
  if (!t.empty() && t.back() == 'Z') t.remove_suffix(1);
  Result<int64_t> parsed = sim::ParseDateTime(t);
  if (!parsed.ok()) {
    return InvalidArgument("--start-time: '" + std::string(text) +
                           "' is neither seconds since the epoch nor "
                           "YYYY-MM-DDTHH:MM:SSZ");
  }
  return *parsed;
}

// The default --start-time: for a Philly trace, its earliest timestamp (its rows are
// wall-clock times, not sorted; the readers keep only differences); else 0.
Result<Time> DefaultStart(const std::string& path, const sim::TraceFormat* format) {
  std::string error;
  std::optional<std::string> text = ReadFile(path, &error);
  if (!text) return NotFound(error);
  Result<sim::TraceFormat> f = format ? *format : sim::DetectTraceFormat(*text, path);
  if (!f.ok()) return f.status();
  if (*f != sim::TraceFormat::kPhilly) return Time{0};
  std::vector<std::string_view> lines = SplitLines(*text);
  Time first = kNever;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::string_view line = Trim(lines[i]);
    if (line.empty()) continue;
    Result<int64_t> t = sim::ParseDateTime(line.substr(0, line.find(',')));
    if (t.ok()) first = std::min(first, *t);
  }
  return first == kNever ? 0 : first;
}

void PrintError(const Status& s) {
  std::fprintf(stderr, "hachi sim: %s\n", s.ToString().c_str());
}

int RunSim(const SimFlags& f) {
  if (!f.placement.trace.empty()) {
    PlacementFlags p = f.placement;
    p.policy = f.policy;
    p.json = f.json;
    return RunPlacement(p);
  }
  if (f.trace.empty()) {
    PrintError(InvalidArgument("--trace is required (or --placement openb)"));
    return kExitBadInput;
  }
  const Clock::time_point t0 = Clock::now();
  sim::RunConfig config;
  config.cluster = f.cluster;
  config.sched.policy = f.policy;
  if (f.backfill_depth >= 0) config.sched.backfill_depth = f.backfill_depth;
  Result<sim::TimeLimitModel> limits = sim::ParseTimeLimitModel(f.time_limits);
  if (!limits.ok()) {
    PrintError(InvalidArgument("--time-limits: " + limits.status().message()));
    return kExitBadInput;
  }
  config.sim.time_limits = *limits;

  std::unique_ptr<sim::TraceFormat> format;
  if (!f.format.empty()) {
    Result<sim::TraceFormat> parsed = sim::ParseTraceFormat(f.format);
    if (!parsed.ok()) {
      PrintError(InvalidArgument("--format: " + parsed.status().message()));
      return kExitBadInput;
    }
    format = std::make_unique<sim::TraceFormat>(*parsed);
  }
  Result<std::vector<sim::TraceJob>> trace = sim::ReadTrace(f.trace, format.get());
  if (!trace.ok()) {
    PrintError(trace.status());
    return kExitBadInput;
  }
  if (f.max_jobs > 0 && static_cast<int64_t>(trace->size()) > f.max_jobs) {
    trace->resize(static_cast<size_t>(f.max_jobs));  // the first N by submit time
  }
  // The cluster config: partitions, limits, shares, weights, windows (docs/config.md).
  // Loaded and checked before the replay; applied to the cluster RunSimulation builds.
  std::shared_ptr<const config::ClusterConfig> cluster_config;
  if (!f.config.empty()) {
    Result<config::ClusterConfig> c = config::LoadClusterConfig(f.config);
    if (!c.ok()) {
      PrintError(c.status());
      return kExitBadInput;
    }
    cluster_config = std::make_shared<const config::ClusterConfig>(std::move(*c));
    config.sim.fairshare_half_life =
        cluster_config->fairshare_half_life;  // as the server
    // Rows that name no partition: the config's account routing, else the first
    // partition the account may use (sched::ValidateRequest).
    const auto& routes = cluster_config->sim.account_partitions;
    for (sim::TraceJob& j : *trace) {
      if (!j.partition.empty()) continue;
      if (auto it = routes.find(j.account); it != routes.end()) j.partition = it->second;
    }
  }
  // Policy warnings (a partition mixing interconnect classes or GPU models) go to
  // stderr, so --json output stays one object.
  if (cluster_config != nullptr && !cluster_config->pools.empty()) {
    config.pools = [cluster_config](const sched::ClusterState& state) {
      return config::PowerPools(*cluster_config, state);
    };
    Result<Duration> delay = config::ParseDuration(f.resume_delay);
    if (!delay.ok() || *delay <= 0) {
      PrintError(InvalidArgument("--resume-delay: '" + f.resume_delay +
                                 "' is not a duration longer than 0s (e.g. 5m)"));
      return kExitBadInput;
    }
    config.sim.resume_delay = *delay;
  }
  config.configure = [cluster_config](sched::ClusterState* state) {
    if (cluster_config != nullptr) {
      HACHI_RETURN_IF_ERROR(config::ApplyClusterConfig(*cluster_config, state));
    }
    for (const sched::PolicyWarning& w : sched::LintPartitions(*state)) {
      std::fprintf(stderr, "hachi sim: warning: %s\n", w.message.c_str());
    }
    return Status::Ok();
  };
  // Time windows need the wall-clock time of the trace start.
  if (!f.start_time.empty()) {
    Result<Time> start = ParseStartTime(f.start_time);
    if (!start.ok()) {
      PrintError(start.status());
      return kExitBadInput;
    }
    config.sim.clock_offset = *start;
  } else if (cluster_config != nullptr) {  // without a config there are no windows
    Result<Time> start = DefaultStart(f.trace, format.get());
    if (!start.ok()) {
      PrintError(start.status());
      return kExitBadInput;
    }
    config.sim.clock_offset = *start;
  }

  Progress progress(static_cast<int64_t>(trace->size()));
  config.sim.progress = [&progress](const sim::SimProgress& p) { progress.Update(p); };
  Result<sim::SimMetrics> m = sim::RunSimulation(*trace, config);
  progress.Done();
  if (!m.ok()) {
    PrintError(m.status());
    // Bad flags, cluster specs or traces are the user's to fix; a stuck or inconsistent
    // run is the scheduler's.
    const StatusCode c = m.status().code();
    return c == StatusCode::kInvalidArgument || c == StatusCode::kNotFound ? kExitBadInput
                                                                           : kExitFailed;
  }
  m->wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::string setup = f.config.empty()
                                ? ""
                                : "config " + f.config + ", trace time 0 is " +
                                      FormatUtcReadable(config.sim.clock_offset) + "\n";
  std::string out = f.json ? RenderJson(*m, f.trace, f.config, config.sim.clock_offset)
                           : RenderText(*m, static_cast<int64_t>(trace->size()), setup);
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

}  // namespace

void AddSimCommands(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<SimFlags>();
  CLI::App* cmd = app.add_subcommand(
      "sim",
      "replay a job trace on a simulated cluster with the real scheduler; report waits, "
      "completion times, GPU utilisation and cycle times (docs/sim.md)");
  cmd->add_option(
      "--trace", flags->trace,
      "job trace: the Philly CSV (timestamp,duration,num_gpus,gpu_time,cluster) "
      "or a generic CSV (submit_s,duration_s,gpus[,user,account,partition,"
      "time_limit_s]); required unless --placement");
  cmd->add_option("--format", flags->format,
                  "philly or csv (default: told from the header)");
  cmd->add_option("--policy", flags->policy,
                  "fifo, easy or hachi (default); with --placement: random, bestfit, fgd "
                  "or hachi (default)");
  cmd->add_option("--placement", flags->placement.trace,
                  "openb: FGD's static placement benchmark on the Alibaba openb trace "
                  "instead of a replay (docs/benchmarks.md)");
  cmd->add_option(
      "--pods", flags->placement.pods,
      "with --placement: the pod list openb_pod_list_NAME.csv (default default)");
  cmd->add_option("--seed", flags->placement.seed,
                  "with --placement: the seed (default 42)");
  cmd->add_flag("--curve", flags->placement.curve,
                "with --placement: print the whole allocation curve");
  cmd->add_option("--cluster", flags->cluster,
                  "COUNTxGPUS:PRESET[,...] (default 96x8:hgx-h100) or philly (the Philly "
                  "machine list: 231x8 + 321x2 GPUs)");
  cmd->add_option(
      "--time-limits", flags->time_limits,
      "user time limits: rounded (default: the run time rounded up to 15m, "
      "30m, 1h, 2h, 4h, 8h, 12h, 1d, 2d, 3d, 7d, 14d, 30d, 60d, 90d) or exact");
  cmd->add_option("--backfill-depth", flags->backfill_depth,
                  "reservations per cycle for the hachi policy (default 16)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--max-jobs", flags->max_jobs, "replay only the first N jobs")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option(
      "--config", flags->config,
      "cluster config file (TOML: partitions, QoS, quotas, shares, priority "
      "weights, time windows; docs/config.md) applied to the --cluster nodes");
  cmd->add_option("--start-time", flags->start_time,
                  "UTC time of the trace start, for time windows: seconds since the "
                  "epoch or 2017-10-03T00:00:00Z (default: a Philly trace's first "
                  "timestamp, else 0)");
  cmd->add_option("--resume-delay", flags->resume_delay,
                  "with [[pool]] tables in --config: how long a burst node takes from "
                  "its resume to taking jobs (default 5m)");
  cmd->add_flag("--json", flags->json, "print one JSON object");
  cmd->callback([flags, exit_code] { *exit_code = RunSim(*flags); });
}

}  // namespace hachi::cli
