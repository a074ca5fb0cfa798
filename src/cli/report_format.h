// `hachi report` (docs/efficiency.md): the server's GPU-hours report
// (report/gpu_report.h) as sreport prints its tables — a banner naming the period, a
// right-aligned table per group with a TOTAL line, then the jobs that held the most
// idle GPU-hours — or as CSV. Pure: a report in, text out (times in the local zone).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "report/gpu_report.h"

namespace hachi::cli {

std::string FormatReport(const report::GpuReport& r);

// A burst pool's powered time over the report's period (GET /pools, docs/pools.md).
struct PoolPowered {
  std::string name;
  int nodes = 0;
  int powered = 0;  // now
  double powered_gpu_hours = 0;
  double cost = 0;
};
// `hachi report --by pool`'s second table: what the burst pools were powered (billed
// from each resume until the node is off, used or not) and cost; "" without any.
std::string FormatPoolsPowered(const std::vector<PoolPowered>& pools);

// --from/--to as sacct's -S/-E take them ("now-7days", "2026-11-01",
// "2026-11-01T08:00", "11/01", "midnight"; cli/slurm/sacct_format.h), or Unix seconds.
Result<Time> ParseReportTime(std::string_view text, Time now);

// Two CSV tables (RFC 4180), the second after an empty line and only when it has rows:
//   account,jobs,gpu_hours,used_gpu_hours,utilisation,idle_gpu_hours,unmeasured_gpu_hours
//   (the first column named as the grouping; a last row "TOTAL"), then
//   job_id,user,account,partition,gpus,gpu_hours,used_gpu_hours,idle_gpu_hours,gpu_util.
// Utilisation is empty where nothing was measured.
std::string FormatReportCsv(const report::GpuReport& r);

}  // namespace hachi::cli
