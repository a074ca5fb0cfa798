// GPU-hours over a period for `hachi report` (docs/efficiency.md), Slurm's
// sreport for GPUs: per account, user, partition or node group, the GPU-hours jobs were
// allocated and the GPU-hours they used (allocated x their mean GPU utilisation), and
// the jobs that held the most idle GPU-hours.
//
// Counted from the job records alone: a run's GPUs (a share as its fraction of a GPU)
// times the part of [start, end) inside [from, to), a running job's run to `now`; its
// utilisation is the record's usage summary (the mean over its GPUs, live for a running
// job). A run never sampled is "not measured": its GPU-hours count as allocated and
// as not measured, never as used or idle, so the sums add up whatever was sampled.
// Only a job's last run is in its record: the earlier runs of a requeued job are not
// counted (docs/efficiency.md).
//
// Pure functions of their arguments; thread-compatible.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "state/records.h"

namespace hachi::report {

// kAccountUser: each account's users apart, named "ACCOUNT/USER" (sreport's
// AccountUtilizationByUser; a user name holds no '/'). kNodeGroup and kPool split a job
// over its nodes' groups (the GPU model; the [[pool]], docs/pools.md).
enum class ReportBy : uint8_t {
  kAccount,
  kUser,
  kAccountUser,
  kPartition,
  kNodeGroup,
  kPool
};
// "account", "user", "accountuser", "partition", "nodegroup", "pool"
std::string_view ReportByName(ReportBy by);
bool ParseReportBy(std::string_view text, ReportBy* out);

struct ReportQuery {
  Time from = 0;  // the period [from, to), seconds since the Unix epoch
  Time to = 0;
  ReportBy by = ReportBy::kAccount;
  int top = 10;  // how many of the idlest jobs to list; 0: none
};

// One account, user, partition or node group ("" when jobs had none: no account, a
// node no longer known), or the total.
struct ReportGroup {
  std::string name;
  int jobs = 0;                     // jobs with GPU time in the period
  double gpu_hours = 0;             // allocated
  double measured_gpu_hours = 0;    // of those, runs with GPU samples
  double used_gpu_hours = 0;        // measured x utilisation
  double unmeasured_gpu_hours = 0;  // gpu_hours - measured_gpu_hours
  // The pools' price of those GPU-hours: each node's part at its pool's
  // price_per_gpu_hour (docs/pools.md); 0 without prices.
  double cost = 0;
  // used / measured, %; -1 when nothing was measured.
  double Utilisation() const;
  double IdleGpuHours() const { return measured_gpu_hours - used_gpu_hours; }
  bool operator==(const ReportGroup&) const = default;
};

// A job among the idlest: its GPU-hours in the period and what it did with them.
struct ReportJob {
  state::JobId id = 0;
  std::string user, account, partition;
  double gpus = 0;       // GPUs held (shares as fractions)
  double gpu_hours = 0;  // allocated in the period
  double used_gpu_hours = 0;
  double idle_gpu_hours = 0;  // gpu_hours - used_gpu_hours (measured runs only)
  double gpu_util = -1;       // the run's mean GPU utilisation, %
  bool operator==(const ReportJob&) const = default;
};

struct GpuReport {
  Time from = 0, to = 0, now = 0;
  ReportBy by = ReportBy::kAccount;
  std::vector<ReportGroup> groups;  // most GPU-hours first, then by name
  ReportGroup total;                // name "total"; a job counted once
  std::vector<ReportJob> idlest;    // at most `top`, most idle GPU-hours first, then id
  bool operator==(const GpuReport&) const = default;
};

// Adds jobs one at a time, so that the server can report from its records under its
// lock without copying them (server/report.cc).
class GpuReportBuilder {
 public:
  // `node_groups`: node name -> its group (the GPU model its topology names, or its
  // pool), read for ReportBy::kNodeGroup and kPool; a node it lacks is group "".
  // `node_prices`: node name -> its pool's price per GPU-hour (null or missing: 0).
  // Not owned; both must outlive Add.
  GpuReportBuilder(const ReportQuery& q, Time now,
                   const std::map<std::string, std::string>* node_groups,
                   const std::map<std::string, double>* node_prices = nullptr);
  // `usage`: what the run did (the record's own summary, or a running job's so far).
  void Add(const state::JobRecord& job, const state::UsageSummary& usage);
  GpuReport Finish();

 private:
  struct Acc {
    int jobs = 0;
    // Milli-GPU-seconds: a share is thousandths of a GPU, so these sums are exact.
    int64_t alloc = 0, measured = 0;
    double used = 0;  // milli-GPU-seconds x utilisation / 100
    double cost = 0;  // milli-GPU-seconds x price per GPU-hour
  };
  void AddTo(Acc* acc, int64_t alloc, bool measured, double util, double cost);
  double PriceOf(const std::string& node) const;

  ReportQuery q_;
  Time now_;
  const std::map<std::string, std::string>* node_groups_;
  const std::map<std::string, double>* node_prices_;
  std::map<std::string, Acc> groups_;
  Acc total_;
  std::vector<ReportJob> jobs_;  // measured jobs with GPU time in the period
};

// The report of `jobs` (each with its own usage summary).
GpuReport ComputeGpuReport(const std::vector<state::JobRecord>& jobs,
                           const ReportQuery& q, Time now,
                           const std::map<std::string, std::string>& node_groups = {},
                           const std::map<std::string, double>& node_prices = {});

// As JSON (GET /api/v1/report, `hachi report --json`, docs/api.md): {"from", "to",
// "now", "by", "groups": [G...], "total": G, "idlest": [J...]}, G = {"name", "jobs",
// "gpu_hours", "used_gpu_hours", "measured_gpu_hours", "unmeasured_gpu_hours",
// "idle_gpu_hours", "utilisation", "cost"}, J = {"id", "user", "account", "partition",
// "gpus", "gpu_hours", "used_gpu_hours", "idle_gpu_hours", "gpu_util"}.
std::string GpuReportToJson(const GpuReport& r);
// The same back; kInvalidArgument naming the first missing or mistyped field.
Result<GpuReport> GpuReportFromJson(std::string_view text);

}  // namespace hachi::report
