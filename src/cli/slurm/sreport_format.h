// sreport under Slurm's name (docs/slurm.md "sreport"): `cluster
// AccountUtilizationByUser` and `user TopUsage` in Slurm 22.05's layout (the banner, the
// columns, Used's width from its largest value), from the server's GPU-hours (GET
// /report?by=accountuser).
//
// Hachi accounts GPU time, the resource its clusters share: the figures are
// gres/gpu's (as Slurm's `-T gres/gpu`, its TRES Name column included), in minutes,
// hours or seconds (-t). `cluster Utilization` and the percent forms need the cluster's
// size over the period, which Hachi keeps no history of: refused, naming `hachi stats`.
//
// Pure functions of their arguments and TZ; thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cli/slurm/print_fields.h"
#include "core/status.h"
#include "core/time.h"
#include "report/gpu_report.h"

namespace hachi::cli::slurm {

enum class SreportReport : uint8_t { kAccountUtilizationByUser, kUserTopUsage };
enum class SreportUnit : uint8_t { kMinutes, kHours, kSeconds };

struct SreportOptions {
  bool help = false;
  SreportReport report = SreportReport::kAccountUtilizationByUser;
  Time start = 0, end = 0;  // [start, end), on the hour
  std::vector<std::string> accounts, users;
  int top = 10;        // TopCount=
  bool group = false;  // Group: a user's accounts on one line
  SreportUnit unit = SreportUnit::kMinutes;
  std::string format;  // Format=
  FieldOutput out;
  std::string server;
};
// `now` places the default period (yesterday 00:00 to today 00:00) and relative times.
Result<SreportOptions> ParseSreportArgs(const std::vector<std::string>& args, Time now);

// `proper_name`: a login's full name (the GECOS field up to its first ','), "" if none.
using ProperName = std::function<std::string(const std::string& login)>;
// `r`: the GPU-hours of [o.start, o.end) by account and user (ReportBy::kAccountUser).
Result<std::string> RenderSreport(const SreportOptions& o, const report::GpuReport& r,
                                  const ProperName& proper_name);

}  // namespace hachi::cli::slurm
