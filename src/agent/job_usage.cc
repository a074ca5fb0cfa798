#include "agent/job_usage.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "core/strings.h"

namespace hachi::agent {
namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream f(path);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

// The number in a one-number file ("12345\n"); -1 when absent or not one ("max").
int64_t ReadNumber(const std::string& path) {
  std::string text;
  if (!ReadFile(path, &text)) return -1;
  std::optional<long long> v = ParseInt(Trim(text));
  return v && *v >= 0 ? *v : -1;
}

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// utime + stime + cutime + cstime of /proc/PID/stat, in clock ticks; -1 when gone.
int64_t ProcessTicks(const std::string& proc_root, const std::string& pid) {
  std::string text;
  if (!ReadFile(proc_root + "/" + pid + "/stat", &text)) return -1;
  const size_t paren = text.rfind(')');  // the command may hold spaces and ')'
  if (paren == std::string::npos) return -1;
  std::vector<std::string_view> f = Split(std::string_view(text).substr(paren + 2), ' ');
  // After the command: state is field 3; utime..cstime are fields 14..17.
  if (f.size() < 15) return -1;
  int64_t ticks = 0;
  for (size_t k = 11; k <= 14; ++k) {
    std::optional<long long> v = ParseInt(f[k]);
    if (!v) return -1;
    ticks += *v;
  }
  return ticks;
}

}  // namespace

CgroupUse ReadCgroupUse(const std::vector<std::string>& procs_files,
                        const std::string& proc_root) {
  CgroupUse u;
  for (const std::string& procs : procs_files) {
    const std::string dir = DirOf(procs);
    std::string stat;
    if (ReadFile(dir + "/cpu.stat", &stat)) {  // v2 (v1's cpu controller has no usage)
      for (std::string_view line : Split(stat, '\n')) {
        if (line.rfind("usage_usec ", 0) != 0) continue;
        std::optional<long long> v = ParseInt(Trim(line.substr(11)));
        if (v) u.cpu_usec = *v;
      }
    }
    if (int64_t b = ReadNumber(dir + "/memory.current"); b >= 0) u.mem_mib = b >> 20;
    if (int64_t b = ReadNumber(dir + "/memory.peak"); b >= 0) u.mem_peak_mib = b >> 20;
    if (int64_t b = ReadNumber(dir + "/memory.usage_in_bytes"); b >= 0) {
      u.mem_mib = b >> 20;  // v1
    }
    if (int64_t b = ReadNumber(dir + "/memory.max_usage_in_bytes"); b >= 0) {
      u.mem_peak_mib = b >> 20;
    }
  }
  if (u.cpu_usec < 0 && !procs_files.empty()) {
    // v1: the processes in the cgroup now.
    std::string pids;
    if (ReadFile(procs_files.front(), &pids)) {
      const long hz = sysconf(_SC_CLK_TCK);
      int64_t ticks = 0;
      bool any = false;
      for (std::string_view pid : Split(pids, '\n')) {
        pid = Trim(pid);
        if (pid.empty()) continue;
        const int64_t t = ProcessTicks(proc_root, std::string(pid));
        if (t < 0) continue;
        ticks += t;
        any = true;
      }
      if (any && hz > 0) u.cpu_usec = ticks * 1'000'000 / hz;
    }
  }
  return u;
}

state::JobUsageSample JobSample(sched::JobId job, Time start_time, Time at,
                                const std::vector<int>& gpus,
                                const std::vector<state::GpuSample>& node_gpus,
                                const CgroupUse& cgroup) {
  state::JobUsageSample s;
  s.job = job;
  s.start_time = start_time;
  s.at = at;
  s.cpu_usec = cgroup.cpu_usec;
  s.mem_mib = cgroup.mem_mib;
  s.mem_peak_mib = cgroup.mem_peak_mib;
  for (int gpu : gpus) {
    for (const state::GpuSample& g : node_gpus) {
      if (g.gpu == gpu) s.gpus.push_back(g);
    }
  }
  return s;
}

}  // namespace hachi::agent
