#include "cli/eff_format.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "api/record_json_nlohmann.h"
#include "cli/table.h"
#include "state/usage.h"
#include "state/usage_json.h"

namespace hachi::cli {
namespace {

using json = nlohmann::json;

// Slurm's elapsed form: "01:02:03", "2-01:02:03".
std::string Clock(int64_t s) {
  if (s < 0) s = 0;
  char buf[48];
  if (s >= 86400) {
    std::snprintf(buf, sizeof buf, "%lld-%02lld:%02lld:%02lld",
                  static_cast<long long>(s / 86400),
                  static_cast<long long>(s / 3600 % 24),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld",
                  static_cast<long long>(s / 3600), static_cast<long long>(s / 60 % 60),
                  static_cast<long long>(s % 60));
  }
  return buf;
}

std::string Fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// seff's memory figures: "11.20 GB" (GiB, as seff computes them).
std::string SeffMem(int64_t mib) {
  if (mib < 1024) return Fixed(static_cast<double>(mib), 2) + " MB";
  return Fixed(static_cast<double>(mib) / 1024.0, 2) + " GB";
}

std::string Gib(int64_t mib) {
  return Fixed(static_cast<double>(mib) / 1024.0, 1) + " GiB";
}

// seff's lines: nodes, cores, CPU time and efficiency, wall-clock time, memory.
void AppendCpuAndMemory(const state::JobRecord& job, const state::JobUsage& u, Time now,
                        std::string* o) {
  const Time end = state::IsFinal(job.state) && job.end_time > 0 ? job.end_time : now;
  const int64_t wall = std::max<int64_t>(end - u.start_time, 0);
  int cpus = 0;
  int64_t mem_limit = 0;
  for (const state::NodeUsage& n : u.nodes) {
    cpus += n.cpus;
    mem_limit = std::max(mem_limit, n.mem_limit_mib);
  }
  *o += "Nodes: " + std::to_string(u.nodes.size()) + "\n";
  if (!u.nodes.empty()) {
    *o += "Cores per node: " + std::to_string(u.nodes.front().cpus) + "\n";
  }
  const double cpu_s = u.CpuSeconds();
  const int64_t core_wall = wall * cpus;
  if (cpu_s >= 0) {
    *o += "CPU Utilized: " + Clock(static_cast<int64_t>(cpu_s)) + "\n";
    *o += "CPU Efficiency: " +
          (core_wall > 0 ? Fixed(100.0 * cpu_s / static_cast<double>(core_wall), 2)
                         : "0.00") +
          "% of " + Clock(core_wall) + " core-walltime\n";
  } else {
    *o += "CPU Utilized: unknown (no cgroup CPU accounting on its nodes)\n";
  }
  *o += "Job Wall-clock time: " + Clock(wall) + "\n";
  const int64_t mem = u.MemPeakMib();
  if (mem >= 0) {
    *o += "Memory Utilized: " + SeffMem(mem) + "\n";
    if (mem_limit > 0) {
      *o += "Memory Efficiency: " +
            Fixed(100.0 * static_cast<double>(mem) / static_cast<double>(mem_limit), 2) +
            "% of " + SeffMem(mem_limit) + "\n";
    }
  } else {
    *o += "Memory Utilized: unknown (no cgroup memory accounting on its nodes)\n";
  }
}

// The GPUs' figures, a row each, indented under "GPUs:"; false when none was sampled.
bool AppendGpus(const state::JobUsage& u, std::string* o) {
  int64_t samples = 0;
  for (const state::GpuUsage& g : u.gpus) samples = std::max(samples, g.samples);
  *o += "GPUs: " + std::to_string(u.gpus.size());
  if (samples == 0) {
    *o += ", not sampled (no NVML on its nodes)\n";
    return false;
  }
  *o += ", " + std::to_string(samples) + " samples each\n";
  const Align r = Align::kRight;
  Table t({{"GPU"},
           {"UTIL", r},
           {"P50", r},
           {"P95", r},
           {"MAX", r},
           {"MEM PEAK", r},
           {"POWER", r},
           {"SM CLOCK", r}});
  for (const state::GpuUsage& g : u.gpus) {
    const std::string name =
        (u.nodes.size() > 1 ? g.node + " " : std::string()) + std::to_string(g.gpu);
    if (g.samples == 0) {
      t.AddRow({name, "-", "-", "-", "-", "-", "-", "-"});
      continue;
    }
    t.AddRow({name, Fixed(g.UtilMean(), 1) + "%", std::to_string(g.UtilPercentile(0.5)),
              std::to_string(g.UtilPercentile(0.95)), std::to_string(g.util_max),
              g.mem_peak_mib >= 0 ? Gib(g.mem_peak_mib) : "-",
              g.PowerMean() >= 0 ? Fixed(g.PowerMean(), 0) + " W" : "-",
              g.SmClockMean() >= 0 ? Fixed(g.SmClockMean(), 0) + " MHz" : "-"});
  }
  std::string table = t.Render();
  // Indented under "GPUs:".
  for (size_t at = 0; at < table.size();) {
    const size_t nl = table.find('\n', at);
    *o += "  " +
          table.substr(at, nl == std::string::npos ? std::string::npos : nl - at + 1);
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  if (!o->empty() && o->back() != '\n') *o += "\n";
  *o += "GPU Utilization: " + Fixed(u.GpuUtilMean(), 1) + "% (mean over its GPUs)\n";
  return true;
}

}  // namespace

Result<std::string> FormatEff(std::string_view reply, Time now) {
  json j = json::parse(reply, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("job")) {
    return InvalidArgument("usage reply: not a job usage object");
  }
  state::JobRecord job;
  HACHI_RETURN_IF_ERROR(api::FromJson(j["job"], &job, "job"));
  std::vector<state::JobUsage> runs;
  if (j.contains("runs") && j["runs"].is_array()) {
    for (const json& r : j["runs"]) {
      Result<state::JobUsage> u = state::UsageFromJson(r.dump());
      if (!u.ok()) return u.status();
      runs.push_back(std::move(*u));
    }
  }
  std::string o;
  o += "Job ID: " + std::to_string(job.id) + "\n";
  o += "User/Group: " + job.req.user + "/" + std::to_string(job.spec.gid) + "\n";
  std::string state(state::JobStateName(job.state));
  if (state::IsFinal(job.state)) {
    state += " (exit code " + std::to_string(job.exit_code) + ")";
  }
  o += "State: " + state + "\n";
  if (job.start_time == 0 || runs.empty()) {
    o += job.start_time == 0 ? "The job has not run yet.\n"
                             : "Its run was not sampled (the agents sample every few "
                               "seconds; a run that short, or a node with "
                               "--usage-interval 0, has no figures).\n";
    return o;
  }
  const state::JobUsage& u = runs.back();  // the latest run
  AppendCpuAndMemory(job, u, now, &o);
  if (u.gpus.empty()) return o;
  if (!AppendGpus(u, &o)) return o;
  if (job.req.gpu_memory_mib > 0) {
    o += "GPU Memory: peak " + Gib(u.GpuMemPeakMib()) + " of " +
         Gib(job.req.gpu_memory_mib) + " promised (--gpu-mem)\n";
  }
  if (j.contains("findings") && j["findings"].is_array() && !j["findings"].empty()) {
    o += "Findings:\n";
    for (const json& f : j["findings"]) {
      if (!f.is_object() || !f.contains("kind") || !f.contains("text")) continue;
      o += "  " + f["kind"].get<std::string>() + ": " + f["text"].get<std::string>() +
           "\n";
    }
  } else {
    o += "Findings: none\n";
  }
  return o;
}

}  // namespace hachi::cli
