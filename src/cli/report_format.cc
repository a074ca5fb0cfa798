#include "cli/report_format.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <vector>

#include "cli/slurm/sacct_format.h"
#include "cli/slurm_format.h"
#include "core/strings.h"
#include "core/time_format.h"

namespace hachi::cli {
namespace {

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}
std::string Percent(double v) { return v < 0 ? "" : Fixed(v, 1); }

// The column title of the grouping, as sreport names its columns.
std::string GroupTitle(report::ReportBy by) {
  switch (by) {
    case report::ReportBy::kAccount:
      return "Account";
    case report::ReportBy::kUser:
      return "Login";
    case report::ReportBy::kAccountUser:
      return "Account/Login";
    case report::ReportBy::kPartition:
      return "Partition";
    case report::ReportBy::kNodeGroup:
      return "NodeGroup";
    case report::ReportBy::kPool:
      return "Pool";
  }
  return "Account";
}

// sreport's tables: each column right-aligned to its width and followed by a space, a
// line of dashes under the titles.
class SreportTable {
 public:
  explicit SreportTable(std::vector<std::string> titles) {
    rows_.push_back(std::move(titles));
  }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string Render() const {
    std::vector<size_t> w(rows_[0].size(), 0);
    for (const auto& row : rows_) {
      for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
    }
    auto line = [&](const std::vector<std::string>& row) {
      std::string s;
      for (size_t i = 0; i < row.size(); ++i) {
        s += std::string(w[i] - row[i].size(), ' ') + row[i] + " ";
      }
      return s + "\n";
    };
    std::string out = line(rows_[0]);
    for (size_t i = 0; i < w.size(); ++i) out += std::string(w[i], '-') + " ";
    out += "\n";
    for (size_t i = 1; i < rows_.size(); ++i) out += line(rows_[i]);
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string Name(const std::string& name, report::ReportBy by) {
  if (!name.empty()) return name;
  return by == report::ReportBy::kNodeGroup ? "(unknown)" : "(none)";
}

std::string Csv(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

Result<Time> ParseReportTime(std::string_view text, Time now) {
  const std::string t(Trim(text));
  if (!t.empty() && t.find_first_not_of("0123456789") == std::string::npos) {
    std::optional<long long> secs = ParseInt(t);
    if (secs) return static_cast<Time>(*secs);
  }
  return slurm::ParseSacctTime(t, now);
}

std::string FormatReport(const report::GpuReport& r) {
  const std::string rule(80, '-');
  std::string out = rule + "\n" + "GPU usage by " +
                    std::string(report::ReportByName(r.by)) + " " +
                    FormatSlurmLocal(r.from) + " - " + FormatSlurmLocal(r.to - 1) + " (" +
                    std::to_string(r.to - r.from) + " secs)\n" +
                    "Usage reported in GPU hours (Used: allocated x mean GPU "
                    "utilisation; NotMeasured: never sampled)\n" +
                    rule + "\n";
  // Cost: with pools that have prices (docs/pools.md), the GPU-hours at their price.
  const bool priced = r.total.cost > 0;
  std::vector<std::string> titles = {GroupTitle(r.by), "Jobs", "Allocated",  "Used",
                                     "Util%",          "Idle", "NotMeasured"};
  if (priced) titles.push_back("Cost");
  SreportTable t(titles);
  auto row = [&](const report::ReportGroup& g, const std::string& name) {
    std::vector<std::string> cells = {
        name,
        std::to_string(g.jobs),
        Fixed(g.gpu_hours, 2),
        Fixed(g.used_gpu_hours, 2),
        g.Utilisation() < 0 ? "-" : Percent(g.Utilisation()),
        Fixed(g.IdleGpuHours(), 2),
        Fixed(g.unmeasured_gpu_hours, 2)};
    if (priced) cells.push_back(Fixed(g.cost, 2));
    t.Add(cells);
  };
  for (const report::ReportGroup& g : r.groups) row(g, Name(g.name, r.by));
  row(r.total, "TOTAL");
  out += t.Render();
  if (r.idlest.empty()) return out;
  out += "\nJobs that held the most idle GPU hours\n";
  SreportTable jobs({"JobID", "User", "Account", "Partition", "GPUs", "Allocated", "Used",
                     "Util%", "Idle"});
  for (const report::ReportJob& j : r.idlest) {
    jobs.Add({std::to_string(j.id), j.user, j.account.empty() ? "(none)" : j.account,
              j.partition, Fixed(j.gpus, j.gpus == static_cast<int>(j.gpus) ? 0 : 2),
              Fixed(j.gpu_hours, 2), Fixed(j.used_gpu_hours, 2), Percent(j.gpu_util),
              Fixed(j.idle_gpu_hours, 2)});
  }
  return out + jobs.Render();
}

std::string FormatPoolsPowered(const std::vector<PoolPowered>& pools) {
  if (pools.empty()) return "";
  SreportTable t({"Pool", "Nodes", "PoweredNow", "PoweredGPUh", "Cost"});
  PoolPowered total{"TOTAL"};
  for (const PoolPowered& p : pools) {
    t.Add({p.name, std::to_string(p.nodes), std::to_string(p.powered),
           Fixed(p.powered_gpu_hours, 2), Fixed(p.cost, 2)});
    total.nodes += p.nodes;
    total.powered += p.powered;
    total.powered_gpu_hours += p.powered_gpu_hours;
    total.cost += p.cost;
  }
  t.Add({total.name, std::to_string(total.nodes), std::to_string(total.powered),
         Fixed(total.powered_gpu_hours, 2), Fixed(total.cost, 2)});
  return "\nBurst pools powered over the period (billed from each resume until the node "
         "is off, used or not)\n" +
         t.Render();
}

std::string FormatReportCsv(const report::GpuReport& r) {
  const bool priced = r.total.cost > 0;
  std::string out = std::string(report::ReportByName(r.by)) +
                    ",jobs,gpu_hours,used_gpu_hours,utilisation,idle_gpu_hours,"
                    "unmeasured_gpu_hours" +
                    (priced ? ",cost\n" : "\n");
  auto row = [&](const report::ReportGroup& g, const std::string& name) {
    out += Csv(name) + "," + std::to_string(g.jobs) + "," + Fixed(g.gpu_hours, 4) + "," +
           Fixed(g.used_gpu_hours, 4) + "," + Percent(g.Utilisation()) + "," +
           Fixed(g.IdleGpuHours(), 4) + "," + Fixed(g.unmeasured_gpu_hours, 4) +
           (priced ? "," + Fixed(g.cost, 4) : "") + "\n";
  };
  for (const report::ReportGroup& g : r.groups) row(g, g.name);
  row(r.total, "TOTAL");
  if (r.idlest.empty()) return out;
  out +=
      "\njob_id,user,account,partition,gpus,gpu_hours,used_gpu_hours,idle_gpu_hours,"
      "gpu_util\n";
  for (const report::ReportJob& j : r.idlest) {
    out += std::to_string(j.id) + "," + Csv(j.user) + "," + Csv(j.account) + "," +
           Csv(j.partition) + "," + Fixed(j.gpus, 3) + "," + Fixed(j.gpu_hours, 4) + "," +
           Fixed(j.used_gpu_hours, 4) + "," + Fixed(j.idle_gpu_hours, 4) + "," +
           Percent(j.gpu_util) + "\n";
  }
  return out;
}

}  // namespace hachi::cli
